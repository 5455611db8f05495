"""`open_timeline` answers exactly as serving_floor, has_timeline and read_page called one after the other."""

import uuid

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.ids import new_id
from feedfabric.feeds import timelines
from feedfabric.feeds.timelines import slots


async def separately(
    pool: asyncpg.Pool, redis: aioredis.Redis, member: uuid.UUID, after: str | None, count: int
) -> timelines.OpenedTimeline:
    floor = await timelines.serving_floor(pool, redis)
    if not await timelines.has_timeline(redis, member):
        return timelines.OpenedTimeline(floor, None)
    return timelines.OpenedTimeline(floor, await timelines.read_page(redis, member, after, count, floor))


@pytest.mark.redis_cluster
async def test_open_timeline_matches_the_separate_calls(pool: asyncpg.Pool, redis: aioredis.Redis) -> None:
    member = uuid.uuid4()
    # Unsettled run: open_timeline settles it, as serving_floor would.
    assert await timelines.open_timeline(pool, redis, member, None, 5) == timelines.OpenedTimeline(None, None)
    ids = sorted((str(new_id()) for _ in range(12)), reverse=True)
    await redis.zadd(timelines.feed_key(member), {i: timelines.score_of(uuid.UUID(i)) for i in ids})
    for after, count in ((None, 5), (ids[3], 5), (ids[9], 5), (ids[-1], 5), (str(uuid.uuid4()), 5)):
        opened = await timelines.open_timeline(pool, redis, member, after, count)
        assert opened == await separately(pool, redis, member, after, count)
    first = await timelines.open_timeline(pool, redis, member, None, 5)
    assert first.page == timelines.TimelinePage(ids[:5], True)
    missing = await timelines.open_timeline(pool, redis, member, str(uuid.uuid4()), 5)
    assert missing.page == timelines.TimelinePage([], False)


async def test_open_timeline_applies_the_floor(pool: asyncpg.Pool, redis: aioredis.Redis) -> None:
    member = uuid.uuid4()
    ids = sorted((str(new_id()) for _ in range(6)), reverse=True)
    await redis.zadd(timelines.feed_key(member), {i: timelines.score_of(uuid.UUID(i)) for i in ids})
    await timelines.serving_floor(pool, redis)
    await redis.hset(timelines.EPOCH_KEY, "floor", ids[2])  # as a later, unsettled-then-settled run records it
    opened = await timelines.open_timeline(pool, redis, member, None, 10)
    assert opened.floor == ids[2]
    assert opened.page == timelines.TimelinePage(ids[:2], True)
    assert opened == await separately(pool, redis, member, None, 10)


async def test_a_timeline_rebuilt_since_the_run_was_settled_is_read_without_the_floor(
    pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    """After a lost run, a rebuilt timeline holds everything: its pages come from Redis again on their own,
    not only once enough new posts rise above the floor."""
    member = uuid.uuid4()
    ids = sorted((str(new_id()) for _ in range(6)), reverse=True)
    await redis.zadd(timelines.feed_key(member), {i: timelines.score_of(uuid.UUID(i)) for i in ids})
    await timelines.serving_floor(pool, redis)
    seconds, micros = await redis.time()
    settled_at = seconds * 1000 + micros // 1000
    await redis.hset(timelines.EPOCH_KEY, mapping={"floor": ids[2], "at": settled_at})
    await redis.set(slots.rebuilt_key(member), settled_at - 1)  # a rebuild that began before: floor holds
    assert (await timelines.open_timeline(pool, redis, member, None, 10)).page == timelines.TimelinePage(ids[:2], True)
    await redis.set(slots.rebuilt_key(member), settled_at)  # one that began since: read whole
    opened = await timelines.open_timeline(pool, redis, member, None, 10)
    assert opened.page == timelines.TimelinePage(ids, True)
    first = await timelines.open_first_page(pool, redis, member, 10)
    assert first.opened.page == timelines.TimelinePage(ids, True)
