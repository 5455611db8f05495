"""Embedding throughput through worker-embeddings: posts/s over prepare + per-event handle.

Each poll of BATCH events goes through `GROUP.prepare` (one batched model
call) and then, per event, what the runner does: a transaction, the
processed_events row, `GROUP.handle` (re-read the post, inferred tags, vector
to Redis). Kafka itself is left out: it is measured by the pipeline bench.
On a shared machine, compare the load average printed with the number of
cores: other processes take the same CPUs. Runs on embedded Postgres and Redis unless DATABASE_URL / REDIS_URL are set.

    .venv/bin/python bench/embeddings.py [--posts 2000] [--batch 100]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import redis.asyncio as aioredis  # noqa: E402
from feedfabric.core.events import Event  # noqa: E402
from feedfabric.core.ids import new_id  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from feedfabric.db.migrate import migrate  # noqa: E402
from feedfabric.db.pool import create_pool  # noqa: E402
from feedfabric.ops import devstack  # noqa: E402
from feedfabric.workers import embeddings as worker  # noqa: E402
from feedfabric.workers.base import WorkerContext  # noqa: E402

OPENERS = ["Just", "Finally", "Today I", "This morning I", "Last night we", "Can't believe I", "So happy I"]
ACTIVITIES = [
    "ran {n}k along the river and the legs are done",
    "cooked a {n}-course dinner for friends, the risotto was the star",
    "landed in Lisbon after a {n}-hour flight, already loving the trams",
    "finished reading a {n}-page novel about a lighthouse keeper",
    "shipped version {n}.0 of our app after weeks of debugging",
    "watched our team win {n}-1 in the derby, what a second half",
    "took {n} photos of the sunset with my old film camera",
    "lifted {n} kg on deadlift, new personal record at the gym",
    "adopted a {n}-month-old puppy, she already owns the sofa",
    "listened to the new album {n} times in a row",
]
ENDINGS = ["", " #weekend", " Anyone else?", " More soon.", " 🙌", " #goals", " Highly recommend."]


def texts(count: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    return [
        f"{rnd.choice(OPENERS)} {rnd.choice(ACTIVITIES).format(n=rnd.randint(2, 42))}.{rnd.choice(ENDINGS)}"
        for _ in range(count)
    ]


async def run(posts: int, batch: int, database_url: str, redis_url: str, data_dir: Path) -> None:
    await migrate(database_url)
    pool = await create_pool(database_url, min_size=2, max_size=4)
    redis = aioredis.from_url(redis_url)
    settings = Settings(database_url=database_url, redis_url=redis_url, feedfabric_data_dir=data_dir)
    ctx = WorkerContext(settings=settings, pool=pool, redis=redis)
    started = time.perf_counter()
    await worker.GROUP.setup(ctx)  # type: ignore[misc]
    print(f"model + topic vectors loaded in {time.perf_counter() - started:.1f} s")

    author = new_id()
    await pool.execute(
        "INSERT INTO members (id, external_id, username, display_name) VALUES ($1, $2, $3, $3)",
        author,
        f"bench-{author}",
        f"bench{author.hex[-8:]}",
    )
    ids = [new_id() for _ in range(posts)]
    await pool.executemany(
        "INSERT INTO posts (id, author_id, content) VALUES ($1, $2, $3)",
        [(i, author, t) for i, t in zip(ids, texts(posts))],
    )
    event_ids = itertools.count(1)
    events = [
        Event(
            next(event_ids),
            "PostCreated",
            str(i),
            1,
            {"postId": str(i), "authorId": str(author), "createdAtMs": 0, "repostOf": None},
        )
        for i in ids
    ]

    # Warm-up batch (first-call costs in torch and asyncpg), not counted.
    await _deliver(ctx, events[:batch])
    load_before = os.getloadavg()[0]
    started, cpu_started = time.perf_counter(), time.process_time()
    for start in range(batch, len(events), batch):
        await _deliver(ctx, events[start : start + batch])
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    measured = len(events) - batch
    tagged = await pool.fetchval("SELECT count(DISTINCT post_id) FROM post_tags WHERE source = 'inferred'")
    print(
        f"{measured} posts in {elapsed:.2f} s: {measured / elapsed:.0f} posts/s (batch {batch}, "
        f"{settings.embedding_replicas} model replicas, "
        f"{os.cpu_count()} cores, load average {load_before:.1f} before); {1000 * cpu / measured:.1f} ms of "
        f"worker CPU per post; {tagged}/{posts} posts got inferred topics"
    )
    await redis.aclose()
    await pool.close()


async def _deliver(ctx: WorkerContext, batch: list[Event]) -> None:
    await worker.GROUP.prepare(ctx, batch)  # type: ignore[misc]
    for event in batch:
        async with ctx.pool.acquire() as conn, conn.transaction():
            if await conn.fetchval(
                "INSERT INTO processed_events (group_name, event_id) VALUES ($1, $2)"
                " ON CONFLICT DO NOTHING RETURNING true",
                worker.GROUP.name,
                event.event_id,
            ):
                await worker.GROUP.handle(ctx, conn, event)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="feedfabric-bench-"))
    services = []
    database_url = os.environ.get("DATABASE_URL")
    redis_url = os.environ.get("REDIS_URL")
    try:
        if not database_url:
            services.append(devstack.start_postgres(data_dir))
            database_url = services[-1].url
        if not redis_url:
            services.append(devstack.start_redis(data_dir))
            redis_url = services[-1].url
        asyncio.run(run(args.posts, args.batch, database_url, redis_url, data_dir))
    finally:
        for service in reversed(services):
            service.stop()
        # The Postgres cluster alone is ~68 MB: a benchmark leaves nothing behind.
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
