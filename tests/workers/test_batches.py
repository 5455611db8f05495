"""A poll's events in one transaction: each applied once, in key order, all or nothing; the runner falls back
to one by one for a batch that declines or fails, so a poison event loses or doubles none of the others."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence

import asyncpg
import redis.asyncio as aioredis
from aiokafka import AIOKafkaProducer
from feedfabric.core.events import POSTS, Event
from feedfabric.core.settings import Settings
from feedfabric.core.topics import ensure_topics
from feedfabric.db import pipeline as db
from feedfabric.db.outbox import add_event
from feedfabric.workers import batches
from feedfabric.workers.base import GroupSpec, Handle, PermanentError, WorkerContext

from tests.pipeline_support import all_committed, eventually, group_runner, running

TYPES = frozenset({"PostUpdated"})


async def _effects(pool: asyncpg.Pool) -> None:
    await pool.execute("CREATE TABLE test_effects (event_id bigint NOT NULL, group_name text NOT NULL)")


def _writing(seen: list[int], poison: set[int] | None = None) -> Handle:
    """A handler with a Postgres effect (a row per application) that records every call, rolled back or not."""

    async def handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
        seen.append(event.event_id)
        await conn.execute("INSERT INTO test_effects VALUES ($1, 'g')", event.event_id)
        if event.event_id in (poison or set()):
            raise PermanentError("can never succeed")

    return handle


async def _outbox(pool: asyncpg.Pool, key: str, types: list[str]) -> list[Event]:
    async with pool.acquire() as conn, conn.transaction():
        for i, event_type in enumerate(types):
            await add_event(conn, event_type, key, {"n": i})
        rows = await db.events_between(conn, key, 0, 2**31, frozenset(types))
    return [row.event() for row in rows[-len(types) :]]


def _none(i: int) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


def _ctx(settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis) -> WorkerContext:
    return WorkerContext(settings=settings, pool=pool, redis=redis)


async def _effect_ids(pool: asyncpg.Pool) -> list[int]:
    return [r[0] for r in await pool.fetch("SELECT event_id FROM test_effects ORDER BY event_id")]


async def test_a_batch_applies_each_event_once_in_one_transaction_and_skips_redeliveries(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    await _effects(pool)
    a1, a2 = await _outbox(pool, "post-a", ["PostUpdated", "PostUpdated"])
    (b1,) = await _outbox(pool, "post-b", ["PostUpdated"])
    seen: list[int] = []
    spec = GroupSpec("g", (POSTS,), TYPES, _writing(seen))
    applied = await batches.apply_batch(spec, _ctx(settings, pool, redis), [a1, b1, a2], _none)
    assert applied is not None and applied.fresh == [True, True, True]
    assert seen == [a1.event_id, b1.event_id, a2.event_id]
    # now() is the transaction's start: one value for the three records means one transaction.
    assert await pool.fetchval("SELECT count(DISTINCT processed_at) FROM processed_events WHERE group_name = 'g'") == 1
    versions = await pool.fetch("SELECT key, version FROM consumer_key_versions WHERE group_name = 'g' ORDER BY key")
    assert [(r["key"], r["version"]) for r in versions] == [("post-a", 2), ("post-b", 1)]

    (a3,) = await _outbox(pool, "post-a", ["PostUpdated"])
    again = await batches.apply_batch(spec, _ctx(settings, pool, redis), [a2, a3, a3], _none)
    assert again is None  # a3 twice is out of key order: the per-event path takes that batch
    again = await batches.apply_batch(spec, _ctx(settings, pool, redis), [b1, a2, a3], _none)
    assert again is not None and again.fresh == [False, False, True]
    assert await _effect_ids(pool) == sorted([a1.event_id, a2.event_id, b1.event_id, a3.event_id])


async def test_a_batch_declines_when_a_key_misses_an_earlier_event_of_the_groups_types(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    await _effects(pool)
    first, second, third = await _outbox(pool, "post-c", ["PostUpdated", "PostUpdated", "PostUpdated"])
    seen: list[int] = []
    spec = GroupSpec("g", (POSTS,), TYPES, _writing(seen))
    ctx = _ctx(settings, pool, redis)
    assert await batches.apply_batch(spec, ctx, [first, third], _none) is None
    assert seen == []
    assert await pool.fetchval("SELECT count(*) FROM processed_events") == 0
    assert await pool.fetchval("SELECT count(*) FROM consumer_key_versions") == 0
    applied = await batches.apply_batch(spec, ctx, [first, second, third], _none)
    assert applied is not None and seen == [first.event_id, second.event_id, third.event_id]


async def test_earlier_events_of_types_the_group_does_not_take_are_no_gap(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    await _effects(pool)
    events = await _outbox(pool, "post-d", ["PostCreated", "PostLiked", "PostUpdated"])
    seen: list[int] = []
    spec = GroupSpec("g", (POSTS,), TYPES, _writing(seen))
    applied = await batches.apply_batch(spec, _ctx(settings, pool, redis), [events[2]], _none)
    assert applied is not None and seen == [events[2].event_id]
    assert await pool.fetchval("SELECT version FROM consumer_key_versions WHERE key = 'post-d'") == 3


async def test_a_failing_handler_rolls_the_whole_batch_back(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    await _effects(pool)
    a1, a2 = await _outbox(pool, "post-e", ["PostUpdated", "PostUpdated"])
    spec = GroupSpec("g", (POSTS,), TYPES, _writing([], poison={a2.event_id}))
    try:
        await batches.apply_batch(spec, _ctx(settings, pool, redis), [a1, a2], _none)
    except PermanentError:
        pass
    else:
        raise AssertionError("the handler's error did not reach the caller")
    assert await _effect_ids(pool) == []
    assert await pool.fetchval("SELECT count(*) FROM processed_events") == 0
    assert await pool.fetchval("SELECT count(*) FROM consumer_key_versions") == 0


async def _produce(settings: Settings, events: list[Event]) -> None:
    await ensure_topics(settings)
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, acks="all")
    await producer.start()
    try:
        for e in events:
            value = json.dumps(e.to_message()).encode()
            await producer.send_and_wait(settings.kafka_topic_prefix + POSTS, value, key=e.key.encode(), partition=0)
    finally:
        await producer.stop()


async def test_the_runner_applies_a_poll_in_one_transaction(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    await _effects(pool)
    events = [e for i in range(5) for e in await _outbox(pool, f"post-f{i}", ["PostUpdated", "PostUpdated"])]
    await _produce(settings, events)
    seen: list[int] = []
    runner = group_runner(settings, pool, redis, GroupSpec("g", (POSTS,), TYPES, _writing(seen)))
    async with running(runner.run):
        await eventually(lambda: all_committed(runner))
    assert seen == [e.event_id for e in events]
    # All ten were in the partition before the consumer's first fetch: one poll, one transaction.
    assert await pool.fetchval("SELECT count(DISTINCT processed_at) FROM processed_events WHERE group_name = 'g'") == 1


async def test_a_poison_event_in_a_poll_is_parked_and_the_others_apply_once(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    await _effects(pool)
    events = [e for i in range(4) for e in await _outbox(pool, f"post-g{i}", ["PostUpdated"])]
    poison = events[2].event_id
    await _produce(settings, events)
    seen: list[int] = []
    runner = group_runner(settings, pool, redis, GroupSpec("g", (POSTS,), TYPES, _writing(seen, {poison})))
    async with running(runner.run):
        await eventually(lambda: all_committed(runner))
    ids = [e.event_id for e in events]
    # The batch ran the first three and rolled back; the events were then applied one by one.
    assert seen[:3] == ids[:3] and seen[3:] == ids
    assert await _effect_ids(pool) == [i for i in ids if i != poison]
    parked = await pool.fetch("SELECT payload FROM dead_letters WHERE group_name = 'g'")
    assert [json.loads(r["payload"])["eventId"] for r in parked] == [poison]
    processed = await pool.fetch("SELECT event_id FROM processed_events WHERE group_name = 'g' ORDER BY event_id")
    assert [r[0] for r in processed] == ids


async def test_a_groups_batch_handler_gets_the_fresh_events_inside_each_ones_context(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    a1, a2, a3 = await _outbox(pool, "post-h", ["PostUpdated", "PostUpdated", "PostUpdated"])
    calls: list[list[int]] = []
    entered: list[int] = []

    async def one(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
        raise AssertionError("the batch handler, not `handle`, applies a batch")

    async def many(ctx: WorkerContext, conn: asyncpg.Connection, events: Sequence[Event]) -> None:
        calls.append([e.event_id for e in events])
        assert entered == [0, 2]  # every fresh event's context is open while the handler runs

    @contextlib.contextmanager
    def around(i: int) -> Iterator[None]:
        entered.append(i)
        yield

    spec = GroupSpec("g", (POSTS,), TYPES, one, handle_batch=many)
    async with pool.acquire() as conn:
        await db.mark_processed(conn, "g", a2.event_id)  # a2 applied before: a redelivery now
    applied = await batches.apply_batch(spec, _ctx(settings, pool, redis), [a1, a2, a3], around)
    assert applied is not None and applied.fresh == [True, False, True]
    assert calls == [[a1.event_id, a3.event_id]]
