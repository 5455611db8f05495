"""`feedfabric maintain` on a backlog: rows removed per second by each retention step.

    .venv/bin/python bench/maintain.py [--rows 200000]

Seeds, past their windows, --rows published outbox rows (one key each, so
their outbox_keys and consumer_key_versions go too), --rows processed_events
and --rows / 10 dead letters, plus as many rows inside the windows that must
stay; runs one pass; prints each step's rows and rate, and checks what stayed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from feedfabric.db.pool import create_pool  # noqa: E402
from feedfabric.feeds.maintenance import STEPS, RetentionStep, maintain  # noqa: E402

from bench._stack import env_or, fresh_database, services  # noqa: E402


async def seed(pool: asyncpg.Pool, settings: Settings, rows: int) -> None:
    old_outbox = settings.outbox_retention_hours + 1
    old_processed = settings.processed_events_retention_hours + 1
    await pool.execute(
        "INSERT INTO outbox (topic, key, shard, event_type, aggregate_version, payload, published_at)"
        " SELECT 'feedfabric.posts', 'k' || g, g % 16, 'PostUpdated', 1, '{}',"
        " now() - make_interval(hours => CASE WHEN g % 2 = 0 THEN $2 ELSE 1 END) FROM generate_series(1, $1 * 2) g",
        rows,
        old_outbox,
    )
    await pool.execute("INSERT INTO outbox_keys (key, version) SELECT key, 1 FROM outbox")
    await pool.execute(
        "INSERT INTO consumer_key_versions (group_name, key, version) SELECT 'worker-events', key, 1 FROM outbox"
    )
    await pool.execute(
        "INSERT INTO processed_events (group_name, event_id, processed_at) SELECT 'worker-events', g,"
        " now() - make_interval(hours => CASE WHEN g % 2 = 0 THEN $2 ELSE 1 END) FROM generate_series(1, $1 * 2) g",
        rows,
        old_processed,
    )
    await pool.execute(
        'INSERT INTO dead_letters (group_name, topic, partition, "offset", payload, error, created_at)'
        " SELECT 'worker-events', 't', 0, g, '{}', 'e',"
        " now() - make_interval(days => CASE WHEN g % 2 = 0 THEN $2 ELSE 1 END) FROM generate_series(1, $1 * 2) g",
        rows // 10,
        settings.dead_letter_retention_days + 1,
    )
    await pool.execute("ANALYZE")


async def run(database_url: str, rows: int) -> None:
    settings = Settings(database_url=database_url)
    pool = await create_pool(database_url, min_size=1, max_size=2)
    try:
        started = time.perf_counter()
        await seed(pool, settings, rows)
        print(
            f"seeded {rows:,} rows past their window (and as many inside) per table in {time.perf_counter() - started:.1f} s"
        )
        for step in STEPS:
            started = time.perf_counter()
            removed = (await maintain(pool, settings, [RetentionStep(step.name, step.run)]))[step.name]
            took = time.perf_counter() - started
            print(f"{step.name:>18}: {removed:>9,} rows in {took:6.2f} s = {removed / took:>9,.0f} rows/s")
        left = {
            t: await pool.fetchval(f"SELECT count(*) FROM {t}")
            for t in ("outbox", "outbox_keys", "consumer_key_versions", "processed_events", "dead_letters")
        }
        print("left inside their windows:", left)
        assert left["outbox"] == rows and left["processed_events"] == rows and left["dead_letters"] == rows // 10
        assert left["outbox_keys"] == rows and left["consumer_key_versions"] == rows
        started = time.perf_counter()
        await maintain(pool, settings)
        print(f"a second pass with nothing to remove: {time.perf_counter() - started:.2f} s")
    finally:
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    with services() as env:
        asyncio.run(run(fresh_database(env_or(env, "DATABASE_URL")), args.rows))


if __name__ == "__main__":
    main()
