"""The consumer runner: retries with backoff, commits after success, dead letters for poison."""

from __future__ import annotations

import json

import asyncpg
import redis.asyncio as aioredis
from aiokafka import AIOKafkaProducer

from feedfabric.events import POSTS, Event
from feedfabric.settings import Settings
from feedfabric.workers.base import GroupSpec, PermanentError, WorkerContext
from feedfabric.workers.topics import ensure_topics
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
    rows = await pool.fetch('SELECT "offset", error FROM dead_letters WHERE group_name = $1 ORDER BY "offset"', "test-poison")
    assert [r["offset"] for r in rows] == [0, 1]
    assert "undecodable" in rows[0]["error"] and "can never succeed" in rows[1]["error"]
