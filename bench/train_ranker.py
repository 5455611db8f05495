"""`feedfabric train-ranker` on a feed log of 1,000,000 rows: the command's wall time, end to end
(refitting the per-reader effects, streaming the rows with their outcomes, fitting, scoring the
held-out part, storing), and the command's peak resident memory. Exits non-zero when the command fails.

The log is generated in Postgres: 2,000 readers, 50,000 posts, rows over 10 days with random
signals, and a like within the hour for about one served row in eight, more likely the higher the
row's similarity and affinity (so there is something to learn). Each reader is served each post at
most once, so every row is a first serving and trained on (the most work for the fit).

    .venv/bin/python bench/train_ranker.py [--rows 1000000] [--database URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.db import feed_log as feed_log_db  # noqa: E402

from bench._stack import env_or, fresh_database, services  # noqa: E402


async def load(database_url: str, rows: int) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        t0 = time.monotonic()
        await feed_log_db.ensure_partitions(
            conn,
            {
                d.date()
                for d in await conn.fetchval(
                    "SELECT array_agg(d) FROM generate_series(now() - interval '12 days', now(), interval '1 day') d"
                )
            },
        )
        await conn.execute(
            """INSERT INTO members (id, external_id, username, display_name)
               SELECT gen_random_uuid(), 'm' || i, 'm' || i, 'm' FROM generate_series(1, 2000) i"""
        )
        await conn.execute(
            """WITH m AS (SELECT array_agg(id) AS ids FROM members)
               INSERT INTO posts (id, author_id, content, created_at)
               SELECT gen_random_uuid(), m.ids[1 + (i % 2000)], 'p', now() - interval '11 days' + i * interval '15 seconds'
               FROM generate_series(1, 50000) i, m"""
        )
        await conn.execute(
            f"""WITH m AS (SELECT array_agg(id) AS ids FROM members), p AS (SELECT array_agg(id) AS ids FROM posts)
                INSERT INTO feed_log (member_id, feed, post_id, position, source, affinity, interest, favourite,
                                      age_seconds, similarity, popularity, served_at)
                SELECT m.ids[1 + (i % 2000)], CASE WHEN i % 3 = 0 THEN 'for_you' ELSE 'following' END,
                       p.ids[1 + (((i / 2000) * 97 + (i % 2000) * 13) % 50000)], i % 20, 'postgres',
                       random() * 5, random() * 5, random() < 0.1, random() * 172800, random(), random() * 40,
                       now() - interval '10 days' + i * (interval '9 days' / {rows})
                FROM generate_series(1, {rows}) i, m, p"""
        )
        await conn.execute(
            """INSERT INTO likes (post_id, member_id, created_at)
               SELECT DISTINCT ON (post_id, member_id) post_id, member_id, served_at + interval '10 minutes'
               FROM feed_log
               WHERE random() < 0.02 + 0.2 * similarity + 0.02 * affinity
               ORDER BY post_id, member_id, served_at
               ON CONFLICT DO NOTHING"""
        )
        await conn.execute("ANALYZE")
        count = await conn.fetchval("SELECT count(*) FROM feed_log")
        liked = await conn.fetchval("SELECT count(*) FROM likes")
        print(f"loaded {count:,} log rows and {liked:,} likes in {time.monotonic() - t0:.1f} s")
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--database", help="reuse a database this benchmark loaded before")
    args = parser.parse_args()
    with services() as env:
        database_url = args.database or fresh_database(env_or(env, "DATABASE_URL"))
        if not args.database:
            asyncio.run(load(database_url, args.rows))
        t0 = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "feedfabric", "train-ranker"],
            env={**os.environ, "DATABASE_URL": database_url, "LOG_LEVEL": "WARNING"},
            capture_output=True,
            text=True,
        )
        elapsed = time.monotonic() - t0
        # ru_maxrss: the largest resident set of any child waited for, in kB on Linux.
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if done.returncode != 0:
            print(done.stdout.strip())
            print(done.stderr.strip(), file=sys.stderr)
            print(f"feedfabric train-ranker FAILED (exit {done.returncode}) after {elapsed:.1f} s", file=sys.stderr)
            raise SystemExit(1)
        print(done.stdout.strip())
        print(
            f"feedfabric train-ranker: {elapsed:.1f} s wall, peak {peak_mb:.0f} MB resident (targets: 1M rows <= 60 s;"
        )
        print("  10M rows <= 10 min under 1.5 GB)")


if __name__ == "__main__":
    main()
