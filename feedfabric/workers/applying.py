"""Applying an event for a group: once each, and in its key's version order, whatever Kafka delivered.

Kafka orders a key's events only while the broker keeps its log: a broker
restarted empty receives retried in-flight batches before the relay
republishes older events, and a consumer frozen past its session timeout may
resume mid-batch while the partition's new owner works on the same key. So
the outbox, not the partition, decides: in one transaction, lock the group's
row for the key (consumer_key_versions; one key's events then apply one at a
time within the group, whichever consumer holds them), apply first any of
the key's earlier events the group has not applied, read from the outbox in
version order, then record `(group, eventId)` in processed_events (a
redelivery stops there) and call the handler. `sweep` applies, from the
outbox, events that Kafka never delivered at all.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import time
from dataclasses import dataclass

import asyncpg

from feedfabric.core import failpoints, metrics, tracing
from feedfabric.core.events import TOPIC_OF, Event
from feedfabric.core.topics import topic_name
from feedfabric.db import pipeline as db
from feedfabric.workers import spans
from feedfabric.workers.base import GroupSpec, PermanentError, WorkerContext

__all__ = ["apply_in_order", "sweep"]

log = logging.getLogger(__name__)

SWEPT = {"feedfabric.consumer.source": "outbox sweep"}


@dataclass(frozen=True)
class Applied:
    fresh: bool  # False: a redelivery, already applied
    # The wall clock read while the key's row lock is held, so one key's applies are ordered by it
    # whichever consumer made them. The effect log orders by it: a consumer stopped between its
    # commit and its log line would otherwise log an earlier version after the next owner's later one.
    at_ns: int


async def apply_in_order(spec: GroupSpec, ctx: WorkerContext, event: Event) -> Applied:
    """Applies the event after any of its key's earlier ones still missing."""
    async with ctx.pool.acquire() as conn, conn.transaction():
        earlier = await _apply_earlier(spec, ctx, conn, event)
        fresh = await _apply(spec, ctx, conn, event)
        at_ns = time.time_ns()
    for missed in earlier:
        _log_from_outbox(spec, ctx, missed, at_ns)
    return Applied(fresh, at_ns)


async def sweep(spec: GroupSpec, ctx: WorkerContext, since: dt.datetime | None) -> db.Overdue:
    """Applies events published more than CONSUMER_SWEEP_AFTER_S ago (and since `since`) the group has not.

    Kafka is the transport, the outbox the record: a broker that lost records
    it acknowledged, or a consumer position that skipped them, costs a delay,
    not the events.
    """
    after_s = ctx.settings.consumer_sweep_after_s
    async with ctx.pool.acquire() as conn:
        overdue = await db.overdue_events(
            conn, spec.name, spec.event_types, since, after_s, first_window_s=600.0, limit=500
        )
    for row in overdue.rows:
        event = row.event()
        try:
            # The event's trace goes on from its writer's span: the group's span says it came by the sweep.
            with spans.applying(ctx.tracer, spec.name, event, tracing.context_of(row.traceparent), SWEPT):
                applied = await apply_in_order(spec, ctx, event)
        except PermanentError as exc:
            await park(spec, ctx, row, f"{type(exc).__name__}: {exc}")
            continue
        if applied.fresh:
            _log_from_outbox(spec, ctx, event, applied.at_ns)
            metrics.CONSUMER_SWEPT.labels(group=spec.name).inc()
    if overdue.rows:
        log.warning(
            "%s: applied %d events from the outbox that Kafka had not delivered %.0fs after publication",
            spec.name,
            len(overdue.rows),
            after_s,
        )
    return overdue


async def park(
    spec: GroupSpec, ctx: WorkerContext, row: db.OutboxRow, error: str, conn: asyncpg.Connection | None = None
) -> None:
    """Parks an event read from the outbox (partition and offset -1: it came from no record) as processed."""
    event = row.event()
    async with contextlib.AsyncExitStack() as stack:
        if conn is None:
            acquired: asyncpg.Connection = await stack.enter_async_context(ctx.pool.acquire())
            await stack.enter_async_context(acquired.transaction())
            conn = acquired
        await db.mark_processed(conn, spec.name, event.event_id)
        await db.add_dead_letter(
            conn,
            spec.name,
            topic_name(ctx.settings, row.topic),
            -1,
            -1,
            row.key,
            json.dumps(event.to_message(), separators=(",", ":")),
            error[:2000],
        )
    metrics.DEAD_LETTERS.labels(group=spec.name).inc()


async def _apply(spec: GroupSpec, ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> bool:
    fresh = await db.mark_processed(conn, spec.name, event.event_id)
    if fresh:
        await spec.handle(ctx, conn, event)
    return fresh


async def _apply_earlier(spec: GroupSpec, ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> list[Event]:
    """Applies, from the outbox, the key's earlier events the group has not applied; returns them.

    Each runs in a savepoint, so a poison one is parked without undoing the
    others or the event that found it.
    """
    before = await db.advance_key_version(conn, spec.name, event.key, event.version)
    if event.version <= before + 1:
        return []
    applied = []
    for row in await db.events_between(conn, event.key, before, event.version, spec.event_types):
        missed = row.event()
        try:
            async with conn.transaction():
                fresh = await _apply(spec, ctx, conn, missed)
        except PermanentError as exc:
            await park(spec, ctx, row, f"{type(exc).__name__}: {exc}", conn)
            continue
        if fresh:
            applied.append(missed)
    if applied:
        metrics.CONSUMER_FILLED.labels(group=spec.name).inc(len(applied))
    return applied


def _log_from_outbox(spec: GroupSpec, ctx: WorkerContext, event: Event, at_ns: int) -> None:
    failpoints.log_effect(
        "apply",
        at_ns=at_ns,
        group=spec.name,
        id=event.event_id,
        key=event.key,
        version=event.version,
        type=event.type,
        fresh=True,
        topic=topic_name(ctx.settings, TOPIC_OF[event.type]),
        source="outbox",
    )
