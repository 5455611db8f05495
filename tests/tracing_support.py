"""Tracing inside a test: one in-memory ring shared by the API, the relay and a runner in this process."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import asyncpg
import redis.asyncio as aioredis
from feedfabric.core import tracing
from feedfabric.core.settings import Settings
from feedfabric.workers import events
from feedfabric.workers.base import WorkerContext
from feedfabric.workers.runner import GroupRunner

from tests.pipeline_support import quick_join_consumer


def traced_settings(settings: Settings, **overrides: Any) -> Settings:
    return settings.model_copy(update={"tracing_sample_ratio": 1.0, "tracing_recent_traces": 300, **overrides})


@contextlib.contextmanager
def traced_process(settings: Settings) -> Iterator[tracing.Tracing]:
    """Tracing as `feedfabric dev` sets it up, kept in memory only; asyncpg's patch is taken back after."""
    made = tracing.setup(traced_settings(settings), "feedfabric-test", write_recent=False)
    assert made is not None
    made.instrument_asyncpg()
    try:
        yield made
    finally:
        made.shutdown()


def events_runner(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, traced: tracing.Tracing
) -> GroupRunner:
    """worker-events, continuing each event's trace."""
    ctx = WorkerContext(settings=settings, pool=pool, redis=redis, tracer=traced.tracer())
    return GroupRunner(events.GROUP, ctx, poll_ms=50, consumer_factory=quick_join_consumer)
