"""What the feed log's writer costs every page: wall time, this process's CPU and its Postgres backend's
CPU per logged page of 20, for each of `feeds.feed_log.write`'s steps as the API's background writer
runs them: the signals (version check, reader loads, rows made and encoded), the COPY, the fold.

Seeds a fresh database (1,000 members, 20,000 posts over a week, 30 % tagged, 20,000 likes, affinity
and topic interest), then writes batches of 50 finished pages of 20 random posts (what each page
showed of its posts read beforehand, as the API's pages carry it) on one connection with one
SignalBook, folding every batch (readers drawn at random, so no pair repeats: the fold's most), and
prints each batch's wall time per page, its median and each step's CPU over the warm batches.

    PYTHONPATH=$PWD python bench/feed_log_cost.py [--batches 12]
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

import psutil  # noqa: E402
from feedfabric.core.ids import new_id  # noqa: E402
from feedfabric.db import feed_log  # noqa: E402
from feedfabric.db.pool import create_pool  # noqa: E402
from feedfabric.feeds import feed_log as feed_log_svc  # noqa: E402
from feedfabric.feeds.served_signals import Served, ServedPost, SignalBook  # noqa: E402

from bench._stack import env_or, fresh_database, services  # noqa: E402

PAGES_PER_BATCH = 50
TAGS = ("art", "books", "code", "food", "travel")


async def measure(url: str, batches: int) -> None:
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
                rnd.choice(members),
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
    print("feed log writer, ms per logged page of 20, per batch of 50 (wall):", ", ".join(f"{t:.2f}" for t in wall))
    print(
        f"median of the warm batches: wall {statistics.median(wall[2:]):.3f} ms a page"
        f" ({book.loads} readers read from Postgres in all); this process's CPU / its Postgres backend's CPU,"
        " mean of the warm batches (the counters tick in 10 ms, a fifth of a millisecond a page of a batch):"
    )
    for step in steps:
        print(f"  {step}: {statistics.fmean(own[step][2:]):.3f} / {statistics.fmean(backend[step][2:]):.3f} ms a page")
    await pool.close()


def main(batches: int) -> None:
    with services() as env:
        url = fresh_database(env_or(env, "DATABASE_URL"))
        asyncio.run(measure(url, batches))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=12)
    main(parser.parse_args().batches)
