"""The metrics that describe shared state, read from Postgres at scrape time, so any API replica
reports the truth however many relays or workers run."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg

from feedfabric.core.metrics import (
    DEAD_LETTERS_STORED,
    OUTBOX_BACKLOG,
    OUTBOX_OLDEST_AGE,
    REDIS_MAXMEMORY,
    REDIS_USED_MEMORY,
    REPORT_OLDEST_OPEN,
    REPORTS_OPEN,
)
from feedfabric.db import reports as reports_db

__all__ = ["refresh_from_postgres", "refresh_from_redis"]

log = logging.getLogger("feedfabric.metrics")

_SCRAPE_TIMEOUT_S = 1.0

_OUTBOX_SQL = """
SELECT count(*) AS backlog,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest
FROM outbox WHERE published_at IS NULL
"""
_DEAD_LETTERS_SQL = "SELECT group_name, count(*) AS n FROM dead_letters GROUP BY group_name"


async def refresh_from_postgres(pool: asyncpg.Pool) -> None:
    """Reads the gauges that describe shared state; a slow or failing database leaves the last values."""
    try:
        async with asyncio.timeout(_SCRAPE_TIMEOUT_S):
            row = await pool.fetchrow(_OUTBOX_SQL)
            dead = await pool.fetch(_DEAD_LETTERS_SQL)
            reports_open, report_oldest = await reports_db.open_gauges(pool)
    except Exception:  # noqa: BLE001 - a scrape must still answer
        log.warning("metrics: could not read outbox gauges from Postgres")
        return
    OUTBOX_BACKLOG.set(row["backlog"])
    OUTBOX_OLDEST_AGE.set(row["oldest"])
    REPORTS_OPEN.set(reports_open)
    REPORT_OLDEST_OPEN.set(report_oldest)
    for record in dead:
        DEAD_LETTERS_STORED.labels(group=record["group_name"]).set(record["n"])


async def refresh_from_redis(redis: Any) -> None:
    """Reads used_memory and maxmemory of every node (INFO memory; a cluster client asks each master)."""
    try:
        async with asyncio.timeout(_SCRAPE_TIMEOUT_S):
            info = await redis.info("memory")
    except Exception:  # noqa: BLE001 - a scrape must still answer
        log.warning("metrics: could not read Redis memory")
        return
    nodes = info if info and all(isinstance(v, dict) for v in info.values()) else {"default": info}
    for node, memory in nodes.items():
        REDIS_USED_MEMORY.labels(node=str(node)).set(float(memory.get("used_memory", 0)))
        REDIS_MAXMEMORY.labels(node=str(node)).set(float(memory.get("maxmemory", 0)))
