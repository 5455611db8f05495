"""`feedfabric verify`: missing, extra and misordered entries, the rules it must not flag, and --repair."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.ids import new_id
from feedfabric.core.settings import Settings
from feedfabric.db.pool import transaction
from feedfabric.feeds import timelines, verify
from feedfabric.workers import notifications
from feedfabric.workers.base import WorkerContext

from tests.pipeline_support import InlineGroup
from tests.support import Api


async def fan_out_all(api: Api, pool: asyncpg.Pool, redis: aioredis.Redis) -> None:
    """What worker-events does for each unprocessed PostCreated, processed_events row included."""
    rows = await pool.fetch(
        "SELECT id, payload FROM outbox o WHERE event_type = 'PostCreated' AND NOT EXISTS"
        " (SELECT 1 FROM processed_events p WHERE p.group_name = 'worker-events' AND p.event_id = o.id) ORDER BY id"
    )
    for row in rows:
        async with transaction(pool) as conn:
            await conn.execute(
                "INSERT INTO processed_events (group_name, event_id) VALUES ('worker-events', $1)", row["id"]
            )
            await timelines.fan_out(conn, redis, api.settings, uuid.UUID(row["payload"]["postId"]))


async def member_id(pool: asyncpg.Pool, name: str) -> uuid.UUID:
    return await pool.fetchval("SELECT id FROM members WHERE external_id = $1", name)  # type: ignore[no-any-return]


async def scene(api: Api, pool: asyncpg.Pool, redis: aioredis.Redis) -> dict[str, str]:
    """maya follows theo and #jazz; theo posts three times, ines once with #jazz."""
    tokens = {n: await api.member(n) for n in ("maya", "theo", "ines", "zed")}
    await api.follow(tokens["maya"], "theo")
    await api.gql('mutation { followTag(tag: "jazz") }', token=tokens["maya"])
    for i in range(3):
        await api.post(tokens["theo"], f"theo {i}")
    await api.post(tokens["ines"], "listening #jazz")
    await fan_out_all(api, pool, redis)
    return tokens


async def test_a_pushed_timeline_verifies_clean(api: Api, pool: asyncpg.Pool, redis: aioredis.Redis) -> None:
    await scene(api, pool, redis)
    report = await verify.verify(api.settings)
    assert report.clean, report.summary()
    assert report.timelines == 3 and report.entries == 4 + 3 + 1  # maya, theo, ines


@pytest.mark.redis_cluster
async def test_missing_extra_and_misordered_entries_are_reported_and_repaired(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis, settings: Settings
) -> None:
    tokens = await scene(api, pool, redis)
    maya = await member_id(pool, "maya")
    key = timelines.feed_key(maya)
    ids = await timelines.timeline_ids(redis, maya)
    await redis.zrem(key, timelines.encode_member(ids[1]))  # a hole in the middle: readers would skip it
    zeds = await api.post(tokens["zed"], "not followed by maya")
    await fan_out_all(api, pool, redis)
    await redis.zadd(key, timelines.entries([zeds]))  # nobody pushes zed to maya
    await redis.zadd(key, {timelines.encode_member(ids[0]): 1})  # a wrong score moves the newest entry to the bottom

    report = await verify.verify(api.settings)
    assert (report.bad, report.missing, report.extra, report.misordered) == (1, 1, 1, 1)
    assert report.problems[0].external_id == "maya" and report.problems[0].missing == [ids[1]]
    assert await asyncio.to_thread(verify.main, settings, fix=False, external_id=None) == 1

    fixed = await verify.verify(api.settings, fix=True)
    assert fixed.repaired == 1
    assert (await verify.verify(api.settings)).clean
    assert await timelines.timeline_ids(redis, maya) == ids
    assert await asyncio.to_thread(verify.main, settings, fix=False, external_id="maya") == 0


async def test_timelines_in_the_older_text_form_are_judged_the_same(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    await scene(api, pool, redis)
    maya = await member_id(pool, "maya")
    key = timelines.feed_key(maya)
    ids = await timelines.timeline_ids(redis, maya)
    await redis.delete(key)
    await redis.zadd(key, {i: timelines.score_of(uuid.UUID(i)) for i in ids[1:]})  # as written before
    await redis.zadd(key, timelines.entries(ids[:1]))  # and one pushed since, mixed in one timeline
    assert await timelines.timeline_ids(redis, maya) == ids
    assert (await verify.verify(api.settings)).clean
    await redis.zadd(key, {ids[2]: 1})  # a text entry with a wrong score
    await redis.zrem(key, ids[1])
    report = await verify.verify(api.settings)
    assert (report.missing, report.misordered) == (1, 1)
    assert report.problems[0].missing == [ids[1]] and report.problems[0].misordered == [ids[2]]


async def test_posts_from_before_a_follow_and_deleted_or_pending_posts_are_not_missing(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    tokens = await scene(api, pool, redis)
    await api.post(tokens["zed"], "before the follow")
    await fan_out_all(api, pool, redis)
    await api.follow(tokens["maya"], "zed")
    await api.post(tokens["zed"], "after the follow")
    report = await verify.verify(api.settings)  # its fan-out has not run: pending, not missing
    assert report.clean and report.pending_posts == 1
    await fan_out_all(api, pool, redis)
    report = await verify.verify(api.settings)  # "before the follow" is not expected in maya's timeline
    assert report.clean and report.pending_posts == 0
    # A deleted post is not expected either, though fan-out pushed it.
    post = (await timelines.timeline_ids(redis, await member_id(pool, "maya")))[0]
    await pool.execute("UPDATE posts SET status = 'deleted' WHERE id = $1", uuid.UUID(post))
    await redis.zrem(timelines.feed_key(await member_id(pool, "maya")), timelines.encode_member(post))
    assert (await verify.verify(api.settings)).clean


async def test_entries_of_an_unfollowed_member_stay_explained_after_the_unfollow_takes_its_notification_back(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis, settings: Settings
) -> None:
    tokens = await scene(api, pool, redis)  # theo's posts are in maya's timeline
    worker = InlineGroup(notifications.GROUP, WorkerContext(settings=settings, pool=pool, redis=redis))
    await api.gql('mutation { unfollow(externalUserId: "theo") { id } }', token=tokens["maya"])
    await worker.catch_up()  # the follow notification is taken back
    assert await pool.fetchval("SELECT count(*) FROM notifications WHERE kind = 'follow'") == 0
    report = await verify.verify(api.settings)
    assert report.clean, report.summary()


async def test_inactive_members_have_no_expectation(api: Api, pool: asyncpg.Pool, redis: aioredis.Redis) -> None:
    tokens = await scene(api, pool, redis)
    maya = await member_id(pool, "maya")
    days = api.settings.inactive_after_days + 1
    await pool.execute(
        "UPDATE members SET last_seen_at = now() - $1::interval WHERE id = $2", timedelta(days=days), maya
    )
    await api.post(tokens["theo"], "while maya is away")  # fan-out skips maya
    await fan_out_all(api, pool, redis)
    assert (await verify.verify(api.settings)).clean


async def test_entries_at_or_below_the_floor_of_a_lossy_redis_run_are_not_judged(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    tokens = await scene(api, pool, redis)
    maya = await member_id(pool, "maya")
    assert await timelines.serving_floor(pool, redis) is None  # the first run this database used
    ids = await timelines.timeline_ids(redis, maya)
    await redis.zrem(timelines.feed_key(maya), timelines.encode_member(ids[1]))
    # As after a restart from a stale snapshot: the epoch no longer matches this run.
    await redis.delete(timelines.EPOCH_KEY)
    report = await verify.verify(api.settings)
    assert report.floor == max(ids + [str(await pool.fetchval("SELECT max(id::text) FROM posts"))])
    assert report.clean and report.timelines == 0
    # Newer posts are trusted again, and a hole above the floor is found.
    later = [await api.post(tokens["theo"], f"later {i}") for i in range(3)]
    await fan_out_all(api, pool, redis)
    assert (await verify.verify(api.settings)).clean
    await redis.zrem(timelines.feed_key(maya), timelines.encode_member(later[1]))
    report = await verify.verify(api.settings)
    assert report.missing == 1 and report.problems[0].missing == [later[1]]


async def test_the_home_feed_reads_below_the_floor_from_postgres(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    tokens = await scene(api, pool, redis)
    maya = await member_id(pool, "maya")
    await timelines.serving_floor(pool, redis)  # worker-events settles the run before its first fan-out
    ids = await timelines.timeline_ids(redis, maya)
    await redis.zrem(timelines.feed_key(maya), ids[1])  # what a stale snapshot lacks
    await redis.delete(timelines.EPOCH_KEY)
    data = (await api.gql("{ homeFeed(first: 10) { source edges { node { id } } } }", token=tokens["maya"]))["homeFeed"]
    assert [e["node"]["id"] for e in data["edges"]] == ids and data["source"] == "REDIS_POSTGRES"


async def test_an_unknown_member_is_an_error(api: Api, settings: Settings) -> None:
    assert await asyncio.to_thread(verify.main, settings, fix=False, external_id=f"nobody-{new_id()}") == 2


async def test_racing_settlers_of_the_first_run_both_trust_it(pool: asyncpg.Pool, redis: aioredis.Redis) -> None:
    """The second settler must find the run settled, not mistake the first one's record for a flush."""
    floors = await asyncio.gather(*(timelines.serving_floor(pool, redis) for _ in range(4)))
    assert floors == [None] * 4
    await redis.delete(timelines.EPOCH_KEY)  # now a real flush of the same run
    await pool.execute(
        "INSERT INTO members (id, external_id, username, display_name) VALUES ($1, 'a', 'a', 'a')", new_id()
    )
    await pool.execute("INSERT INTO posts (id, author_id, content) SELECT $1, id, 'x' FROM members", post := new_id())
    assert await timelines.serving_floor(pool, redis) == str(post)
