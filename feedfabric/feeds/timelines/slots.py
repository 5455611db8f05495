"""On a Redis Cluster: whether a timeline may be trusted after a node lost its data, by a sentinel per slot.

A single Redis notices a lost or stale run through its epoch (feeds.timelines.epochs). A cluster's nodes
lose data one by one (a master flushed, or replaced by an empty node, or failed over to a replica that had
not received its last writes: replication is asynchronous), and fan-out goes on writing to the
slots that lost everything: it recreates timelines holding only what was pushed since, with holes where
entries were lost between posts pushed later (fan-out lands out of order). A reader that trusted such a
timeline would serve pages without posts it served before.

So every hash slot holds a sentinel (`feed:slot:{tag}`, a tag of that slot) whose value is the slot's
*generation*: "0" when the slot never lost anything since this database first used the cluster, else the
node's clock (ms) when the loss was found. A timeline is trusted when its slot's generation is "0", or
when it was rebuilt from Postgres (the rebuild's start, on the same node's clock, in `{feed:ID}:rebuilt`)
since that generation; any other timeline is read as missing: Postgres serves the page and a rebuild is
requested, after which the timeline is trusted again. A slot whose sentinel is missing has lost its data
(or was never settled), and so has a slot whose sentinel names another node's run ID (a failover, a
restart): the first reader to see that settles it (`settle_slot`).
"""

from __future__ import annotations

import binascii
import uuid
from typing import Any

import asyncpg
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from feedfabric.db import timeline_queries as q
from feedfabric.db.redisclient import Script
from feedfabric.feeds.timelines.encoding import as_text, feed_key
from feedfabric.feeds.timelines.slot_tags import TAGS

__all__ = ["check_tags", "key_slot", "rebuilt_key", "sentinel_key", "timeline_trusted"]

SLOTS = 16384
SENTINEL_PREFIX = "feed:slot:"
CLUSTER_RUN = "cluster"  # the run the epoch table records when a cluster's slots are first settled


def check_tags() -> bool:
    """Whether the table names every slot once, each tag on its own slot."""
    return len(TAGS) == SLOTS and all(key_slot(tag) == slot for slot, tag in enumerate(TAGS))


def key_slot(key: str) -> int:
    """Redis Cluster's slot of a key without a hash tag."""
    return binascii.crc_hqx(key.encode(), 0) % SLOTS


def sentinel_key(slot: int) -> str:
    return f"{SENTINEL_PREFIX}{{{TAGS[slot]}}}"


def rebuilt_key(member_id: uuid.UUID | str) -> str:
    """Beside `feed_key`, on its slot: when the timeline's last rebuild started (node clock, ms)."""
    return f"{{{feed_key(member_id)}}}:rebuilt"


# A sentinel is "generation|run_id": the node's run ID when it was set. A node that answers with another
# run ID (a replica promoted by a failover, which may lack the last writes its master acknowledged; a
# restarted node) has not settled the slot yet, as if the sentinel were gone.
_RUN = "local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')\n"

# {0}: the slot is not settled on this node (lost, failed over, or never settled); {1, 0}: no timeline;
# {1, 1}: trusted; {1, 2}: a timeline not rebuilt since its slot lost its data.
_TRUST_LUA = (
    _RUN
    + """
local s = redis.call('GET', KEYS[2])
if not s then return {0} end
local sep = string.find(s, '|', 1, true)
if not sep or string.sub(s, sep + 1) ~= run then return {0} end
local gen = string.sub(s, 1, sep - 1)
if redis.call('EXISTS', KEYS[1]) == 0 then return {1, 0} end
if gen == '0' then return {1, 1} end
local rebuilt = redis.call('GET', KEYS[3])
if rebuilt and tonumber(rebuilt) >= tonumber(gen) then return {1, 1} end
return {1, 2}
"""
)
TRUST = Script(_TRUST_LUA)

# Sets the slot's generation to the node's clock in ms, unless another settler did on this run.
_SETTLE_LUA = (
    _RUN
    + """
local s = redis.call('GET', KEYS[1])
if s and string.sub(s, -#run - 1) == '|' .. run then return s end
local t = redis.call('TIME')
s = tostring(t[1] * 1000 + math.floor(t[2] / 1000)) .. '|' .. run
redis.call('SET', KEYS[1], s)
return s
"""
)
SETTLE = Script(_SETTLE_LUA)

_NOW_LUA = """
local t = redis.call('TIME')
return tostring(t[1] * 1000 + math.floor(t[2] / 1000))
"""
NOW = Script(_NOW_LUA)


async def timeline_trusted(
    pool: asyncpg.Pool | asyncpg.Connection, redis: aioredis.Redis, member_id: uuid.UUID
) -> bool:
    """Whether the member has a timeline that holds everything fan-out pushed (False: none, or untrusted)."""
    key = feed_key(member_id)
    keys = [key, sentinel_key(key_slot(key)), rebuilt_key(member_id)]
    result = await TRUST(redis, keys, ())
    if not int(result[0]):
        await settle_slot(pool, redis, key_slot(key))
        result = await TRUST(redis, keys, ())
    return len(result) > 1 and int(result[1]) == 1


async def settle_slot(pool: asyncpg.Pool | asyncpg.Connection, redis: aioredis.Redis, slot: int) -> None:
    """A slot without a sentinel: on a database that never used this cluster every slot starts at "0" (all
    of them at once); otherwise this slot lost its data, and its generation is now."""
    if isinstance(pool, asyncpg.Pool):
        async with pool.acquire() as conn:
            await _settle(conn, redis, slot)
    else:
        await _settle(pool, redis, slot)


async def _settle(conn: asyncpg.Connection, redis: aioredis.Redis, slot: int) -> None:
    await q.lock_epoch(conn)  # settlers queue: the first settles every slot, the next finds it done
    try:
        if await q.epoch(conn) is None:
            async with conn.transaction():
                await q.record_epoch(conn, CLUSTER_RUN, None)
            await _start_every_slot(redis)
            return
        await SETTLE(redis, [sentinel_key(slot)], ())
    finally:
        await q.unlock_epoch(conn)


# Sets every key given (all local to the node the call is sent to) to "0" unless set: one call per node.
_START_LUA = (
    _RUN
    + """
for i = 1, #ARGV do redis.call('SET', ARGV[i], '0|' .. run, 'NX') end
return #ARGV
"""
)
START = Script(_START_LUA)


async def _start_every_slot(redis: aioredis.Redis) -> None:
    """Generation "0" for all 16384 slots, in one script call per node (keys grouped by the client's routing)."""
    assert isinstance(redis, RedisCluster)
    await redis.initialize()
    by_node: dict[str, tuple[Any, list[str]]] = {}
    for slot in range(SLOTS):
        key = sentinel_key(slot)
        node = redis.get_node_from_key(key)
        by_node.setdefault(node.name, (node, []))[1].append(key)
    for node, keys in by_node.values():
        try:
            await redis.execute_command("EVAL", START.source, 0, *keys, target_nodes=node)
        except ResponseError:  # slots moving: settled one by one as readers find them, with a generation of now
            pass


async def rebuild_started(redis: aioredis.Redis, member_id: uuid.UUID) -> str:
    """The node's clock (ms) on the timeline's slot, read before a rebuild's query."""
    return as_text(await NOW(redis, [rebuilt_key(member_id)], ()))


async def mark_rebuilt(redis: aioredis.Redis, member_id: uuid.UUID, started: str) -> None:
    await redis.set(rebuilt_key(member_id), started)
