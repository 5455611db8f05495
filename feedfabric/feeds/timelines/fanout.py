"""Writing timelines: fan-out on write, rebuilds, and the merge and unmerge that follows and unfollows make."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import redis.asyncio as aioredis
from opentelemetry import trace
from opentelemetry.trace import Span, Tracer
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from feedfabric.core import failpoints, tracing
from feedfabric.core.settings import Settings
from feedfabric.db import timeline_queries as q
from feedfabric.db.redisclient import Script, is_cluster
from feedfabric.feeds.timelines import slots
from feedfabric.feeds.timelines.encoding import (
    ID_TEXT_LENGTH,
    KEY_PREFIX,
    RAW_SCORE,
    decode_member,
    encode_member,
    entries,
    feed_key,
    pack_ids,
    unpack_ids,
)
from feedfabric.feeds.timelines.reading import timeline_ids

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

_FIRST_ID = uuid.UUID(int=0)


PUSH = Script(_PUSH_LUA)


async def push(redis: aioredis.Redis, member_ids: Sequence[str], post_id: uuid.UUID, max_length: int) -> None:
    """Adds one post to many timelines, each trimmed to `max_length`. Idempotent (same member, same score)."""
    await push_packed(redis, pack_ids(member_ids), post_id, max_length)


async def push_packed(redis: aioredis.Redis, packed: str, post_id: uuid.UUID, max_length: int) -> int:
    """`push` for IDs already packed (`pack_ids`, or a fan-out page from Postgres); returns how many."""
    if not packed:
        return 0
    member = encode_member(post_id)
    if not is_cluster(redis):
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
    # The server's clock (on a cluster, the slot's node) before the query: a timeline whose rebuild began after
    # its Redis run was settled, or its slot lost its data, holds everything (feeds.timelines.slots, epochs).
    started = await slots.rebuild_started(redis, member_id)
    ids = await q.rebuild_post_ids(conn, member_id, settings.feed_max_length, settings.celebrity_follower_threshold)
    await _add_trimmed(redis, feed_key(member_id), ids, settings.feed_max_length)
    await slots.mark_rebuilt(redis, member_id, started)
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
