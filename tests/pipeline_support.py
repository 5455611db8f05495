"""Running the relay and consumer groups inside a test, and waiting on their effects."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer
from feedfabric.core.events import Event
from feedfabric.core.settings import Settings
from feedfabric.core.topics import ensure_topics
from feedfabric.workers.base import GroupSpec, WorkerContext
from feedfabric.workers.relay import Relay, RelayTimings
from feedfabric.workers.runner import GroupRunner

FAST = RelayTimings(shard_check_s=0.2, health_check_s=0.5, prune_every_s=3600)


HANG_GUARD_S = 120.0
"""How long a wait for an event may take before the test fails rather than hangs. It is no speed target
(those live in bench/): a wait returns as soon as its event happens, and the guard only has to outlast a
loaded machine. 20 s failed `make test` with the load average at 3 to 5."""


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = HANG_GUARD_S, every: float = 0.05) -> Any:
    """Polls `check` until it returns something truthy; fails with its last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s (last: {last!r})")


@contextlib.asynccontextmanager
async def running(*runs: Callable[[asyncio.Event], Awaitable[None]]) -> AsyncIterator[asyncio.Event]:
    """Runs each `run(stop)` as a task for the block, then stops them and surfaces their errors."""
    stop = asyncio.Event()
    tasks = [asyncio.create_task(r(stop)) for r in runs]
    try:
        yield stop
    finally:
        stop.set()
        done = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
        errors = [d for d in done if isinstance(d, BaseException)]
        if errors:
            raise errors[0]


def relay(settings: Settings, **kwargs: Any) -> Relay:
    return Relay(settings, timings=kwargs.pop("timings", FAST), **kwargs)


def quick_join_consumer(settings: Settings, group_id: str) -> AIOKafkaConsumer:
    """The runner's consumer with short group timeouts: the broker holds a first join for about the session timeout."""
    return AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers or "",
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=2000,
        heartbeat_interval_ms=300,
        rebalance_timeout_ms=1000,
        fetch_max_wait_ms=50,
    )


def group_runner(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, spec: GroupSpec, **kwargs: Any
) -> GroupRunner:
    return GroupRunner(
        spec,
        WorkerContext(settings=settings, pool=pool, redis=redis),
        poll_ms=50,
        consumer_factory=quick_join_consumer,
        **kwargs,
    )


async def read_topic(
    settings: Settings, base: str, expect: int, timeout: float = HANG_GUARD_S
) -> list[tuple[str, dict[str, Any]]]:
    """Every (key, message) on a topic from the start, once at least `expect` have arrived."""
    await ensure_topics(settings)
    consumer = AIOKafkaConsumer(
        settings.kafka_topic_prefix + base,
        bootstrap_servers=settings.kafka_bootstrap_servers or "",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    got: list[tuple[str, dict[str, Any]]] = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < expect and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                got += [(r.key.decode(), json.loads(r.value)) for r in records]
        # A short quiet period to catch duplicates that follow.
        for records in (await consumer.getmany(timeout_ms=300)).values():
            got += [(r.key.decode(), json.loads(r.value)) for r in records]
    finally:
        await consumer.stop()
    return got


async def all_committed(runner: GroupRunner) -> bool:
    """Every assigned partition consumed to its end and that position committed."""
    consumer = runner.consumer
    assigned = consumer.assignment()
    for tp in assigned:
        end = (await consumer.end_offsets([tp]))[tp]
        position = await consumer.position(tp)
        if (await consumer.committed(tp) or 0) < position or position < end:
            return False
    return bool(assigned)


class InlineGroup:
    """A consumer group's handler over the outbox, without a broker: the events it takes, in outbox
    order, each in its own transaction as the runner runs them, each once unless applied again."""

    def __init__(self, spec: GroupSpec, ctx: WorkerContext) -> None:
        self.spec = spec
        self.ctx = ctx
        self.done = 0

    async def events(self) -> list[Event]:
        rows = await self.ctx.pool.fetch(
            """SELECT id, key, event_type, aggregate_version, payload FROM outbox
               WHERE id > $1 AND event_type = ANY($2::text[]) ORDER BY id""",
            self.done,
            sorted(self.spec.event_types),
        )
        return [Event(r["id"], r["event_type"], r["key"], r["aggregate_version"], r["payload"]) for r in rows]

    async def apply(self, event: Event) -> None:
        async with self.ctx.pool.acquire() as conn, conn.transaction():
            await self.spec.handle(self.ctx, conn, event)

    async def catch_up(self) -> None:
        for event in await self.events():
            await self.apply(event)
            self.done = event.event_id
