"""`feedfabric maintain`: one pass of retention over the bookkeeping tables, as a list of steps.

Each step deletes in bounded batches (one short transaction each, so it never
holds locks the pipeline waits on for long) until nothing of its kind is past
its window, and reports how many rows it removed. Steps are independent and
idempotent: two passes at once (two workers) only share the work. A new kind
of retention is one more entry in `STEPS`.

The windows, and what idempotency relies on (docs/pipeline.md, "Retention"):
a redelivered event is recognised by its `(group, eventId)` row in
processed_events. A redelivery comes from the broker's log (at most
KAFKA_RETENTION_HOURS plus one segment old) or from a republished outbox
window (OUTBOX_RETENTION_HOURS), so processed_events is kept for twice the
longer of the two; inside that window every redelivery is recognised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from feedfabric.core.settings import Settings
from feedfabric.db import feed_log, foryou, notification_groups, suggestions
from feedfabric.db import pipeline as db
from feedfabric.feeds.media import sweep_originals
from feedfabric.feeds.suggestions import DISMISS_FOR

__all__ = ["STEPS", "RetentionStep", "maintain"]

log = logging.getLogger("feedfabric.maintain")

BATCH = 10_000
# A pass stops a step after this many batches, so one pass is bounded too; the next hour continues.
MAX_BATCHES = 1_000


async def _outbox(conn: asyncpg.Connection, settings: Settings) -> int:
    return await _drain(lambda: db.prune(conn, settings.outbox_retention_hours, BATCH))


async def _processed_events(conn: asyncpg.Connection, settings: Settings) -> int:
    return await _drain(lambda: db.prune_processed(conn, settings.processed_events_retention_hours, BATCH))


async def _idle_keys(conn: asyncpg.Connection, settings: Settings) -> int:
    """outbox_keys and consumer_key_versions of keys with no outbox row left (their events all aged out)."""
    total, after = 0, ""
    for _ in range(MAX_BATCHES):
        async with conn.transaction():
            deleted, last = await db.forget_idle_keys(conn, after, BATCH)
        total += deleted
        if last is None:
            break
        after = last
    return total + await _drain(lambda: db.forget_orphan_key_versions(conn, BATCH))


async def _dead_letters(conn: asyncpg.Connection, settings: Settings) -> int:
    return await _drain(lambda: db.prune_dead_letters(conn, settings.dead_letter_retention_days, BATCH))


async def _take_backs(conn: asyncpg.Connection, settings: Settings) -> int:
    return await _drain(lambda: notification_groups.forget_take_backs(conn, BATCH))


async def _empty_groups(conn: asyncpg.Connection, settings: Settings) -> int:
    return await _drain(lambda: notification_groups.forget_empty(conn, BATCH))


async def _feed_log(conn: asyncpg.Connection, settings: Settings) -> int:
    """Daily partitions past FEED_LOG_RETENTION_DAYS dropped (and the next days' made ahead of inserts)."""
    return len(await feed_log.apply_retention(conn, settings.feed_log_retention_days))


async def _foryou_pages(conn: asyncpg.Connection, settings: Settings) -> int:
    """For You page records of chains ranked before CHAIN_RETENTION (their cursors are refused since)."""
    before = datetime.now(UTC) - foryou.CHAIN_RETENTION
    return await _drain(lambda: foryou.forget_pages(conn, before, BATCH))


async def _dismissals(conn: asyncpg.Connection, settings: Settings) -> int:
    """Suggestion dismissals older than the time they keep a member away (feeds.suggestions.DISMISS_FOR)."""
    before = datetime.now(UTC) - DISMISS_FOR
    return await _drain(lambda: suggestions.forget_dismissals(conn, before, BATCH))


async def _drain(batch: Callable[[], Awaitable[int]]) -> int:
    total = 0
    for _ in range(MAX_BATCHES):
        done = await batch()
        total += done
        if done < BATCH:
            break
    return total


Step = Callable[[asyncpg.Connection, Settings], Awaitable[int]]


@dataclass(frozen=True)
class RetentionStep:
    name: str
    run: Step


# In order: the outbox first, so the keys it leaves with no event are forgotten in the same pass.
STEPS: list[RetentionStep] = [
    RetentionStep("outbox", _outbox),
    RetentionStep("processed_events", _processed_events),
    RetentionStep("outbox_keys", _idle_keys),
    RetentionStep("dead_letters", _dead_letters),
    RetentionStep("media_originals", sweep_originals),
    RetentionStep("feed_log", _feed_log),
    RetentionStep("notification_take_backs", _take_backs),
    RetentionStep("empty_notification_groups", _empty_groups),
    RetentionStep("foryou_pages", _foryou_pages),
    RetentionStep("suggestion_dismissals", _dismissals),
]


async def maintain(pool: asyncpg.Pool, settings: Settings, steps: list[RetentionStep] | None = None) -> dict[str, int]:
    """Runs every step once; returns rows (or partitions) removed per step. A failing step is logged and
    the others still run; the pass raises at the end if any failed."""
    removed: dict[str, int] = {}
    failed: list[str] = []
    for step in STEPS if steps is None else steps:
        started = time.monotonic()
        try:
            async with pool.acquire() as conn:
                removed[step.name] = await step.run(conn, settings)
        except Exception:
            log.exception("maintain: step %s failed", step.name)
            failed.append(step.name)
            continue
        log.info("maintain: %s removed %d in %.2fs", step.name, removed[step.name], time.monotonic() - started)
    if failed:
        raise RuntimeError(f"maintain: steps failed: {', '.join(failed)}")
    return removed
