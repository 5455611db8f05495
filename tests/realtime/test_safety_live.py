"""The safety matrix's live rows: homeTimeline, notificationAdded and notificationGroupUpdated hold the
viewer's blocks, mutes and muted words, with the change made on one API instance and the subscription
on another (each with its own realtime consumer and its own relations held in memory)."""

from __future__ import annotations

import contextlib
import uuid

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.app import schema
from feedfabric.core.events import Event
from feedfabric.core.settings import Settings
from feedfabric.db import notifications as notifications_db
from feedfabric.feeds.relations import relations_many
from feedfabric.realtime.delivery import deliver
from feedfabric.schema.core_schema import graphql_schema
from feedfabric.workers import notifications

from tests.feeds.test_post_visibility_paths import notify
from tests.feeds.test_safety_matrix import RELATIONS, WORDS, Rule, World, apply_relations
from tests.feeds.test_safety_matrix import _name as matrix_name
from tests.pipeline_support import eventually, group_runner, relay, running
from tests.realtime_support import HOME_SUB, TRANSPORT_WS, member_id, serve, wait_subscribed, ws_client
from tests.support import Api

# Every live surface, with the test below that holds it against the relations.
LIVE_ROWS = {
    "Subscription.homeTimeline": "test_live_home_timeline_holds_every_matrix_column_across_instances",
    "Subscription.notificationAdded": "test_live_notifications_hold_every_matrix_column_across_instances",
    "Subscription.notificationGroupUpdated": "test_live_notifications_hold_every_matrix_column_across_instances",
}
BLOCK = "mutation($e: String!) { block(externalUserId: $e) { id } }"
MUTE = "mutation($e: String!, $n: Boolean) { mute(externalUserId: $e, notifications: $n) { id } }"
WORD = "mutation($p: String!, $c: [FilterContext!]) { addMutedWord(phrase: $p, contexts: $c) { id } }"
REPOST = "mutation($p: ID!) { repost(postId: $p) { id } }"


def test_every_subscription_is_a_live_row() -> None:
    fields = set(graphql_schema(schema).subscription_type.fields)
    assert {f"Subscription.{f}" for f in fields} == set(LIVE_ROWS), "a new subscription needs its live row here"


async def test_live_home_timeline_holds_every_relation_across_instances(settings: Settings, pool: asyncpg.Pool) -> None:
    async with serve(settings) as writer, serve(settings) as reader, running(relay(settings).run):
        api = writer.api
        viewer = await api.member("looker")
        echo = await api.member("echo")
        names = ["shown", "blocked", "blocking", "muted", "quiet", "word_home", "word_tags", "unblocked"]
        tokens = {n: await api.member(n) for n in names}
        for who in ["echo", *names]:
            await api.follow(viewer, who)
        looker = await member_id(pool, "looker")
        async with ws_client(reader, TRANSPORT_WS, viewer) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(reader, 1)
            # A first item makes the reading instance hold the viewer's (empty) relations.
            warm = await api.post(tokens["shown"], "before anything")
            assert (await ws.next_data())["homeTimeline"]["post"]["id"] == warm
            held = reader.app.state.resources.relations
            assert held.peek(looker) is not None

            # Every change is made on the other instance.
            await api.gql(BLOCK, {"e": "blocked"}, token=viewer)
            await api.gql(BLOCK, {"e": "looker"}, token=tokens["blocking"])
            await api.gql(MUTE, {"e": "muted"}, token=viewer)
            await api.gql(MUTE, {"e": "quiet", "n": False}, token=viewer)
            await api.gql(WORD, {"p": "spoiler", "c": ["HOME"]}, token=viewer)
            await api.gql(WORD, {"p": "tagsonly", "c": ["TAGS"]}, token=viewer)
            await api.gql(BLOCK, {"e": "unblocked"}, token=viewer)
            await api.gql('mutation { unblock(externalUserId: "unblocked") { id } }', token=viewer)
            await api.follow(viewer, "unblocked")

            # The reading instance's consumer hears of them and lets go of what it held.
            async def forgotten() -> bool:
                return held.peek(looker) is None

            await eventually(forgotten)

            content = {"word_home": "a big SPOILER here", "word_tags": "only tagsonly here"}
            expected: set[str] = set()
            for name in names:
                post = await api.post(tokens[name], content.get(name, f"post by {name}"))
                repost = (await api.gql(REPOST, {"p": post}, token=echo))["repost"]["id"]
                if name in ("shown", "word_tags", "unblocked"):
                    expected |= {post, repost}
            got: set[str] = set()
            while not expected <= got:
                got.add((await ws.next_data())["homeTimeline"]["post"]["id"])
            assert await ws.nothing_within(1.0)
            assert got == expected


async def test_live_home_timeline_holds_every_matrix_column_across_instances(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """The page matrix's columns (tests/feeds/test_safety_matrix.py: RELATIONS, applied by its own
    apply_relations, expired mute and a muted word of every context included) against the live
    homeTimeline, with every change made on one instance after the subscription started on the other."""
    rule = Rule("HOME", "feed")
    async with serve(settings) as writer, serve(settings) as reader, running(relay(settings).run):
        api = writer.api
        viewer, echo = await api.member("looker"), await api.member("echo")
        world = World(api, viewer, {relation: await api.member(matrix_name(relation)) for relation in RELATIONS})
        for who in ["echo", *(matrix_name(r) for r in RELATIONS)]:
            await api.follow(viewer, who)
        async with ws_client(reader, TRANSPORT_WS, viewer) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(reader, 1)
            warm = await api.post(world.tokens["shown"], "before anything")
            assert (await ws.next_data())["homeTimeline"]["post"]["id"] == warm  # the reader holds the relations
            await apply_relations(world, pool)
            owner: dict[str, str] = {}
            for relation in RELATIONS:
                post = await api.post(world.tokens[relation], f"{WORDS.get(relation, 'plain')} hello")
                repost = (await api.gql(REPOST, {"p": post}, token=echo))["repost"]["id"]
                owner[post] = owner[repost] = relation
            expected = {item for item, relation in owner.items() if not rule.hides(relation)}
            got: set[str] = set()
            while not expected <= got:
                got.add((await ws.next_data())["homeTimeline"]["post"]["id"])
            assert await ws.nothing_within(1.0)
    assert {owner[i] for i in got} == {r for r in RELATIONS if not rule.hides(r)}
    assert got == expected


NOTIFY_SUB = "subscription { notificationAdded { kind actor { username } } }"
GROUP_SUB = "subscription { notificationGroupUpdated { kind actorCount sampleActors { username } } }"


@pytest.mark.parametrize("live", ["notificationAdded", "notificationGroupUpdated"])
async def test_live_notifications_and_groups_leave_out_hidden_actors(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, live: str
) -> None:
    runner = group_runner(settings, pool, redis, notifications.GROUP)
    async with serve(settings) as writer, serve(settings) as reader, running(relay(settings).run, runner.run):
        api = writer.api
        viewer = await api.member("looker")
        names = ["shown", "muted", "quiet", "worded"]
        tokens = {n: await api.member(n) for n in names}
        post = await api.post(viewer, "like me")
        await api.gql(MUTE, {"e": "muted"}, token=viewer)
        await api.gql(MUTE, {"e": "quiet", "n": False}, token=viewer)
        await api.gql(WORD, {"p": "spoiler", "c": ["NOTIFICATIONS"]}, token=viewer)
        async with ws_client(reader, TRANSPORT_WS, viewer) as ws:
            await ws.subscribe(NOTIFY_SUB if live == "notificationAdded" else GROUP_SUB)
            await wait_subscribed(reader, 1)
            like = "mutation($p: ID!) { likePost(postId: $p) { id } }"
            for name in ("muted", "quiet", "shown"):
                await api.gql(like, {"p": post}, token=tokens[name])
            await api.gql(
                'mutation($p: ID!) { addComment(postId: $p, content: "a spoiler!") { id } }',
                {"p": post},
                token=tokens["worded"],
            )
            if live == "notificationAdded":
                actors = set()
                while actors != {"quiet", "shown"}:
                    actors.add((await ws.next_data())["notificationAdded"]["actor"]["username"])
                assert await ws.nothing_within(1.0)
            else:
                # The like group as each like changed it: the muted liker is never counted or sampled.
                last = None
                while last is None or last["actorCount"] < 2:
                    last = (await ws.next_data())["notificationGroupUpdated"]
                    assert last["kind"] == "LIKE"
                    assert "muted" not in {a["username"] for a in last["sampleActors"]}
                assert {a["username"] for a in last["sampleActors"]} == {"quiet", "shown"}
                # Repeats of the like group may follow (one per event that changed it); no COMMENT group does,
                # its text holds a muted word.
                with contextlib.suppress(TimeoutError):
                    while True:
                        again = (await ws.next_data(timeout=1.0))["notificationGroupUpdated"]
                        assert again["kind"] == "LIKE" and again["actorCount"] == 2


@pytest.mark.parametrize("live", ["notificationAdded", "notificationGroupUpdated"])
async def test_live_notifications_hold_every_matrix_column_across_instances(
    settings: Settings, pool: asyncpg.Pool, live: str
) -> None:
    """The page matrix's columns against the live notifications: a mention by each column's author, written
    (as the worker would have, before the relations existed) after every change was made on the writing
    instance, then delivered by the reading instance's own delivery, which forgot what it held on the
    changes' events. Blocked either way hides as a mute with notifications does (a block racing a
    notification in flight); a mute without them, an expired one and a word of another context do not."""
    rule = Rule("NOTIFICATIONS", "notify")
    async with serve(settings) as writer, serve(settings) as reader, running(relay(settings).run):
        api = writer.api
        viewer = await api.member("looker")
        world = World(api, viewer, {relation: await api.member(matrix_name(relation)) for relation in RELATIONS})
        looker = await member_id(pool, "looker")
        resources = reader.app.state.resources
        async with ws_client(reader, TRANSPORT_WS, viewer) as ws:
            await ws.subscribe(NOTIFY_SUB if live == "notificationAdded" else GROUP_SUB)
            await wait_subscribed(reader, 1)
            held = resources.relations
            await relations_many(pool, [looker], held)  # the reader holds the viewer's (empty) relations
            await apply_relations(world, pool)

            async def forgotten() -> bool:
                return held.peek(looker) is None

            await eventually(forgotten)
            events = []
            for relation in RELATIONS:
                post = await api.post(world.tokens[relation], f"{WORDS.get(relation, 'plain')} hi @looker")
                await notify(pool, "looker", matrix_name(relation), "mention", post, None)
            rows = await pool.fetch(
                "SELECT id, group_id FROM notifications WHERE recipient_id = $1 AND kind = 'mention'", looker
            )
            for n, row in enumerate(rows, 1):
                kind, key, value = (
                    ("NotificationCreated", "notificationId", row["id"])
                    if live == "notificationAdded"
                    else ("NotificationGroupUpdated", "groupId", row["group_id"])
                )
                events.append(Event(n, kind, str(looker), 1, {"recipientId": str(looker), key: str(value)}))
            await deliver(pool, reader.hub, events, held)
            expected = {matrix_name(r) for r in RELATIONS if not rule.hides(r)}
            got: set[str] = set()
            while not expected <= got:
                data = (await ws.next_data())[live]
                actors = [data["actor"]] if live == "notificationAdded" else data["sampleActors"]
                got |= {a["username"] for a in actors}
            assert await ws.nothing_within(1.0)
    assert got == expected


async def test_the_worker_writes_no_notification_from_a_blocked_actor(api: Api, pool: asyncpg.Pool) -> None:
    viewer = await api.member("looker")
    await api.member("pest")
    await api.gql(BLOCK, {"e": "pest"}, token=viewer)
    looker, pest = await member_id(pool, "looker"), await member_id(pool, "pest")
    async with pool.acquire() as conn, conn.transaction():
        made = await notifications_db.add_for_event(
            conn, event_id=10**12, kind="follow", actor_id=pest, recipients=[(uuid.uuid4(), looker)]
        )
    assert made == []


async def test_a_replay_leaves_out_what_the_relations_hide(settings: Settings) -> None:
    """homeTimeline(since:) replays from Postgres: blocks and mutes in the statement, HOME words here."""
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob, carol = await api.member("alice"), await api.member("bob"), await api.member("carol")
        await api.follow(bob, "alice")
        await api.follow(bob, "carol")
        async with ws_client(server, TRANSPORT_WS, bob) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 1)
            first = await api.post(alice, "seen live")
            cursor = (await ws.next_data())["homeTimeline"]["cursor"]
        assert cursor == first
        await api.gql(WORD, {"p": "secret", "c": ["HOME"]}, token=bob)
        await api.gql(MUTE, {"e": "carol"}, token=bob)
        await api.post(alice, "a secret one")
        await api.post(carol, "carol speaks")
        kept = await api.post(alice, "an open one")
        async with ws_client(server, TRANSPORT_WS, bob) as ws:
            await ws.subscribe(HOME_SUB, {"since": cursor})
            replayed = (await ws.next_data())["homeTimeline"]["post"]["id"]
            assert replayed == kept
            assert await ws.nothing_within(1.0)


OWN_FIELDS = """subscription { homeTimeline { post { id
  author { username viewerMutes viewerBlocks } mentions { username viewerBlocks viewerMutes } } } }"""


async def test_a_live_items_own_relation_fields_are_as_of_the_item(settings: Settings, pool: asyncpg.Pool) -> None:
    """The fields a live item renders per viewer from the viewer's relations (`viewerBlocks`, `viewerMutes`)
    are read for each item, not kept from the socket's first one: changes made on the other instance show
    on the next item the subscription's own socket gets."""
    async with serve(settings) as writer, serve(settings) as reader, running(relay(settings).run):
        api = writer.api
        viewer, alice = await api.member("looker"), await api.member("alice")
        await api.member("carol")
        await api.member("dora")
        await api.follow(viewer, "alice")
        await api.gql(MUTE, {"e": "dora"}, token=viewer)
        async with ws_client(reader, TRANSPORT_WS, viewer) as ws:
            await ws.subscribe(OWN_FIELDS)
            await wait_subscribed(reader, 1)
            first = await api.post(alice, "hi @carol and @dora")
            shown = (await ws.next_data())["homeTimeline"]["post"]
            assert shown["id"] == first
            assert shown["author"] == {"username": "alice", "viewerMutes": False, "viewerBlocks": False}
            assert shown["mentions"] == [
                {"username": "carol", "viewerBlocks": False, "viewerMutes": False},
                {"username": "dora", "viewerBlocks": False, "viewerMutes": True},
            ]

            # On the other instance: carol blocked, dora unmuted, alice muted then unmuted.
            await api.gql(BLOCK, {"e": "carol"}, token=viewer)
            await api.gql('mutation { unmute(externalUserId: "dora") { id } }', token=viewer)
            await api.gql(MUTE, {"e": "alice"}, token=viewer)
            await api.gql('mutation { unmute(externalUserId: "alice") { id } }', token=viewer)
            second = await api.post(alice, "again @carol and @dora")
            shown = (await ws.next_data())["homeTimeline"]["post"]
    assert shown["id"] == second
    assert shown["author"] == {"username": "alice", "viewerMutes": False, "viewerBlocks": False}
    assert shown["mentions"] == [
        {"username": "carol", "viewerBlocks": True, "viewerMutes": False},
        {"username": "dora", "viewerBlocks": False, "viewerMutes": False},
    ]
