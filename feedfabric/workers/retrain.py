"""The worker's daily ranker retraining: checked hourly, trained when a day has passed since the last
model and enough rows with a known outcome have been logged since (feeds.ranker_training.retrain_if_due).
An advisory lock keeps two worker processes from training at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import asyncpg

from feedfabric.feeds import ranker_training as ranker

__all__ = ["retrain_once"]

log = logging.getLogger("feedfabric.retrain")

_LOCK_KEY = 0x0FEED_2A2
CHECK_EVERY_S = 3600.0


async def retrain_once(pool: asyncpg.Pool, min_new_rows: int) -> ranker.Trained | None:
    async with pool.acquire() as conn:
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", _LOCK_KEY):
            return None
        try:
            return await ranker.retrain_if_due(pool, min_new_rows=min_new_rows)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)


async def run(pool: asyncpg.Pool, stop: asyncio.Event, min_new_rows: int, every_s: float = CHECK_EVERY_S) -> None:
    while not stop.is_set():
        try:
            await retrain_once(pool, min_new_rows)
        except Exception:
            log.exception("ranker retraining failed; trying again at the next check")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
