"""What the feed log's writer costs every page: wall time, this process's CPU and its Postgres backend's
CPU per logged page of 20, for each of `feeds.feed_log.write`'s steps as the API's background writer
runs them: the signals (version check, reader loads, rows made and encoded), the COPY, the fold.

Seeds a fresh database (1,000 members, 20,000 posts over a week, 30 % tagged, 20,000 likes, affinity
and topic interest), then writes batches of 50 finished pages of 20 random posts (what each page
showed of its posts read beforehand, as the API's pages carry it) on one connection with one
SignalBook, folding every batch, and prints each batch's wall time per page, its median, each step's
CPU over the warm batches and how many of the fold's updates were HOT (no index entry written).
Readers are drawn at random from all 1,000 members by default, so few (reader, author) pairs repeat
and the fold mostly inserts; `--readers 50` draws them from 50, so the pairs repeat and the fold
mostly updates, as it does for readers who come back to the same followed authors.

    PYTHONPATH=$PWD python bench/feed_log_cost.py [--batches 12] [--readers 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
import psutil  # noqa: E402
from feedfabric.core.ids import new_id  # noqa: E402
from feedfabric.db import feed_log  # noqa: E402
from feedfabric.db.pool import create_pool  # noqa: E402
from feedfabric.feeds import feed_log as feed_log_svc  # noqa: E402
from feedfabric.feeds.served_signals import Served, ServedPost, SignalBook  # noqa: E402

from bench._stack import env_or, fresh_database, services  # noqa: E402

PAGES_PER_BATCH = 50
TAGS = ("art", "books", "code", "food", "travel")


async def measure(url: str, batches: int, readers: int) -> None:
    pool = await create_pool(url, min_size=1, max_size=2)
    rnd = random.Random(7)
    members = [new_id() for _ in range(1000)]
    authors = members[:200]
    await pool.execute(
        "INSERT INTO members (id, external_id, username, display_name)"
        " SELECT id, id::text, replace(id::text, '-', ''), 'M' FROM unnest($1::uuid[]) id",
        members,
    )
    now = datetime.now(UTC)
    posts = [new_id() for _ in range(20_000)]
    await pool.execute(
        "INSERT INTO posts (id, author_id, content, created_at)"
        " SELECT p, a, 'x', t FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS u(p, a, t)",
        posts,
        [rnd.choice(authors) for _ in posts],
        [now - timedelta(seconds=rnd.randint(0, 7 * 86_400)) for _ in posts],
    )
    tagged = [p for p in posts if rnd.random() < 0.3]
    await pool.execute(
        "INSERT INTO post_tags (post_id, tag, source) SELECT p, t, 'hashtag' FROM unnest($1::uuid[], $2::text[]) AS u(p, t)",
        tagged,
        [rnd.choice(TAGS) for _ in tagged],
    )
    likes = {(rnd.choice(members), rnd.choice(posts)) for _ in range(20_000)}
    await pool.execute(
        "INSERT INTO likes (member_id, post_id) SELECT m, p FROM unnest($1::uuid[], $2::uuid[]) AS u(m, p)",
        [m for m, _ in likes],
        [p for _, p in likes],
    )
    affinity = {(m, rnd.choice(authors)) for m in members for _ in range(20)}
    await pool.execute(
        "INSERT INTO author_affinity (member_id, author_id, score) SELECT m, a, 1 FROM unnest($1::uuid[], $2::uuid[]) AS u(m, a)",
        [m for m, _ in affinity],
        [a for _, a in affinity],
    )
    interest = [(m, t) for m in members for t in TAGS if rnd.random() < 0.4]
    await pool.execute(
        "INSERT INTO topic_interest (member_id, tag, score) SELECT m, t, 1 FROM unnest($1::uuid[], $2::text[]) AS u(m, t)",
        [m for m, _ in interest],
        [t for _, t in interest],
    )

    async with pool.acquire() as conn:
        probe = [feed_log.ServedPage(members[0], "following", tuple(posts), "redis", datetime.now(UTC))]
        seen = {post: value for (_, post), value in (await feed_log.describe(conn, probe)).items()}

    def pages() -> list[Served]:
        now = datetime.now(UTC)
        return [
            Served(
                rnd.choice(members[:readers]),
                "following",
                "redis",
                now,
                tuple(ServedPost.of(p, n, seen[p]) for n, p in enumerate(rnd.sample(posts, 20))),
            )
            for _ in range(PAGES_PER_BATCH)
        ]

    book = SignalBook()
    steps = ("signals", "copy", "fold")  # feeds.feed_log.write's three steps, timed apart
    own: dict[str, list[float]] = {step: [] for step in steps}
    backend: dict[str, list[float]] = {step: [] for step in steps}
    wall: list[float] = []
    async with pool.acquire() as conn:
        await feed_log_svc.write(conn, book, pages(), 3.0)  # makes today's partition
        await conn.execute("ANALYZE")
        server = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()"))

        def clocks() -> tuple[float, float]:
            return time.process_time(), sum(server.cpu_times()[:2])

        await conn.execute("SELECT pg_stat_force_next_flush()")
        before = await hot_updates(conn)
        for _ in range(batches):
            made = pages()
            started = time.perf_counter()
            marks = [clocks()]
            batch = await book.batch(conn, made, 3.0)
            marks.append(clocks())
            await feed_log.copy_rows(conn, batch.rows)
            book.counted(batch)
            marks.append(clocks())
            await book.fold(conn)
            marks.append(clocks())
            wall.append((time.perf_counter() - started) / PAGES_PER_BATCH * 1000)
            for step, (cpu0, pg0), (cpu1, pg1) in zip(steps, marks[:-1], marks[1:], strict=True):
                own[step].append((cpu1 - cpu0) / PAGES_PER_BATCH * 1000)
                backend[step].append((pg1 - pg0) / PAGES_PER_BATCH * 1000)
        await conn.execute("SELECT pg_stat_force_next_flush()")
        after = await hot_updates(conn)
    print("feed log writer, ms per logged page of 20, per batch of 50 (wall):", ", ".join(f"{t:.2f}" for t in wall))
    print(
        f"median of the warm batches: wall {statistics.median(wall[2:]):.3f} ms a page"
        f" ({book.loads} readers read from Postgres in all); this process's CPU / its Postgres backend's CPU,"
        " mean of the warm batches (the counters tick in 10 ms, a fifth of a millisecond a page of a batch):"
    )
    for step in steps:
        print(f"  {step}: {statistics.fmean(own[step][2:]):.3f} / {statistics.fmean(backend[step][2:]):.3f} ms a page")
    print("the fold's rows over the timed batches:")
    for table, counts in after.items():
        ins, upd, hot = (n - b for n, b in zip(counts, before.get(table, (0, 0, 0)), strict=True))
        print(f"  {table}: {ins} inserted, {upd} updated, {hot} of them HOT")
    await pool.close()


async def hot_updates(conn: asyncpg.Connection) -> dict[str, tuple[int, int, int]]:
    """Rows inserted, updated and HOT-updated so far in the tables the fold writes: a HOT update writes
    no index entry, so the share says whether a lower fillfactor could save the fold anything."""
    rows = await conn.fetch(
        "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
        " WHERE relname IN ('author_exposure', 'topic_exposure', 'member_signal_versions') ORDER BY relname"
    )
    return {r["relname"]: (r["n_tup_ins"], r["n_tup_upd"], r["n_tup_hot_upd"]) for r in rows}


def main(batches: int, readers: int) -> None:
    with services() as env:
        url = fresh_database(env_or(env, "DATABASE_URL"))
        asyncio.run(measure(url, batches, readers))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument(
        "--readers", type=int, default=1000, help="readers drawn from this many members (at most 1,000)"
    )
    args = parser.parse_args()
    main(args.batches, min(max(args.readers, 1), 1000))
