"""Whether this Redis run's data is trustworthy: each run is settled against Postgres with a serving floor."""

from __future__ import annotations

import asyncpg
import redis.asyncio as aioredis

from feedfabric.db import timeline_queries as q
from feedfabric.db.redisclient import Script, is_cluster
from feedfabric.feeds.timelines.encoding import as_text

EPOCH_KEY = "feed:epoch"

# The run ID changes whenever Redis restarts (or another server answers), so a
# snapshot restored from disk always comes back unsettled.
_EPOCH_LUA = """
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local e = redis.call('HMGET', KEYS[1], 'run', 'floor')
if e[1] == run then return {1, run, e[2] or ''} end
return {0, run, ''}
"""
EPOCH = Script(_EPOCH_LUA)


async def serving_floor(pool: asyncpg.Pool | asyncpg.Connection, redis: aioredis.Redis) -> str | None:
    """The post ID at or below which this Redis run's entries are not trusted; None: trust every entry.

    One script call when settled; otherwise settles the run first (one small transaction).
    Not available on Redis Cluster (each node restarts on its own): there every entry is trusted.
    """
    if is_cluster(redis):
        return None
    settled, run, floor = await EPOCH(redis, [EPOCH_KEY], ())
    if int(settled):
        return as_text(floor) or None
    if isinstance(pool, asyncpg.Connection):
        return await settle(pool, redis, as_text(run))
    async with pool.acquire() as conn:
        return await settle(conn, redis, as_text(run))


async def settle(conn: asyncpg.Connection, redis: aioredis.Redis, run_id: str) -> str | None:
    """Records `run_id` as the current Redis run and returns its floor.

    The first run this database ever settled is trusted whole (nothing was
    written anywhere else). Any other run, and the same run whose epoch key is
    gone (flushed), may lack writes that were acknowledged: its floor is the
    newest post ID now. Two settlers racing both compute a valid floor.
    """
    await q.lock_epoch(conn)  # settlers queue, so a second one finds the run settled instead of "flushed"
    try:
        settled, run, floor = await EPOCH(redis, [EPOCH_KEY], ())
        if int(settled) and as_text(run) == run_id:
            return as_text(floor) or None
        async with conn.transaction():
            known = await q.epoch(conn)
            newest = None if known is None else await q.newest_post_id(conn)
            recorded = await q.record_epoch(conn, run_id, newest)
        text = "" if recorded is None else str(recorded)
        seconds, micros = await redis.time()
        # `at`: a timeline whose rebuild began since then holds everything; it is read without the floor.
        await redis.hset(EPOCH_KEY, mapping={"run": run_id, "floor": text, "at": seconds * 1000 + micros // 1000})
        return text or None
    finally:
        await q.unlock_epoch(conn)
