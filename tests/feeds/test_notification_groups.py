"""Grouped notifications: what groups, what an unlike and a read do, exact counts under concurrency, paging, live.

Most tests apply worker-notifications' handler to the outbox rows the API
wrote, in order, each in its own transaction (as the runner does), so they
need no broker; the redelivery and live tests run the real relay and runner.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.ids import new_id
from feedfabric.core.settings import Settings
from feedfabric.db import notification_groups
from feedfabric.workers import notifications
from feedfabric.workers.base import WorkerContext

from tests.pipeline_support import InlineGroup, eventually, group_runner, relay, running
from tests.realtime_support import PROTOCOLS, serve, wait_subscribed, ws_client
from tests.support import Api

GROUPS = """query($after: String, $first: Int) { notificationGroups(first: $first, after: $after) {
  unreadCount pageInfo { hasNextPage endCursor }
  edges { cursor node { key kind actorCount notificationCount read latestAt
    sampleActors { username } post { id } comment { id } } } } }"""
GROUP_SUB = """subscription { notificationGroupUpdated {
  key kind actorCount notificationCount read sampleActors { username } post { id } } }"""
LIKE = "mutation($p: ID!) { likePost(postId: $p) { id } }"
UNLIKE = "mutation($p: ID!) { unlikePost(postId: $p) { id } }"
READ_GROUP = "mutation($k: String!) { markNotificationGroupRead(key: $k) { key read actorCount } }"
UNFOLLOW = "mutation($e: String!) { unfollow(externalUserId: $e) { id } }"
REPOST = "mutation($p: ID!) { repost(postId: $p) { id } }"
DELETE_POST = "mutation($id: ID!) { deletePost(id: $id) }"
LIST = "{ notifications { edges { node { kind actor { username } } } } }"


@pytest.fixture
def worker(settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis) -> InlineGroup:
    return InlineGroup(notifications.GROUP, WorkerContext(settings=settings, pool=pool, redis=redis))


async def groups(api: Api, token: str, first: int = 50, after: str | None = None) -> dict[str, Any]:
    return (await api.gql(GROUPS, {"first": first, "after": after}, token=token))["notificationGroups"]


def nodes(connection: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["node"] for e in connection["edges"]]


def by_kind(connection: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [n for n in nodes(connection) if n["kind"] == kind]


async def test_likes_reposts_and_follows_group_by_target_while_comments_and_mentions_stay_single(
    api: Api, worker: InlineGroup
) -> None:
    ava = await api.member("ava")
    fans = [await api.member(f"fan{i}") for i in range(3)]
    first, second = await api.post(ava, "first"), await api.post(ava, "second")
    for i, fan in enumerate(fans):
        await api.follow(fan, "ava")
        await api.gql(LIKE, {"p": first}, token=fan)
        await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": first}, token=fan)
        await api.gql(
            'mutation($p: ID!) { addComment(postId: $p, content: "hi @ava") { id } }', {"p": first}, token=fan
        )
        await api.post(fan, f"hello @ava {i}")
    await api.gql(LIKE, {"p": second}, token=fans[0])
    await worker.catch_up()

    listed = await groups(api, ava)
    likes = {n["post"]["id"]: n for n in by_kind(listed, "LIKE")}
    assert set(likes) == {first, second}
    assert (likes[first]["actorCount"], likes[first]["notificationCount"]) == (3, 3)
    assert [a["username"] for a in likes[first]["sampleActors"]] == ["fan2", "fan1", "fan0"]  # most recent first
    assert likes[second]["actorCount"] == 1
    [reposts] = by_kind(listed, "REPOST")
    assert reposts["actorCount"] == 3 and reposts["post"]["id"] == first
    [follows] = by_kind(listed, "FOLLOW")
    assert follows["actorCount"] == 3 and follows["post"] is None
    assert len(by_kind(listed, "COMMENT")) == 3 and all(n["actorCount"] == 1 for n in by_kind(listed, "COMMENT"))
    assert len(by_kind(listed, "MENTION")) == 3
    assert listed["unreadCount"] == len(listed["edges"]) == 2 + 1 + 1 + 3 + 3
    times = [n["latestAt"] for n in nodes(listed)]
    assert times == sorted(times, reverse=True)


async def test_sample_actors_stop_at_eight_while_actor_count_counts_all(api: Api, worker: InlineGroup) -> None:
    ava = await api.member("ava")
    post = await api.post(ava, "popular")
    for i in range(10):
        await api.gql(LIKE, {"p": post}, token=await api.member(f"liker{i}"))
    await worker.catch_up()
    [group] = nodes(await groups(api, ava))
    assert group["actorCount"] == 10
    assert [a["username"] for a in group["sampleActors"]] == [f"liker{i}" for i in range(9, 1, -1)]


SUSPEND = "mutation($e: String!) { suspendMember(externalUserId: $e) { status } }"
UNSUSPEND = "mutation($e: String!) { unsuspendMember(externalUserId: $e) { status } }"


async def test_a_suspended_actor_leaves_sample_actors_and_actor_count_until_unsuspended(
    api: Api, worker: InlineGroup
) -> None:
    ava, bob, cal = await api.member("ava"), await api.member("bob"), await api.member("cal")
    admin = await api.member("mod", admin=True)
    post = await api.post(ava, "liked by two")
    for token in (bob, cal):
        await api.gql(LIKE, {"p": post}, token=token)
    await worker.catch_up()
    await api.gql(SUSPEND, {"e": "cal"}, token=admin)
    [group] = nodes(await groups(api, ava))
    assert (group["actorCount"], [a["username"] for a in group["sampleActors"]]) == (1, ["bob"])
    await api.gql(UNSUSPEND, {"e": "cal"}, token=admin)
    [group] = nodes(await groups(api, ava))
    assert (group["actorCount"], [a["username"] for a in group["sampleActors"]]) == (2, ["cal", "bob"])


async def test_an_unlike_removes_its_actor_and_the_group_with_its_last_actor(api: Api, worker: InlineGroup) -> None:
    ava, bob, cal = await api.member("ava"), await api.member("bob"), await api.member("cal")
    post = await api.post(ava, "like me")
    for token in (bob, cal):
        await api.gql(LIKE, {"p": post}, token=token)
    await worker.catch_up()
    await api.gql(UNLIKE, {"p": post}, token=bob)
    await worker.catch_up()
    [group] = nodes(await groups(api, ava))
    assert (group["actorCount"], group["notificationCount"]) == (1, 1)
    assert [a["username"] for a in group["sampleActors"]] == ["cal"]

    await api.gql(UNLIKE, {"p": post}, token=cal)
    await worker.catch_up()
    listed = await groups(api, ava)
    assert listed["edges"] == [] and listed["unreadCount"] == 0
    assert (await api.gql("{ notifications { edges { node { id } } } }", token=ava))["notifications"]["edges"] == []


async def announced(pool: asyncpg.Pool) -> int:
    """NotificationCreated events of the notifications that stand: each is a notificationAdded sent live
    (the realtime path skips one whose notification was taken back before it was rendered)."""
    return int(
        await pool.fetchval(
            """SELECT count(*) FROM outbox o JOIN notifications n ON n.id = (o.payload->>'notificationId')::uuid
               WHERE o.event_type = 'NotificationCreated'"""
        )
    )


async def told(api: Api, worker: InlineGroup, pool: asyncpg.Pool, like: str, post: str, token: str) -> None:
    """`like` (LIKE or UNLIKE) applied, and whatever it notified older than its live push takes."""
    await api.gql(like, {"p": post}, token=token)
    await worker.catch_up()
    await pool.execute("UPDATE notifications SET created_at = created_at - interval '1 minute'")


async def test_a_like_toggled_many_times_counts_once_and_is_announced_once(
    api: Api, worker: InlineGroup, pool: asyncpg.Pool
) -> None:
    ava, bob = await api.member("ava"), await api.member("bob")
    post = await api.post(ava, "toggle")
    for _ in range(4):
        await api.gql(LIKE, {"p": post}, token=bob)
        await api.gql(UNLIKE, {"p": post}, token=bob)
    await api.gql(LIKE, {"p": post}, token=bob)
    await worker.catch_up()
    [group] = nodes(await groups(api, ava))
    assert (group["actorCount"], group["notificationCount"]) == (1, 1)
    assert await announced(pool) == 1


async def test_a_redo_of_what_the_recipient_was_told_is_not_announced_again_within_a_day(
    api: Api, worker: InlineGroup, pool: asyncpg.Pool
) -> None:
    ava, bob = await api.member("ava"), await api.member("bob")
    post = await api.post(ava, "toggle slowly")
    await told(api, worker, pool, LIKE, post, bob)
    await told(api, worker, pool, UNLIKE, post, bob)
    await told(api, worker, pool, LIKE, post, bob)
    assert await announced(pool) == 0  # the standing like: its group was sent, not a second notificationAdded
    assert (await groups(api, ava))["unreadCount"] == 1
    await told(api, worker, pool, UNLIKE, post, bob)
    await pool.execute("UPDATE notification_take_backs SET taken_at = now() - interval '25 hours'")
    await told(api, worker, pool, LIKE, post, bob)
    assert await announced(pool) == 1  # a day on, it is news again


async def repost_and_delete(api: Api, token: str, post: str) -> None:
    repost = (await api.gql(REPOST, {"p": post}, token=token))["repost"]["id"]
    await api.gql(DELETE_POST, {"id": repost}, token=token)


async def listed_kinds(api: Api, token: str) -> list[tuple[str, str]]:
    edges = (await api.gql(LIST, token=token))["notifications"]["edges"]
    return [(e["node"]["kind"], e["node"]["actor"]["username"]) for e in edges]


async def test_a_follow_toggled_many_times_counts_once_and_is_announced_once(
    api: Api, worker: InlineGroup, pool: asyncpg.Pool
) -> None:
    ava, bob = await api.member("ava"), await api.member("bob")
    for _ in range(4):
        await api.follow(bob, "ava")
        await api.gql(UNFOLLOW, {"e": "ava"}, token=bob)
    await api.follow(bob, "ava")
    await worker.catch_up()
    [group] = nodes(await groups(api, ava))
    assert (group["kind"], group["actorCount"], group["notificationCount"]) == ("FOLLOW", 1, 1)
    assert await listed_kinds(api, ava) == [("FOLLOW", "bob")]
    assert await announced(pool) == 1


async def test_an_unfollow_removes_its_actor_and_the_group_with_its_last_actor(api: Api, worker: InlineGroup) -> None:
    ava, bob, cal = await api.member("ava"), await api.member("bob"), await api.member("cal")
    for token in (bob, cal):
        await api.follow(token, "ava")
    await worker.catch_up()
    await api.gql(UNFOLLOW, {"e": "ava"}, token=bob)
    await worker.catch_up()
    [group] = nodes(await groups(api, ava))
    assert (group["actorCount"], group["notificationCount"]) == (1, 1)
    assert [a["username"] for a in group["sampleActors"]] == ["cal"]

    await api.gql(UNFOLLOW, {"e": "ava"}, token=cal)
    await worker.catch_up()
    assert nodes(await groups(api, ava)) == [] and await listed_kinds(api, ava) == []


async def test_a_repost_deleted_and_made_again_many_times_counts_once_and_is_announced_once(
    api: Api, worker: InlineGroup, pool: asyncpg.Pool
) -> None:
    ava, bob = await api.member("ava"), await api.member("bob")
    post = await api.post(ava, "share me")
    for _ in range(4):
        await repost_and_delete(api, bob, post)
    await api.gql(REPOST, {"p": post}, token=bob)
    await worker.catch_up()
    [group] = nodes(await groups(api, ava))
    assert (group["kind"], group["actorCount"], group["notificationCount"]) == ("REPOST", 1, 1)
    assert await listed_kinds(api, ava) == [("REPOST", "bob")]
    assert await announced(pool) == 1


async def test_deleting_a_repost_takes_back_only_its_reposters_notification(api: Api, worker: InlineGroup) -> None:
    ava, bob, cal = await api.member("ava"), await api.member("bob"), await api.member("cal")
    post = await api.post(ava, "share me")
    await api.gql(REPOST, {"p": post}, token=cal)
    await repost_and_delete(api, bob, post)
    await api.gql(DELETE_POST, {"id": await api.post(bob, "an ordinary post")}, token=bob)  # takes nothing back
    await worker.catch_up()
    [group] = nodes(await groups(api, ava))
    assert (group["actorCount"], group["notificationCount"]) == (1, 1)
    assert [a["username"] for a in group["sampleActors"]] == ["cal"]


async def test_a_redelivered_unfollow_or_repost_deletion_never_takes_back_a_later_one(
    api: Api, worker: InlineGroup
) -> None:
    ava, bob = await api.member("ava"), await api.member("bob")
    post = await api.post(ava, "again")
    await api.follow(bob, "ava")
    await api.gql(UNFOLLOW, {"e": "ava"}, token=bob)
    await api.follow(bob, "ava")
    await repost_and_delete(api, bob, post)
    await api.gql(REPOST, {"p": post}, token=bob)
    events = await worker.events()
    undos = [e for e in events if e.type in ("MemberUnfollowed", "PostDeleted")]
    assert len(undos) == 2
    # Every event twice, the second time after all the first; then the undos once more, after the follow
    # and the repost that came after them.
    for event in events + events + undos:
        await worker.apply(event)
    counts = {n["kind"]: (n["actorCount"], n["notificationCount"]) for n in nodes(await groups(api, ava))}
    assert counts == {"FOLLOW": (1, 1), "REPOST": (1, 1)}


async def test_a_redelivered_like_or_unlike_changes_nothing(api: Api, worker: InlineGroup, pool: asyncpg.Pool) -> None:
    ava, bob, cal = await api.member("ava"), await api.member("bob"), await api.member("cal")
    post = await api.post(ava, "once")
    await api.gql(LIKE, {"p": post}, token=bob)
    await api.gql(LIKE, {"p": post}, token=cal)
    await api.gql(UNLIKE, {"p": post}, token=cal)
    await api.gql(LIKE, {"p": post}, token=cal)
    events = await worker.events()
    unlike = next(e for e in events if e.type == "PostUnliked")
    # Every event twice, the second time after all the first; then the unlike once more, after the like
    # that followed it: it must not take that later like back.
    for event in events + events + [unlike]:
        await worker.apply(event)
    [group] = nodes(await groups(api, ava))
    assert (group["actorCount"], group["notificationCount"]) == (2, 2)
    # Joining a notification that already has its group again counts nothing.
    async with pool.acquire() as conn, conn.transaction():
        notification_ids = [r["id"] for r in await conn.fetch("SELECT id FROM notifications")]
        assert await notification_groups.join(conn, [(n, new_id()) for n in notification_ids]) == {}
    [group] = nodes(await groups(api, ava))
    assert (group["actorCount"], group["notificationCount"]) == (2, 2)


async def test_fifty_concurrent_likers_of_one_post_are_counted_exactly(
    api: Api, worker: InlineGroup, pool: asyncpg.Pool
) -> None:
    ava = await api.member("ava")
    post = await api.post(ava, "hot")
    likers = [await api.member(f"hot{i}") for i in range(50)]
    await asyncio.gather(*(api.gql(LIKE, {"p": post}, token=t) for t in likers))
    likes = [e for e in await worker.events() if e.type == "PostLiked"]
    assert len(likes) == 50
    # Fifty transactions at once on one group, more than the pool has connections: they queue on its row.
    await asyncio.gather(*(worker.apply(e) for e in likes))
    [group] = nodes(await groups(api, ava))
    assert (group["actorCount"], group["notificationCount"]) == (50, 50)
    assert await pool.fetchval("SELECT count(*) FROM notification_groups") == 1
    assert await pool.fetchval("SELECT count(*) FROM notification_group_actors") == 50


async def test_a_read_group_stays_read_and_the_next_like_starts_a_new_group(api: Api, worker: InlineGroup) -> None:
    ava, bob, cal = await api.member("ava"), await api.member("bob"), await api.member("cal")
    post = await api.post(ava, "read me")
    await api.gql(LIKE, {"p": post}, token=bob)
    await worker.catch_up()
    [old] = nodes(await groups(api, ava))
    read = (await api.gql(READ_GROUP, {"k": old["key"]}, token=ava))["markNotificationGroupRead"]
    assert read == {"key": old["key"], "read": True, "actorCount": 1}
    listed = await api.gql("{ notifications { unreadCount edges { node { read } } } }", token=ava)
    assert listed["notifications"]["unreadCount"] == 0

    await api.gql(LIKE, {"p": post}, token=cal)
    await worker.catch_up()
    listed_groups = await groups(api, ava)
    assert listed_groups["unreadCount"] == 1
    new, again = nodes(listed_groups)
    assert new["key"] != old["key"] and again["key"] == old["key"]
    assert (new["read"], new["actorCount"], [a["username"] for a in new["sampleActors"]]) == (False, 1, ["cal"])
    assert (again["read"], again["actorCount"]) == (True, 1)


async def test_mark_notifications_read_up_to_closes_only_groups_with_nothing_unread(
    api: Api, worker: InlineGroup
) -> None:
    ava, bob, cal = await api.member("ava"), await api.member("bob"), await api.member("cal")
    post = await api.post(ava, "partly read")
    await api.follow(bob, "ava")
    await api.gql(LIKE, {"p": post}, token=bob)
    await worker.catch_up()
    await api.gql(LIKE, {"p": post}, token=cal)
    await worker.catch_up()
    listed = await api.gql("{ notifications { edges { node { id kind actor { username } } } } }", token=ava)
    bob_like = next(
        e["node"]["id"]
        for e in listed["notifications"]["edges"]
        if e["node"]["kind"] == "LIKE" and e["node"]["actor"]["username"] == "bob"
    )
    # Up to bob's like: the FOLLOW group is all read, the LIKE group still holds cal's unread like.
    assert (await api.gql("mutation($u: ID!) { markNotificationsRead(upTo: $u) }", {"u": bob_like}, token=ava)) == {
        "markNotificationsRead": 2
    }
    state = {n["kind"]: n["read"] for n in nodes(await groups(api, ava))}
    assert state == {"FOLLOW": True, "LIKE": False}
    assert (await groups(api, ava))["unreadCount"] == 1

    await api.gql("mutation { markNotificationsRead }", token=ava)
    assert (await groups(api, ava))["unreadCount"] == 0


@pytest.mark.parametrize("digit", ["\u0661", "\uff11", "\u0967"], ids=["arabic-indic", "fullwidth", "devanagari"])
async def test_mark_notifications_read_up_to_an_id_of_non_ascii_digits_is_bad_input(
    api: Api, worker: InlineGroup, digit: str
) -> None:
    ava, bob = await api.member("ava"), await api.member("bob")
    await api.follow(bob, "ava")
    await worker.catch_up()
    refused = await api.raw("mutation($u: ID!) { markNotificationsRead(upTo: $u) }", {"u": digit * 32}, token=ava)
    assert [e["extensions"]["code"] for e in refused["errors"]] == ["BAD_USER_INPUT"]
    assert (await groups(api, ava))["unreadCount"] == 1


async def test_a_group_key_must_be_the_viewers_own(api: Api, worker: InlineGroup) -> None:
    ava, bob = await api.member("ava"), await api.member("bob")
    await api.follow(bob, "ava")
    await worker.catch_up()
    [group] = nodes(await groups(api, ava))
    assert await api.error_codes(READ_GROUP, {"k": group["key"]}, token=bob) == ["NOT_FOUND"]
    assert await api.error_codes(READ_GROUP, {"k": "not-a-key"}, token=ava) == ["BAD_USER_INPUT"]
    assert await api.error_codes(READ_GROUP, {"k": group["key"]}) == ["UNAUTHENTICATED"]
    assert nodes(await groups(api, ava))[0]["read"] is False


async def test_groups_page_by_latest_change_without_repeats(api: Api, worker: InlineGroup) -> None:
    ava = await api.member("ava")
    fan = await api.member("fan")
    posts = [await api.post(ava, f"post {i}") for i in range(7)]
    for post in posts:
        await api.gql(LIKE, {"p": post}, token=fan)
    await worker.catch_up()
    seen: list[str] = []
    after = None
    while True:
        page = await groups(api, ava, first=3, after=after)
        seen += [n["post"]["id"] for n in nodes(page)]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert seen == list(reversed(posts))
    assert await api.error_codes(GROUPS, {"first": 3, "after": "garbage"}, token=ava) == ["BAD_USER_INPUT"]


async def test_a_groups_post_follows_the_visibility_rule(api: Api, worker: InlineGroup) -> None:
    ava, bob = await api.member("ava"), await api.member("bob")
    admin = await api.member("mod", admin=True)
    post = await api.post(ava, "soon held, then gone")
    await api.gql(LIKE, {"p": post}, token=bob)
    await worker.catch_up()
    await api.gql("mutation($id: ID!) { holdPost(id: $id) { id } }", {"id": post}, token=admin)
    assert nodes(await groups(api, ava))[0]["post"] == {"id": post}  # the author still sees their held post
    await api.gql("mutation($id: ID!) { deletePost(id: $id) }", {"id": post}, token=ava)
    [group] = nodes(await groups(api, ava))
    assert group["post"] is None and group["actorCount"] == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_each_change_of_a_group_is_sent_live(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, protocol: str
) -> None:
    runner = group_runner(settings, pool, redis, notifications.GROUP)
    async with serve(settings) as server, running(relay(settings).run, runner.run):
        api = server.api
        ava, bob, cal = await api.member("ava"), await api.member("bob"), await api.member("cal")
        post = await api.post(ava, "watch the count")
        async with ws_client(server, protocol, ava) as ws:
            await ws.subscribe(GROUP_SUB)
            await wait_subscribed(server, 1)
            await api.gql(LIKE, {"p": post}, token=bob)
            got = (await ws.next_data())["notificationGroupUpdated"]
            assert (got["kind"], got["actorCount"], got["post"]) == ("LIKE", 1, {"id": post})
            await api.gql(LIKE, {"p": post}, token=cal)
            again = (await ws.next_data())["notificationGroupUpdated"]
            assert again["key"] == got["key"] and again["actorCount"] == 2
            assert [a["username"] for a in again["sampleActors"]] == ["cal", "bob"]
            await api.gql(UNLIKE, {"p": post}, token=bob)
            shrunk = (await ws.next_data())["notificationGroupUpdated"]
            assert (shrunk["key"], shrunk["actorCount"]) == (got["key"], 1)
            # Emptied, it is sent at zero (the client drops it); liked again, it is back under its key.
            await api.gql(UNLIKE, {"p": post}, token=cal)
            emptied = (await ws.next_data())["notificationGroupUpdated"]
            assert (emptied["key"], emptied["actorCount"], emptied["notificationCount"]) == (got["key"], 0, 0)
            await api.gql(LIKE, {"p": post}, token=bob)
            back = (await ws.next_data())["notificationGroupUpdated"]
            assert (back["key"], back["actorCount"]) == (got["key"], 1)
            assert await ws.nothing_within(0.5)

        async def listed() -> dict[str, Any] | None:
            page = await groups(api, ava)
            return page if nodes(page) and nodes(page)[0]["actorCount"] == 1 else None

        assert nodes(await eventually(listed))[0]["key"] == got["key"]


async def test_a_group_emptied_by_a_block_is_neither_listed_nor_counted_unread(api: Api, worker: InlineGroup) -> None:
    ava, bob, cy = await api.member("ava"), await api.member("bob"), await api.member("cy")
    first, second = await api.post(ava, "one"), await api.post(ava, "two")
    await api.gql(LIKE, {"p": first}, token=bob)
    await api.gql(LIKE, {"p": second}, token=cy)
    await worker.catch_up()
    assert (await groups(api, ava))["unreadCount"] == 2

    await api.gql("mutation($e: String!) { block(externalUserId: $e) { id } }", {"e": "bob"}, token=ava)
    listed = await groups(api, ava)
    assert [n["post"]["id"] for n in nodes(listed)] == [second]
    assert listed["unreadCount"] == 1
