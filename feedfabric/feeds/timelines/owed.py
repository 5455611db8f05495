"""What a reader was served that Redis may lack: the owed mark, raised as pages are served and filled on the next read."""

from __future__ import annotations

import uuid

import asyncpg
import redis.asyncio as aioredis

from feedfabric.db import timeline_queries as q
from feedfabric.db.redisclient import Script
from feedfabric.feeds.timelines.encoding import as_text, owed_key

# A first page can serve posts Redis does not hold yet: Postgres served the page
# (no timeline, a returning member) or continued it, while fan-out is still
# pushing those posts. Fan-out runs per post on several partitions, so it lands
# out of order and a timeline can miss posts below its newest entry, not only
# above it. One value beside the timeline, the *owed* mark, keeps the newest post
# of the last first page that did not come from Redis; the next first page fills
# everything between its last timeline entry and the mark from Postgres (one
# statement bounded by that range), so nothing served before goes missing. The
# mark is dropped once a page served nothing Redis lacked, so the common case
# (a caught-up timeline) reads one key more in the first round's script and
# writes nothing.
#
# A first page Postgres serves while the member's Redis timeline is out of reach
# (its node cut off, failing, the breaker open) cannot leave the mark in Redis, so
# it leaves it in Postgres: `members.home_owed`, which the viewer lookup every
# request makes already reads. The next first page served from Redis, on any
# instance, takes the higher of both marks, fills up to it, records the debt in
# Redis and clears the Postgres one. Such a page is the whole Postgres page, so it
# never leaves out a post an earlier page showed from a timeline that fan-out had
# reached (fan-out lands node by node, and a post still being fanned out can be on
# some timelines and missing from others).

OWED_TTL_S = 86_400  # a backlog older than this is not covered (docs/home-feed.md)

# Compare and set: the mark read at the page's start is replaced (or dropped, ARGV[2] empty) only if no
# other read changed it meanwhile; otherwise, or when the caller did not read it (ARGV[1] '*'), it may
# only rise, so a concurrent read's debt is never forgotten.
_OWE_LUA = """
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then
  if ARGV[2] ~= '' and ARGV[2] > cur then redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) return 1 end
  return 0
end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) end
return 1
"""
OWE = Script(_OWE_LUA)


def owed_of(value: object) -> uuid.UUID | None:
    text = as_text(value) if value is not None else ""
    return uuid.UUID(text) if text else None


async def read_owed(redis: aioredis.Redis, member_id: uuid.UUID | str) -> uuid.UUID | None:
    return owed_of(await redis.get(owed_key(member_id)))


async def record_owed(
    redis: aioredis.Redis, member_id: uuid.UUID | str, read: uuid.UUID | None, owed: uuid.UUID | None
) -> None:
    """Replaces the mark `read` at the page's start with `owed` (None drops it), unless another read moved it."""
    await OWE(
        redis, [owed_key(member_id)], ("" if read is None else str(read), "" if owed is None else str(owed), OWED_TTL_S)
    )


async def raise_owed(redis: aioredis.Redis, member_id: uuid.UUID | str, owed: uuid.UUID) -> None:
    """Raises the mark to `owed` (a page Postgres served whole, the mark not read first)."""
    await OWE(redis, [owed_key(member_id)], ("*", str(owed), OWED_TTL_S))


async def raise_owed_in_postgres(
    pool: asyncpg.Pool | asyncpg.Connection, member_id: uuid.UUID, owed: uuid.UUID
) -> None:
    """The mark for a first page Postgres served while Redis could not take it: kept in `members.home_owed`,
    which the viewer lookup of every request reads, so the next first page from Redis fills up to it."""
    await q.raise_home_owed(pool, member_id, owed)


async def drop_owed_in_postgres(pool: asyncpg.Pool | asyncpg.Connection, member_id: uuid.UUID, read: uuid.UUID) -> None:
    """Clears the Postgres mark read as `read`, once a page from Redis has moved its debt into the Redis mark."""
    await q.drop_home_owed(pool, member_id, read)


async def fill_gap(
    pool: asyncpg.Pool | asyncpg.Connection,
    member_id: uuid.UUID,
    after: uuid.UUID,
    through: uuid.UUID,
    limit: int,
) -> q.GapFill:
    """The newest `limit` visible home-feed posts with IDs in (`after`, `through`], with their extras, in
    one statement: what a timeline lacking posts a reader was served must be completed with."""
    return await q.gap_page(pool, member_id, after, through, limit)
