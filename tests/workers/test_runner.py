"""The consumer runner: retries with backoff, commits after success, dead letters for poison, key order from the outbox."""

from __future__ import annotations

import json

import asyncpg
import redis.asyncio as aioredis
from aiokafka import AIOKafkaProducer
from feedfabric.core.events import POSTS, Event
from feedfabric.core.settings import Settings
from feedfabric.core.topics import ensure_topics
from feedfabric.db import pipeline as db
from feedfabric.db.outbox import add_event
from feedfabric.workers.base import GroupSpec, Handle, PermanentError, WorkerContext
from feedfabric.workers.runner import GroupRunner

from tests.pipeline_support import all_committed, eventually, group_runner, running


async def _produce(settings: Settings, messages: list[tuple[str, bytes]]) -> None:
    await ensure_topics(settings)
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, acks="all")
    await producer.start()
    try:
        for key, value in messages:
            await producer.send_and_wait(settings.kafka_topic_prefix + POSTS, value, key=key.encode(), partition=0)
    finally:
        await producer.stop()


def _event(event_id: int, key: str = "k") -> bytes:
    return json.dumps(Event(event_id, "PostUpdated", key, event_id, {}).to_message()).encode()


async def test_handler_failing_twice_then_succeeding_is_retried_and_committed(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    attempts: list[int] = []

    async def flaky(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
        attempts.append(event.event_id)
        if len(attempts) <= 2:
            raise ConnectionError("transient")

    spec = GroupSpec("test-flaky", (POSTS,), frozenset({"PostUpdated"}), flaky)
    await _produce(settings, [("k", _event(1))])
    runner = group_runner(settings, pool, redis, spec, backoff_initial=0.05)
    async with running(runner.run):
        await eventually(lambda: _done(attempts, 3))
        await eventually(lambda: all_committed(runner))
    assert attempts == [1, 1, 1]
    assert await pool.fetchval("SELECT count(*) FROM processed_events WHERE group_name = 'test-flaky'") == 1


async def _done(attempts: list[int], n: int) -> bool:
    return len(attempts) >= n


async def _swept(runner: GroupRunner) -> bool:
    return runner.swept_to is not None


async def test_poison_payload_lands_in_dead_letters_and_does_not_block_the_partition(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    handled: list[int] = []

    async def handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
        if event.event_id == 2:
            raise PermanentError("can never succeed")
        handled.append(event.event_id)

    spec = GroupSpec("test-poison", (POSTS,), frozenset({"PostUpdated"}), handle)
    await _produce(settings, [("k", b"\xff not json"), ("k", _event(2)), ("k", _event(3)), ("k", _event(4))])
    runner = group_runner(settings, pool, redis, spec)
    async with running(runner.run):
        await eventually(lambda: _done(handled, 2))
        await eventually(lambda: all_committed(runner))
    assert handled == [3, 4]
    rows = await pool.fetch(
        'SELECT "offset", error FROM dead_letters WHERE group_name = $1 ORDER BY "offset"', "test-poison"
    )
    assert [r["offset"] for r in rows] == [0, 1]
    assert "undecodable" in rows[0]["error"] and "can never succeed" in rows[1]["error"]


async def _outbox(pool: asyncpg.Pool, key: str, n: int) -> list[Event]:
    """`n` PostUpdated events of `key` committed to the outbox, as consumers would receive them."""
    async with pool.acquire() as conn, conn.transaction():
        for i in range(n):
            await add_event(conn, "PostUpdated", key, {"n": i})
        rows = await db.events_between(conn, key, 0, n + 1, frozenset({"PostUpdated"}))
    return [row.event() for row in rows]


def _message(event: Event) -> tuple[str, bytes]:
    return event.key, json.dumps(event.to_message()).encode()


def _recording(handled: list[int], poison: set[int] | None = None) -> Handle:
    async def handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
        if event.event_id in (poison or set()):
            raise PermanentError("can never succeed")
        handled.append(event.event_id)

    return handle


async def test_a_later_version_delivered_first_applies_the_keys_earlier_events_from_the_outbox_first(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    first, second, third = await _outbox(pool, "post-1", 3)
    handled: list[int] = []
    spec = GroupSpec("test-order", (POSTS,), frozenset({"PostUpdated"}), _recording(handled))
    await _produce(settings, [_message(third), _message(first), _message(second)])
    runner = group_runner(settings, pool, redis, spec)
    async with running(runner.run):
        await eventually(lambda: all_committed(runner))
    assert handled == [first.event_id, second.event_id, third.event_id]
    assert (
        await pool.fetchval(
            "SELECT version FROM consumer_key_versions WHERE group_name = 'test-order' AND key = 'post-1'"
        )
        == 3
    )


async def test_a_poison_event_found_while_filling_a_gap_is_parked_and_the_rest_apply(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    first, second, third = await _outbox(pool, "post-2", 3)
    handled: list[int] = []
    spec = GroupSpec("test-fill-poison", (POSTS,), frozenset({"PostUpdated"}), _recording(handled, {second.event_id}))
    await _produce(settings, [_message(third), _message(second)])
    runner = group_runner(settings, pool, redis, spec)
    async with running(runner.run):
        await eventually(lambda: all_committed(runner))
    assert handled == [first.event_id, third.event_id]
    parked = await pool.fetch("SELECT payload FROM dead_letters WHERE group_name = 'test-fill-poison'")
    assert [json.loads(r["payload"])["eventId"] for r in parked] == [second.event_id]


async def test_a_raised_broker_epoch_rewinds_the_runner_to_the_start_of_the_log(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    events = [(await _outbox(pool, f"post-{i}", 1))[0] for i in range(3, 6)]
    handled: list[int] = []
    spec = GroupSpec("test-epoch", (POSTS,), frozenset({"PostUpdated"}), _recording(handled))
    await _produce(settings, [_message(e) for e in events])
    runner = group_runner(settings, pool, redis, spec)
    runner.epoch_check_s = 0.05
    async with running(runner.run):
        await eventually(lambda: all_committed(runner))
        # As if the broker had come back empty and the log been refilled: what was applied is forgotten
        # here only so that a second reading shows in `handled`.
        await pool.execute("DELETE FROM processed_events WHERE group_name = 'test-epoch'")
        await pool.execute("DELETE FROM consumer_key_versions WHERE group_name = 'test-epoch'")
        async with pool.acquire() as conn:
            await db.raise_broker_epoch(conn)
        await eventually(lambda: _done(handled, 6))
    assert handled == [e.event_id for e in events] * 2


async def test_an_event_published_but_never_delivered_by_kafka_is_applied_by_the_sweep(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    (lost,) = await _outbox(pool, "post-6", 1)
    await pool.execute("UPDATE outbox SET published_at = now() - interval '1 minute' WHERE id = $1", lost.event_id)
    handled: list[int] = []
    spec = GroupSpec("test-sweep", (POSTS,), frozenset({"PostUpdated"}), _recording(handled))
    await _produce(settings, [])
    runner = group_runner(settings.model_copy(update={"consumer_sweep_after_s": 30.0}), pool, redis, spec)
    runner.sweep_every_s = 0.05
    async with running(runner.run):
        await eventually(lambda: _done(handled, 1))
    assert handled == [lost.event_id]
    assert await pool.fetchval("SELECT count(*) FROM processed_events WHERE group_name = 'test-sweep'") == 1


async def test_the_sweep_leaves_recent_events_to_kafka(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    (recent,) = await _outbox(pool, "post-7", 1)
    await pool.execute("UPDATE outbox SET published_at = now() WHERE id = $1", recent.event_id)
    handled: list[int] = []
    spec = GroupSpec("test-sweep-recent", (POSTS,), frozenset({"PostUpdated"}), _recording(handled))
    await _produce(settings, [])
    runner = group_runner(settings.model_copy(update={"consumer_sweep_after_s": 30.0}), pool, redis, spec)
    runner.sweep_every_s = 0.05
    async with running(runner.run):
        await eventually(lambda: _swept(runner))
    assert handled == []
