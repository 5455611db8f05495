"""Redis timelines: every rule about what goes into `feed:{memberId}` and how it is read.

One sorted set per member; member = the post ID's 16 raw bytes, score = +inf
(`encode_member`). Equal scores sort by the member's bytes, and a UUIDv7's
bytes sort exactly as the IDs do, so Redis order is ID order and Redis and
Postgres pages are interchangeable: a cursor (always the UUID text) from
either works. Raw bytes and the one-token score make a 500-entry timeline
about 11.6 KB in a listpack instead of 24 KB.

Timelines written before hold the UUID text with the ID's Unix ms as score
(the *text form*). Both forms are read (`decode_member`) until those entries
are trimmed away or the timeline is rebuilt: every text entry scores below
every +inf one, and text entries were all written before raw ones, so a mixed
timeline is still newest first (bar posts fanned out by old and new workers in
the same moments of a deploy).

Fan-out on write pushes a post to its author, then to the active followers of
the author and of the post's tags, one keyset page of follows at a time. A
follow of a member merges their posts within the timeline's span (`merge`);
an unfollow (of a member or a tag) takes them back out (`unmerge`).
Authors with more than CELEBRITY_FOLLOWER_THRESHOLD followers are pushed to
their own timeline only: the home-feed reader pulls their posts from Postgres
(`first_round`). A rebuild holds exactly what fan-out would have pushed, so
the two never disagree.

A Redis that lost writes (restarted empty or from a stale snapshot, failed
over, flushed) must not have its old entries served as complete: a timeline
could miss posts in the middle, and a page would skip them. Each Redis run
is therefore *settled* against Postgres (`serving_floor`): the first run this
database ever used is trusted whole; any later run, or the same run after its
epoch key vanished, gets a floor, the newest post ID at settling time. Every
post whose fan-out could have gone to the lost data has an ID at or below the
floor (it was committed before the run was noticed), and every post above it
is pushed into this run, so entries above the floor are complete and readers
take the rest from Postgres, exactly as past the oldest entry of a trimmed
timeline. See docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import redis.asyncio as aioredis
from opentelemetry import trace
from opentelemetry.trace import Span, Tracer
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from feedfabric import failpoints, tracing
from feedfabric.db import timeline_queries as q
from feedfabric.ids import id_millis
from feedfabric.redisclient import REDIS_ERRORS, Script, is_cluster
from feedfabric.settings import Settings

KEY_PREFIX = "feed:"
_FIRST_ID = uuid.UUID(int=0)

# -- Entry encoding: the only place that knows how a post ID is stored --------

RAW_SCORE = "inf"


def encode_member(post_id: uuid.UUID | str) -> bytes:
    """The member a timeline stores for a post: its ID's 16 raw bytes (scored RAW_SCORE)."""
    return (post_id if isinstance(post_id, uuid.UUID) else uuid.UUID(post_id)).bytes


def decode_member(member: bytes | str) -> str:
    """A post ID as text from either stored form: 16 raw bytes, or the older UUID text."""
    if isinstance(member, bytes):
        return str(uuid.UUID(bytes=member)) if len(member) == 16 else member.decode()
    return member


def cursor_forms(post_id: uuid.UUID | str | None) -> tuple[bytes | str, str]:
    """A cursor as both stored forms (raw first), for the scripts that find its rank; empty: no cursor."""
    if post_id is None:
        return "", ""
    return encode_member(post_id), str(post_id)


def entries(post_ids: Iterable[uuid.UUID | str]) -> dict[bytes, str]:
    """ZADD's mapping for posts in the raw form."""
    return {encode_member(i): RAW_SCORE for i in post_ids}


def decode_entry(member: bytes | str, score: float) -> tuple[str, bool]:
    """(post ID, in order): an entry is in order when its score is its form's (+inf raw, the ID's ms as text),
    so that Redis order is ID order."""
    post_id = decode_member(member)
    if isinstance(member, bytes) and len(member) == 16:
        return post_id, score == float("inf")
    return post_id, score == score_of(uuid.UUID(post_id))


# One call adds a post to a whole batch of timelines and trims each: the
# server loops, so the client sends one small command per batch instead of
# two per follower (redis-py packing, not Redis, was the bottleneck). The
# followers come as one argument, their IDs' 36-character texts back to back
# (`AudiencePage.active`, straight from Postgres), and the script makes each
# key as `feed_key` does: a thousand arguments cost the worker more to encode
# than the script spends cutting them out. The trim runs only when the add
# made the set outgrow its length (ZCARD is O(1)); an unconditional
# ZREMRANGEBYRANK costs Redis as much as the check, and a lazier rule would let
# a timeline hold more than its length, which readers see (where Postgres takes
# over).
#
# No keys are declared: on a Redis Cluster the call is routed to the node
# given, not by key, one call per node for the followers of all its slots,
# which Redis allows a script as long as every key is local to that node (it
# refuses the call otherwise, and the caller falls back to a pipeline).
_PUSH_LUA = """
local max = tonumber(ARGV[3])
local prefix, ids = ARGV[4], ARGV[5]
for i = 1, #ids, 36 do
  local key = prefix .. string.sub(ids, i, i + 35)
  if redis.call('ZADD', key, ARGV[1], ARGV[2]) == 1 and redis.call('ZCARD', key) > max then
    redis.call('ZREMRANGEBYRANK', key, 0, -(max + 1))
  end
end
return #ids / 36
"""

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


PUSH = Script(_PUSH_LUA)
READ_PAGE = Script(_READ_LUA)


def feed_key(member_id: uuid.UUID | str) -> str:
    return f"{KEY_PREFIX}{member_id}"


def score_of(post_id: uuid.UUID) -> int:
    """The text form's score: the ID's Unix ms."""
    return id_millis(post_id)


def _is_cluster(redis: object) -> bool:
    return is_cluster(redis)


def shard_of(redis: object, member_id: uuid.UUID | str) -> str:
    """Which Redis serves a member's timeline: "" on one server, the node's name on a cluster, so a
    node that is down costs the reads of its own slots only (breaker.CircuitBreaker.shard)."""
    if not _is_cluster(redis):
        return ""
    try:
        return str(redis.get_node_from_key(feed_key(member_id)).name)  # type: ignore[attr-defined]
    except REDIS_ERRORS:
        return ""  # the slot map is not known yet (before the client's first command): the shared breaker


ID_TEXT_LENGTH = q.ID_TEXT_LENGTH


def pack_ids(member_ids: Sequence[str]) -> str:
    """Member IDs as the push script takes them: canonical UUID texts back to back."""
    packed = "".join(member_ids)
    if len(packed) != ID_TEXT_LENGTH * len(member_ids):
        raise ValueError("member IDs must be canonical UUID text")
    return packed


def unpack_ids(packed: str) -> list[str]:
    return [packed[i : i + ID_TEXT_LENGTH] for i in range(0, len(packed), ID_TEXT_LENGTH)]


async def push(redis: aioredis.Redis, member_ids: Sequence[str], post_id: uuid.UUID, max_length: int) -> None:
    """Adds one post to many timelines, each trimmed to `max_length`. Idempotent (same member, same score)."""
    await push_packed(redis, pack_ids(member_ids), post_id, max_length)


async def push_packed(redis: aioredis.Redis, packed: str, post_id: uuid.UUID, max_length: int) -> int:
    """`push` for IDs already packed (`pack_ids`, or a fan-out page from Postgres); returns how many."""
    if not packed:
        return 0
    member = encode_member(post_id)
    if not _is_cluster(redis):
        await PUSH(redis, [], (RAW_SCORE, member, max_length, KEY_PREFIX, packed))
        return len(packed) // ID_TEXT_LENGTH
    await redis.initialize()  # the slot map (a no-op once known)
    assert isinstance(redis, RedisCluster)
    by_node: dict[str, tuple[Any, list[str]]] = {}
    ids = unpack_ids(packed)
    # get_node_from_key, the client's public routing, is most of the worker's CPU on a cluster; its slot map
    # (nodes_manager) would be cheaper but is the client's internals, which change between releases.
    for member_id in ids:
        node = redis.get_node_from_key(f"{KEY_PREFIX}{member_id}")
        by_node.setdefault(node.name, (node, []))[1].append(member_id)
    await asyncio.gather(*(push_on_node(redis, node, part, member, max_length) for node, part in by_node.values()))
    return len(ids)


async def push_on_node(redis: Any, node: Any, member_ids: list[str], member: bytes, max_length: int) -> None:
    """One script call on the node that serves every one of the members' timelines; a pipeline (one
    command per key, each routed by its slot) when the node refuses it, as while slots move between nodes."""
    args = (RAW_SCORE, member, max_length, KEY_PREFIX, pack_ids(member_ids))
    try:
        try:
            await redis.execute_command("EVALSHA", PUSH.sha, 0, *args, target_nodes=node)
        except NoScriptError:
            await redis.execute_command("EVAL", PUSH.source, 0, *args, target_nodes=node)
        return
    except ResponseError:
        pass
    pipe = redis.pipeline(transaction=False)
    for key in map(feed_key, member_ids):
        pipe.zadd(key, {member: RAW_SCORE})
        pipe.zremrangebyrank(key, 0, -(max_length + 1))
    await pipe.execute()


@dataclass(frozen=True)
class FanoutResult:
    pushed: int
    celebrity: bool


async def fan_out(
    conn: asyncpg.Connection,
    redis: aioredis.Redis,
    settings: Settings,
    post_id: uuid.UUID,
    tracer: Tracer = tracing.NO_TRACER,
) -> FanoutResult | None:
    """Pushes a post to its author and audience; None when the post does not exist.

    Three processes work at once: while Redis runs one batch's push, this
    worker already holds the next page and sends its push behind it (so Redis
    never waits on the worker between batches), and Postgres reads the page
    after that. At most one page read and two pushes are in flight.
    """
    post = await q.fanout_post(conn, post_id)
    if post is None:
        return None
    await push(redis, [str(post.author_id)], post.id, settings.feed_max_length)
    # A celebrity's followers pull its posts at read time; the followers of the
    # post's tags do not follow the author, so they still get it pushed.
    celebrity = await q.has_more_followers_than(conn, post.author_id, settings.celebrity_follower_threshold)
    if celebrity and not post.tags:
        return FanoutResult(1, True)
    author = None if celebrity else post.author_id

    spans: list[Span] = []

    def page(after: uuid.UUID) -> asyncio.Task[q.AudiencePage]:
        spans.append(tracer.start_span("fan-out batch", attributes={"feedfabric.step": "fan-out batch"}))
        return asyncio.ensure_future(
            q.audience_page(
                conn,
                author,
                post.tags,
                after,
                settings.fanout_batch_size,
                settings.inactive_after_days,
                post.author_id,
            )
        )

    pushed = 1
    pages_read = 0
    current: asyncio.Task[q.AudiencePage] | None = page(_FIRST_ID)
    writing: asyncio.Task[int] | None = None
    try:
        while current is not None:
            batch = await current
            current = None
            if batch.scanned >= settings.fanout_batch_size and batch.last is not None:
                current = page(batch.last)
            sent = asyncio.ensure_future(_write_batch(tracer, spans[pages_read], redis, batch, post.id, settings))
            pages_read += 1
            if writing is not None:
                pushed += await writing
                failpoints.crash_point("fanout-batch")
            writing = sent
        if writing is not None:
            pushed += await writing
            writing = None
            failpoints.crash_point("fanout-batch")
    finally:
        # A failure leaves work in flight: the connection must finish its prefetch before the caller
        # rolls back, and a push still running is awaited rather than left unobserved.
        in_flight: tuple[asyncio.Future[Any] | None, ...] = (current, writing)
        for task in in_flight:
            if task is not None and not task.done():
                await asyncio.gather(task, return_exceptions=True)
        for span in spans:
            if span.is_recording():
                span.end()  # a batch a failure left unwritten (ending an ended span is a no-op)
    return FanoutResult(pushed, celebrity)


async def _write_batch(
    tracer: Tracer, span: Span, redis: aioredis.Redis, batch: q.AudiencePage, post_id: uuid.UUID, settings: Settings
) -> int:
    """One fan-out batch's push; its span (begun when its page was asked for) ends with the write."""
    with trace.use_span(span, end_on_exit=True):
        span.set_attribute("feedfabric.fanout.followers", len(batch.active) // ID_TEXT_LENGTH)
        span.set_attribute("feedfabric.fanout.scanned", batch.scanned)
        with tracer.start_as_current_span("timeline write", attributes={"feedfabric.step": "timeline write"}) as write:
            inserts = await push_packed(redis, batch.active, post_id, settings.feed_max_length)
            write.set_attribute("feedfabric.fanout.inserts", inserts)
        span.set_attribute("feedfabric.fanout.inserts", inserts)
        return inserts


async def rebuild(conn: asyncpg.Connection, redis: aioredis.Redis, settings: Settings, member_id: uuid.UUID) -> int:
    """Refills a member's timeline from Postgres with what fan-out would have pushed; returns entries written.

    Merged into the existing set rather than replacing it: a fan-out that
    lands between this query and the write is kept, and what was already
    there is what fan-out put there anyway.
    """
    ids = await q.rebuild_post_ids(conn, member_id, settings.feed_max_length, settings.celebrity_follower_threshold)
    await _add_trimmed(redis, feed_key(member_id), ids, settings.feed_max_length)
    return len(ids)


async def _add_trimmed(redis: aioredis.Redis, key: str, ids: Sequence[str], max_length: int) -> None:
    """Adds posts (text IDs) to a timeline in the raw form, drops the same posts in the text form so it
    holds each once, and trims it to its length, in one transaction."""
    if not ids:
        return
    pipe = redis.pipeline(transaction=True)
    pipe.zrem(key, *ids)
    pipe.zadd(key, entries(ids))
    pipe.zremrangebyrank(key, 0, -(max_length + 1))
    await pipe.execute()


async def merge(
    conn: asyncpg.Connection, redis: aioredis.Redis, settings: Settings, follower_id: uuid.UUID, author_id: uuid.UUID
) -> int:
    """After a follow, the author's posts within the span the follower's timeline covers go into it, as
    Mastodon merges: the Postgres form of the feed shows them at once, and a refollow, whose unfollow took
    them out (`unmerge`), would otherwise come back with none. Nothing without a timeline (a rebuild fills
    it) or for a celebrity (pulled at read time). Returns entries written."""
    if await q.has_more_followers_than(conn, author_id, settings.celebrity_follower_threshold):
        return 0
    key = feed_key(follower_id)
    oldest: list[bytes | str] = await redis.zrange(key, 0, 0)  # type: ignore[assignment]  # the stubs' union
    if not oldest:
        return 0
    ids = await q.followed_posts_above(conn, follower_id, author_id, decode_member(oldest[0]), settings.feed_max_length)
    await _add_trimmed(redis, key, ids, settings.feed_max_length)
    return len(ids)


async def unmerge(conn: asyncpg.Connection, redis: aioredis.Redis, follower_id: uuid.UUID) -> int:
    """After an unfollow (of a member or a tag), what no longer belongs leaves the follower's timeline, as it
    leaves every other form of the feed (Postgres pages, the replay, live delivery), so a page never depends
    on which serves it: every entry that is not the follower's own, by an author not followed, with no
    followed tag. Nothing while the follow is back. Returns entries removed."""
    ids = await timeline_ids(redis, follower_id)
    gone = await q.no_longer_followed(conn, follower_id, ids) if ids else []
    if gone:
        # Both stored forms (docs at the top): an entry pushed before the raw form may still be text.
        await redis.zrem(feed_key(follower_id), *[encode_member(i) for i in gone], *gone)
    return len(gone)


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


# -- Epochs: is this Redis run's data trustworthy? --------------------------

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


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def serving_floor(pool: asyncpg.Pool | asyncpg.Connection, redis: aioredis.Redis) -> str | None:
    """The post ID at or below which this Redis run's entries are not trusted; None: trust every entry.

    One script call when settled; otherwise settles the run first (one small transaction).
    Not available on Redis Cluster (each node restarts on its own): there every entry is trusted.
    """
    if _is_cluster(redis):
        return None
    settled, run, floor = await EPOCH(redis, [EPOCH_KEY], ())
    if int(settled):
        return _text(floor) or None
    if isinstance(pool, asyncpg.Connection):
        return await settle(pool, redis, _text(run))
    async with pool.acquire() as conn:
        return await settle(conn, redis, _text(run))


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
        if int(settled) and _text(run) == run_id:
            return _text(floor) or None
        async with conn.transaction():
            known = await q.epoch(conn)
            newest = None if known is None else await q.newest_post_id(conn)
            recorded = await q.record_epoch(conn, run_id, newest)
        text = "" if recorded is None else str(recorded)
        await redis.hset(EPOCH_KEY, mapping={"run": run_id, "floor": text})
        return text or None
    finally:
        await q.unlock_epoch(conn)


# -- The read path's first round trip ------------------------------------------

# The epoch check, the timeline's existence and its first page in one script
# call, so a home-feed page makes one Redis round trip before any SQL, not three.
# Same answers as EPOCH, EXISTS and READ_PAGE run in that order, in one view.
_OPEN_LUA = """
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local e = redis.call('HMGET', KEYS[1], 'run', 'floor')
if e[1] ~= run then return {0, run} end
local floor = e[2] or ''
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
    if not _is_cluster(redis):
        raw, text = cursor_forms(after_post_id)
        result = await OPEN(redis, [EPOCH_KEY, feed_key(member_id)], (raw, count, text))
        assert isinstance(result, list)
        if int(result[0]):
            floor = _text(result[1]) or None
            if not int(result[2]):
                return OpenedTimeline(floor, None)
            return OpenedTimeline(floor, _page_of(result[3], result[4], floor))
    floor = await serving_floor(pool, redis)
    if not await has_timeline(redis, member_id):
        return OpenedTimeline(floor, None)
    return OpenedTimeline(floor, await read_page(redis, member_id, after_post_id, count, floor))


# -- What a reader was served that Redis may lack --------------------------------
#
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

OWED_TTL_S = 86_400  # a backlog older than this is not covered (docs/home-feed.md)


def owed_key(member_id: uuid.UUID | str) -> str:
    """Beside `feed_key`, on its cluster slot: the hash tag is the whole timeline key, which has no tag."""
    return f"{{{feed_key(member_id)}}}:owed"


# The first page's opening script plus the owed mark, in the same round trip.
_OPEN_FIRST_LUA = "local function open()\n" + _OPEN_LUA + "\nend\nreturn {redis.call('GET', KEYS[3]) or '', open()}\n"
OPEN_FIRST = Script(_OPEN_FIRST_LUA)

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


@dataclass(frozen=True)
class OpenedFirstPage:
    """`open_timeline` for a first page, with the owed mark (None: Redis holds all it served)."""

    opened: OpenedTimeline
    owed: uuid.UUID | None


def _owed_of(value: object) -> uuid.UUID | None:
    text = _text(value) if value is not None else ""
    return uuid.UUID(text) if text else None


async def open_first_page(
    pool: asyncpg.Pool | asyncpg.Connection, redis: aioredis.Redis, member_id: uuid.UUID | str, count: int
) -> OpenedFirstPage:
    """`open_timeline` with no cursor and the owed mark, in one round trip when settled."""
    if _is_cluster(redis):
        return OpenedFirstPage(
            await open_timeline(pool, redis, member_id, None, count), await read_owed(redis, member_id)
        )
    result = await OPEN_FIRST(redis, [EPOCH_KEY, feed_key(member_id), owed_key(member_id)], ("", count))
    assert isinstance(result, list)
    owed, opened = _owed_of(result[0]), result[1]
    if not int(opened[0]):  # an unsettled run: settle it first
        return OpenedFirstPage(await open_timeline(pool, redis, member_id, None, count), owed)
    floor = _text(opened[1]) or None
    if not int(opened[2]):
        return OpenedFirstPage(OpenedTimeline(floor, None), owed)
    return OpenedFirstPage(OpenedTimeline(floor, _page_of(opened[3], opened[4], floor)), owed)


async def read_owed(redis: aioredis.Redis, member_id: uuid.UUID | str) -> uuid.UUID | None:
    return _owed_of(await redis.get(owed_key(member_id)))


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
