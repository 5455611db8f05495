"""What the consumer runner and the handlers agree on.

The runner owns offsets, retries, dead letters and idempotency: for a poll's
events (or, when that batch declines or fails, for each event alone) it opens a
transaction, records each `(group, eventId)` in processed_events (a redelivered
event stops there), calls the group's `handle` with that connection for each
event in turn, and commits; only then are the offsets committed. A handler's
Redis writes must be idempotent by nature: a failed batch is applied again
event by event. A handler never
commits and never produces to Kafka: it writes outbox rows through
`db.outbox.add_event` on the connection it was given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import redis.asyncio as aioredis
from opentelemetry.trace import Tracer

from feedfabric.core import tracing
from feedfabric.core.events import Event
from feedfabric.core.settings import Settings

__all__ = ["GroupSpec", "Handle", "PermanentError", "WorkerContext"]


class PermanentError(Exception):
    """The payload can never succeed: park it in dead letters and move on."""


@dataclass
class WorkerContext:
    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis
    # Per-group lifespan resources (a loaded model, a client), set up by `GroupSpec.setup`.
    resources: dict[str, Any] = field(default_factory=dict)
    # Spans of the group's work, continuing each event's trace (feedfabric.core.tracing); no-op when off.
    tracer: Tracer = tracing.NO_TRACER


Handle = Callable[[WorkerContext, asyncpg.Connection, Event], Awaitable[None]]
HandleBatch = Callable[[WorkerContext, asyncpg.Connection, Sequence[Event]], Awaitable[None]]
Prepare = Callable[[WorkerContext, Sequence[Event]], Awaitable[None]]
Setup = Callable[[WorkerContext], Awaitable[None]]


@dataclass(frozen=True)
class GroupSpec:
    """One consumer group: its name, the topics (unprefixed) and event types it takes, and its handler."""

    name: str
    topics: tuple[str, ...]
    event_types: frozenset[str]
    handle: Handle
    # Called once per polled batch, before the per-event handles, for work that
    # batches well (embedding a poll's texts at once). Must be idempotent.
    prepare: Prepare | None = None
    setup: Setup | None = None
    # Applies a batch's fresh events (in order, all in one transaction) as `handle` would one after another,
    # with fewer statements (workers/batches.py); without it the batch calls `handle` for each.
    handle_batch: HandleBatch | None = None
