"""worker-notifications through the real relay and runner, and notificationAdded over a real WebSocket."""

from __future__ import annotations

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.settings import Settings
from feedfabric.workers import notifications
from feedfabric.workers.base import WorkerContext

from tests.pipeline_support import InlineGroup, eventually, group_runner, relay, running
from tests.realtime_support import NOTIFY_SUB, PROTOCOLS, serve, wait_subscribed, ws_client

LIST = """{ notifications(first: 50) { unreadCount edges { node {
  kind read actor { username } post { id content } comment { id content } } } } }"""


def _kinds(data: dict) -> list[tuple[str, str]]:
    return sorted((e["node"]["kind"], e["node"]["actor"]["username"]) for e in data["notifications"]["edges"])


async def test_each_kind_once_never_to_yourself_and_redelivery_doubles_nothing(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    runner = group_runner(settings, pool, redis, notifications.GROUP)
    async with serve(settings) as server, running(relay(settings).run, runner.run):
        api = server.api
        alice, bob, carol = await api.member("alice"), await api.member("bob"), await api.member("carol")
        dave = await api.member("dave")
        post = await api.post(alice, "hello @carol")  # MENTION carol
        await api.follow(bob, "alice")  # FOLLOW alice
        await api.gql('mutation { unfollow(externalUserId: "alice") { id } }', token=bob)  # takes it back
        await api.follow(bob, "alice")  # FOLLOW alice, once
        await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": post}, token=bob)  # LIKE alice
        await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": post}, token=alice)  # own: nothing
        await api.gql("mutation($p: ID!) { unlikePost(postId: $p) { id } }", {"p": post}, token=bob)  # takes it back
        await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": post}, token=bob)  # LIKE alice, once
        await api.gql(  # COMMENT alice (not also MENTION alice); MENTION dave
            'mutation($p: ID!) { addComment(postId: $p, content: "nice @alice @dave") { id } }', {"p": post}, token=bob
        )
        await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": post}, token=carol)  # REPOST alice
        await api.gql(  # an edit: only dave is newly mentioned; carol is not told twice
            'mutation($p: ID!) { updatePost(id: $p, content: "hello @carol and @dave") { id } }',
            {"p": post},
            token=alice,
        )

        expected_alice = [("COMMENT", "bob"), ("FOLLOW", "bob"), ("LIKE", "bob"), ("REPOST", "carol")]

        async def alice_has_all() -> dict | None:
            data = await api.gql(LIST, token=alice)
            return data if _kinds(data) == expected_alice else None

        data = await eventually(alice_has_all)
        assert data["notifications"]["unreadCount"] == 4
        repost = next(e["node"] for e in data["notifications"]["edges"] if e["node"]["kind"] == "REPOST")
        assert repost["post"]["id"] == post  # "carol reposted your post"
        comment = next(e["node"] for e in data["notifications"]["edges"] if e["node"]["kind"] == "COMMENT")
        assert comment["comment"]["content"] == "nice @alice @dave"

        async def dave_has_two() -> dict | None:
            d = await api.gql(LIST, token=dave)
            return d if len(d["notifications"]["edges"]) == 2 else None

        assert _kinds(await eventually(dave_has_two)) == [("MENTION", "alice"), ("MENTION", "bob")]
        assert _kinds(await api.gql(LIST, token=carol)) == [("MENTION", "alice")]
        assert _kinds(await api.gql(LIST, token=bob)) == []

        # Redelivery: the relay publishes the whole outbox again (same eventIds) and the runner sees it all twice.
        created = await pool.fetchval("SELECT count(*) FROM outbox WHERE event_type = 'NotificationCreated'")
        await pool.execute("UPDATE outbox SET published_at = NULL")
        await eventually(lambda: _all_published(pool))
        rows = await pool.fetchval("SELECT count(*) FROM notifications")
        await eventually(lambda: _runner_caught_up(pool, runner))
        assert await pool.fetchval("SELECT count(*) FROM notifications") == rows == 7
        assert await pool.fetchval("SELECT count(*) FROM outbox WHERE event_type = 'NotificationCreated'") == created
        assert _kinds(await api.gql(LIST, token=alice)) == expected_alice

        # And the handler itself, run twice on one event without processed_events, writes once.
        inline = InlineGroup(notifications.GROUP, WorkerContext(settings=settings, pool=pool, redis=redis))
        [event] = [e for e in await inline.events() if e.type == "CommentCreated"]
        for _ in range(2):
            await inline.apply(event)
        assert await pool.fetchval("SELECT count(*) FROM notifications") == 7
        assert await pool.fetchval("SELECT count(*) FROM outbox WHERE event_type = 'NotificationCreated'") == created

        assert await api.gql("mutation { markNotificationsRead }", token=alice) == {"markNotificationsRead": 4}
        assert (await api.gql(LIST, token=alice))["notifications"]["unreadCount"] == 0


async def _all_published(pool: asyncpg.Pool) -> bool:
    return bool(await pool.fetchval("SELECT count(*) = 0 FROM outbox WHERE published_at IS NULL"))


async def _runner_caught_up(pool: asyncpg.Pool, runner: object) -> bool:
    # Duplicates stop at processed_events; once the group has no lag left, nothing more can arrive.
    consumer = runner.consumer  # type: ignore[attr-defined]
    for tp in consumer.assignment():
        end = (await consumer.end_offsets([tp]))[tp]
        if await consumer.position(tp) < end:
            return False
    return True


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_notifications_arrive_live(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, protocol: str
) -> None:
    runner = group_runner(settings, pool, redis, notifications.GROUP)
    async with serve(settings) as server, running(relay(settings).run, runner.run):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        async with ws_client(server, protocol, alice) as ws:
            await ws.subscribe(NOTIFY_SUB)
            await wait_subscribed(server, 1)
            await api.follow(bob, "alice")
            got = (await ws.next_data())["notificationAdded"]
            assert got["kind"] == "FOLLOW" and got["actor"] == {"username": "bob"} and got["read"] is False
            post = await api.post(alice, "like me")
            await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": post}, token=bob)
            got = (await ws.next_data())["notificationAdded"]
            assert got["kind"] == "LIKE" and got["post"] == {"id": post}
            assert await ws.nothing_within(0.5)
        listed = await api.gql(LIST, token=alice)
        assert _kinds(listed) == [("FOLLOW", "bob"), ("LIKE", "bob")]
