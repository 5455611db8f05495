"""Post-to-timeline latency: from a post's commit to the post being in a follower's timeline.

Runs `feedfabric relay` and `feedfabric worker --group worker-events` as
child processes (default OUTBOX_IDLE_MS, so the NOTIFY wake-up, not the poll,
has to set the figure), writes 1,000 posts at a steady rate the way the API
does (post row + outbox row in one transaction), and watches the follower's
timeline. Targets: p50 < 50 ms, p99 < 250 ms.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402
from feedfabric.core.ids import id_millis, new_id  # noqa: E402
from feedfabric.db.outbox import add_event  # noqa: E402
from feedfabric.db.pool import create_pool  # noqa: E402
from feedfabric.feeds.timelines import decode_member, feed_key  # noqa: E402

from bench._stack import fresh_database, services  # noqa: E402

POSTS = 1_000
RATE = 50.0  # posts per second
FOLLOWERS = 100


async def write_post(pool: asyncpg.Pool, author: uuid.UUID) -> tuple[str, float]:
    post = new_id()
    async with pool.acquire() as conn:
        async with conn.transaction():
            await conn.execute("INSERT INTO posts (id, author_id, content) VALUES ($1, $2, 'bench')", post, author)
            await add_event(
                conn,
                "PostCreated",
                str(post),
                {"postId": str(post), "authorId": str(author), "createdAtMs": id_millis(post), "repostOf": None},
            )
        committed = time.monotonic()
    return str(post), committed


async def watch(redis: aioredis.Redis, key: str, seen: dict[str, float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        for raw in await redis.zrevrange(key, 0, 63):
            seen.setdefault(decode_member(raw), time.monotonic())
        await asyncio.sleep(0.001)


async def run(db: str, redis_url: str) -> list[float]:
    pool = await create_pool(db, min_size=2, max_size=4)
    redis = aioredis.from_url(redis_url)
    assert pool is not None
    author, follower = new_id(), new_id()
    others = [new_id() for _ in range(FOLLOWERS - 1)]
    await pool.execute(
        "INSERT INTO members (id, external_id, username, display_name)"
        " SELECT id, 'b-' || id::text, 'b' || id::text, 'B' FROM unnest($1::uuid[]) AS id",
        [author, follower, *others],
    )
    await pool.execute(
        "INSERT INTO follows (follower_id, target_type, target_id) SELECT id, 'member', $2 FROM unnest($1::uuid[]) AS id",
        [follower, *others],
        str(author),
    )
    seen: dict[str, float] = {}
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch(redis, feed_key(follower), seen, stop))
    try:
        warm, _ = await write_post(pool, author)
        deadline = time.monotonic() + 90
        while warm not in seen:
            if time.monotonic() > deadline:
                raise RuntimeError("the pipeline did not deliver a first post within 90 s")
            await asyncio.sleep(0.05)
        committed: dict[str, float] = {}
        start = time.monotonic()
        for i in range(POSTS):
            await asyncio.sleep(max(0.0, start + i / RATE - time.monotonic()))
            post, at = await write_post(pool, author)
            committed[post] = at
        deadline = time.monotonic() + 30
        while not all(p in seen for p in committed) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        missing = [p for p in committed if p not in seen]
        if missing:
            raise RuntimeError(f"{len(missing)} posts never reached the timeline")
        return [(seen[p] - at) * 1000 for p, at in committed.items()]
    finally:
        stop.set()
        await watcher
        await redis.aclose()
        await pool.close()


def main() -> None:
    with services() as env:
        db = fresh_database(env["DATABASE_URL"])
        child_env = {**os.environ, **env, "DATABASE_URL": db, "KAFKA_TOPIC_PREFIX": f"bench{uuid.uuid4().hex[:8]}."}
        children = [
            subprocess.Popen(
                [sys.executable, "-m", "feedfabric", *argv],
                env=child_env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for argv in (("relay",), ("worker", "--group", "worker-events"))
        ]
        try:
            latencies = asyncio.run(run(db, env["REDIS_URL"]))
        finally:
            for child in children:
                child.terminate()
            for child in children:
                child.wait(15)
    latencies.sort()
    q = statistics.quantiles(latencies, n=100)
    print(
        f"post-to-timeline: {POSTS:,} posts at {RATE:.0f}/s, author with {FOLLOWERS} followers, relay + worker-events running"
    )
    print(
        f"  p50 {q[49]:.1f} ms   p90 {q[89]:.1f} ms   p99 {q[98]:.1f} ms   max {latencies[-1]:.1f} ms   mean {statistics.mean(latencies):.1f} ms"
    )
    print("  targets: p50 < 50 ms, p99 < 250 ms")


if __name__ == "__main__":
    main()
