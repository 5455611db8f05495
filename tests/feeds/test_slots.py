"""Redis Cluster: a timeline whose slot lost its data is read as missing until it is rebuilt (feeds.timelines.slots)."""

from __future__ import annotations

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.ids import new_id
from feedfabric.core.settings import Settings
from feedfabric.feeds import timelines
from feedfabric.feeds.timelines import slots
from redis.crc import key_slot


def test_every_slot_has_a_tag_of_its_own() -> None:
    assert slots.check_tags()
    for slot in (0, 1, 5461, 16383):
        assert key_slot(slots.sentinel_key(slot).encode()) == slot  # the client's routing agrees
    member = new_id()
    assert key_slot(slots.rebuilt_key(member).encode()) == slots.key_slot(timelines.feed_key(member))


@pytest.mark.redis_cluster
async def test_a_timeline_recreated_after_its_slot_lost_data_is_untrusted_until_rebuilt(
    pool: asyncpg.Pool, redis: aioredis.Redis, redis_mode: str
) -> None:
    member = new_id()
    await timelines.push(redis, [str(member)], new_id(), 500)
    if redis_mode != "cluster":
        opened = await timelines.open_timeline(pool, redis, member, None, 10)
        assert opened.page is not None  # one Redis: the epoch, not the slots, guards it
        return
    assert await slots.timeline_trusted(pool, redis, member)  # a database's first slots start trusted
    key = timelines.feed_key(member)
    await redis.delete(slots.sentinel_key(slots.key_slot(key)))  # as a flush of its node would
    await timelines.push(redis, [str(member)], new_id(), 500)  # fan-out recreates a partial timeline
    assert not await slots.timeline_trusted(pool, redis, member)
    assert (await timelines.open_timeline(pool, redis, member, None, 10)).page is None
    async with pool.acquire() as conn:
        await timelines.rebuild(conn, redis, Settings(redis_cluster=True), member)
    assert await slots.timeline_trusted(pool, redis, member)


@pytest.mark.redis_cluster
async def test_a_slot_served_by_another_run_is_settled_again(
    pool: asyncpg.Pool, redis: aioredis.Redis, redis_mode: str
) -> None:
    """A replica promoted by a failover has its own run ID and may lack its master's last writes."""
    if redis_mode != "cluster":
        return
    member = new_id()
    await timelines.push(redis, [str(member)], new_id(), 500)
    assert await slots.timeline_trusted(pool, redis, member)
    sentinel = slots.sentinel_key(slots.key_slot(timelines.feed_key(member)))
    await redis.set(sentinel, "0|" + "0" * 40)  # as the sentinel a failed-over master's run set
    assert not await slots.timeline_trusted(pool, redis, member)
    assert not (await redis.get(sentinel)).startswith(b"0|")  # settled anew: a generation of now
