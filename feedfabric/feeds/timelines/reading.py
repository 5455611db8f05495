"""Reading timelines: pages by cursor, the first round trip of a home-feed page, the first round against Postgres."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import asyncpg
import redis.asyncio as aioredis

from feedfabric.core.settings import Settings
from feedfabric.db import timeline_queries as q
from feedfabric.db.redisclient import Script, is_cluster
from feedfabric.feeds.timelines import slots
from feedfabric.feeds.timelines.encoding import (
    as_text,
    cursor_forms,
    decode_member,
    feed_key,
    owed_key,
)
from feedfabric.feeds.timelines.epochs import EPOCH_KEY, serving_floor
from feedfabric.feeds.timelines.owed import owed_of, read_owed

# A page newest first after a cursor, in one round trip and one consistent view.
# The cursor comes in both forms (ARGV[1] raw, ARGV[3] text): either may be stored.
_READ_LUA = """
local start = 0
if ARGV[1] ~= '' then
  local rank = redis.call('ZREVRANK', KEYS[1], ARGV[1]) or redis.call('ZREVRANK', KEYS[1], ARGV[3])
  if not rank then return {0, {}} end
  start = rank + 1
end
return {1, redis.call('ZREVRANGE', KEYS[1], start, start + tonumber(ARGV[2]) - 1)}
"""
READ_PAGE = Script(_READ_LUA)


@dataclass(frozen=True)
class TimelinePage:
    """Post IDs newest first. `cursor_found` False: the cursor is not in the timeline, read from Postgres.

    Fewer IDs than asked means the timeline is exhausted: a reader continues
    from Postgres after the last ID (the redis+postgres case).
    """

    ids: list[str]
    cursor_found: bool


async def read_page(
    redis: aioredis.Redis,
    member_id: uuid.UUID | str,
    after_post_id: uuid.UUID | str | None,
    count: int,
    floor: str | None = None,
) -> TimelinePage:
    """`floor` (from `serving_floor`): entries at or below it are dropped, so the page ends there as if the
    timeline were exhausted and the reader continues from Postgres."""
    raw, text = cursor_forms(after_post_id)
    result = await READ_PAGE(redis, [feed_key(member_id)], (raw, count, text))
    assert isinstance(result, list)
    found, raw = result
    return _page_of(found, raw, floor)


async def has_timeline(redis: aioredis.Redis, member_id: uuid.UUID | str) -> bool:
    """False for a new member or after Redis lost its data: serve from Postgres."""
    return bool(await redis.exists(feed_key(member_id)))


async def timeline_ids(redis: aioredis.Redis, member_id: uuid.UUID | str) -> list[str]:
    """The whole timeline newest first (tests, tools)."""
    members: list[bytes | str] = await redis.zrevrange(feed_key(member_id), 0, -1)  # type: ignore[assignment]  # the stubs' union of withscores shapes
    return _unique(decode_member(i) for i in members)


def _unique(ids: Iterable[str]) -> list[str]:
    """Each ID once, first place kept: a post pushed again in the raw form may still be there as text."""
    return list(dict.fromkeys(ids))


async def first_round(
    pool: asyncpg.Pool | asyncpg.Connection,
    settings: Settings,
    member_id: uuid.UUID,
    ids: list[uuid.UUID],
    before: uuid.UUID | None,
    limit: int,
    own_floor: uuid.UUID | None = None,
) -> q.FirstRound:
    """The visible posts among a page's first batch of timeline IDs, the newest `limit` posts before
    `before` of the followed authors above the threshold, whose posts are never pushed, and of the member
    (down to `own_floor`, if given), whose own a lagging fan-out has not pushed yet, and the extras of all,
    in one round trip."""
    return await q.first_round(pool, ids, member_id, before, limit, settings.celebrity_follower_threshold, own_floor)


# The epoch check, the timeline's existence and its first page in one script
# call, so a home-feed page makes one Redis round trip before any SQL, not three.
# Same answers as EPOCH, EXISTS and READ_PAGE run in that order, in one view.
# A timeline rebuilt from Postgres since the run was settled (its rebuild began at or after the epoch's
# `at`, on the server's clock; the last key) holds everything and is read whole, without the floor.
_OPEN_LUA = """
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local e = redis.call('HMGET', KEYS[1], 'run', 'floor', 'at')
if e[1] ~= run then return {0, run} end
local floor = e[2] or ''
if floor ~= '' and e[3] then
  local rebuilt = redis.call('GET', KEYS[#KEYS])
  if rebuilt and tonumber(rebuilt) >= tonumber(e[3]) then floor = '' end
end
if redis.call('EXISTS', KEYS[2]) == 0 then return {1, floor, 0} end
local start = 0
if ARGV[1] ~= '' then
  local rank = redis.call('ZREVRANK', KEYS[2], ARGV[1]) or redis.call('ZREVRANK', KEYS[2], ARGV[3])
  if not rank then return {1, floor, 1, 0, {}} end
  start = rank + 1
end
return {1, floor, 1, 1, redis.call('ZREVRANGE', KEYS[2], start, start + tonumber(ARGV[2]) - 1)}
"""
OPEN = Script(_OPEN_LUA)


@dataclass(frozen=True)
class OpenedTimeline:
    """What a reader needs to start a page: the run's floor, and the first page (None: no timeline)."""

    floor: str | None
    page: TimelinePage | None


def _page_of(found: object, raw: Sequence[bytes | str], floor: str | None) -> TimelinePage:
    ids = _unique(decode_member(i) for i in raw)
    if floor is not None:
        ids = [i for i in ids if i > floor]  # canonical UUID text sorts as the UUID does
    return TimelinePage(ids, bool(int(found)))  # type: ignore[call-overload]


async def open_timeline(
    pool: asyncpg.Pool | asyncpg.Connection,
    redis: aioredis.Redis,
    member_id: uuid.UUID | str,
    after_post_id: uuid.UUID | str | None,
    count: int,
) -> OpenedTimeline:
    """`serving_floor`, `has_timeline` and `read_page` of the first round, in one round trip when settled.

    An unsettled run (rare: once per Redis run) and Redis Cluster (whose keys
    cannot share one script call) take the separate calls.
    """
    if not is_cluster(redis):
        raw, text = cursor_forms(after_post_id)
        keys = [EPOCH_KEY, feed_key(member_id), slots.rebuilt_key(member_id)]
        result = await OPEN(redis, keys, (raw, count, text))
        assert isinstance(result, list)
        if int(result[0]):
            floor = as_text(result[1]) or None
            if not int(result[2]):
                return OpenedTimeline(floor, None)
            return OpenedTimeline(floor, _page_of(result[3], result[4], floor))
    floor = await serving_floor(pool, redis)
    if is_cluster(redis):
        # A slot that lost its data leaves timelines fan-out recreated with holes: read as missing until rebuilt.
        if not await slots.timeline_trusted(pool, redis, uuid.UUID(str(member_id))):
            return OpenedTimeline(floor, None)
    elif not await has_timeline(redis, member_id):
        return OpenedTimeline(floor, None)
    return OpenedTimeline(floor, await read_page(redis, member_id, after_post_id, count, floor))


# The first page's opening script plus the owed mark, in the same round trip.
_OPEN_FIRST_LUA = "local function open()\n" + _OPEN_LUA + "\nend\nreturn {redis.call('GET', KEYS[3]) or '', open()}\n"
OPEN_FIRST = Script(_OPEN_FIRST_LUA)


@dataclass(frozen=True)
class OpenedFirstPage:
    """`open_timeline` for a first page, with the owed mark (None: Redis holds all it served)."""

    opened: OpenedTimeline
    owed: uuid.UUID | None


async def open_first_page(
    pool: asyncpg.Pool | asyncpg.Connection, redis: aioredis.Redis, member_id: uuid.UUID | str, count: int
) -> OpenedFirstPage:
    """`open_timeline` with no cursor and the owed mark, in one round trip when settled."""
    if is_cluster(redis):
        return OpenedFirstPage(
            await open_timeline(pool, redis, member_id, None, count), await read_owed(redis, member_id)
        )
    keys = [EPOCH_KEY, feed_key(member_id), owed_key(member_id), slots.rebuilt_key(member_id)]
    result = await OPEN_FIRST(redis, keys, ("", count))
    assert isinstance(result, list)
    owed, opened = owed_of(result[0]), result[1]
    if not int(opened[0]):  # an unsettled run: settle it first
        return OpenedFirstPage(await open_timeline(pool, redis, member_id, None, count), owed)
    floor = as_text(opened[1]) or None
    if not int(opened[2]):
        return OpenedFirstPage(OpenedTimeline(floor, None), owed)
    return OpenedFirstPage(OpenedTimeline(floor, _page_of(opened[3], opened[4], floor)), owed)
