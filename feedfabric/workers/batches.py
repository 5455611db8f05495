"""Applying a poll's events for a group in one transaction; the per-event path is the fallback.

Per event, the per-event path (workers/applying.py) spends BEGIN, the key's
version, processed_events and COMMIT around the handler: at a trickle that
bookkeeping is most of what a group does. A batch does it once for all its
events: one statement locks and raises every key's version, records every
event ID in processed_events (an ID already there is a redelivery, skipped)
and says whether a key still misses an earlier event; the handlers then run in
the batch's order on the same connection, and one COMMIT ends it. The runner
commits the offsets only after that COMMIT.

A batch is all or nothing. It declines (None, nothing written) where the
per-event rules need the per-event path: a key whose earlier event must first
be filled from the outbox, or a key's versions out of order within the batch.
Any error in a handler rolls the whole batch back and reaches the caller, which
then applies the same events one by one: a poison event is parked and a
transient failure retried without losing or doubling the others (their
Postgres effects were rolled back; their Redis effects are idempotent by
nature, as those of a retried event already have to be).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import asyncpg

from feedfabric.core.events import Event
from feedfabric.db import pipeline as db
from feedfabric.workers.base import GroupSpec, WorkerContext

__all__ = ["apply_batch"]

Around = Callable[[int], contextlib.AbstractContextManager[None]]
"""The context (the group's span) around handling the batch's event at an index."""


@dataclass(frozen=True)
class BatchApplied:
    fresh: list[bool]  # per event, in the batch's order: False for a redelivery
    # Read while every key's row lock is held; the batch's i-th event was applied at at_ns + i (so a key's
    # events keep their order in the effect log, as applying.Applied.at_ns does for one).
    at_ns: int


def in_key_order(events: Sequence[Event]) -> bool:
    """Each key's versions rise along the batch (Kafka keeps a key's order within a partition)."""
    last: dict[str, int] = {}
    for event in events:
        if last.get(event.key, -1) >= event.version:
            return False
        last[event.key] = event.version
    return True


async def apply_batch(
    spec: GroupSpec, ctx: WorkerContext, events: Sequence[Event], around: Around
) -> BatchApplied | None:
    """Applies `events` (all of the group's types) in one transaction; None when the batch declines."""
    if not events or not in_key_order(events):
        return None
    async with ctx.pool.acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        try:
            recorded = await db.record_batch(
                conn,
                spec.name,
                spec.event_types,
                [e.event_id for e in events],
                [e.key for e in events],
                [e.version for e in events],
            )
            if recorded.gap:
                await transaction.rollback()
                return None
            fresh: list[bool] = []
            waiting = recorded.fresh
            for event in events:
                fresh.append(event.event_id in waiting)
                waiting.discard(event.event_id)  # a record delivered twice in one poll applies once
            await _handle(spec, ctx, conn, [(i, e) for i, e in enumerate(events) if fresh[i]], around)
            at_ns = time.time_ns()
        except BaseException:
            await transaction.rollback()
            raise
        await transaction.commit()
    return BatchApplied(fresh, at_ns)


async def _handle(
    spec: GroupSpec, ctx: WorkerContext, conn: asyncpg.Connection, fresh: list[tuple[int, Event]], around: Around
) -> None:
    """The group's batch handler over the fresh events, inside every one of their spans (its statements then
    hang under the last); else `handle` for each in turn, inside its own span."""
    if spec.handle_batch is None:
        for i, event in fresh:
            with around(i):
                await spec.handle(ctx, conn, event)
        return
    if not fresh:
        return
    with contextlib.ExitStack() as spans:
        for i, _ in fresh:
            spans.enter_context(around(i))
        await spec.handle_batch(ctx, conn, [event for _, event in fresh])
