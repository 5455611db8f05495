"""Fan-out throughput: one post by an author with 100,000 followers.

Prints timeline inserts per second from one worker process (the real
`timelines.fan_out`: keyset pages of followers from Postgres and one
server-side batch per page), beside what the same Redis takes for the same
ZADD + ZREMRANGEBYRANK pair fed by `redis-cli --pipe`, and the ratio.
Targets: >= 150,000 inserts/s and >= 0.5 of the raw rate.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402
from feedfabric.feeds import timelines  # noqa: E402
from feedfabric.ids import new_id  # noqa: E402
from feedfabric.settings import Settings  # noqa: E402

from bench._stack import fresh_database, redis_cli, services  # noqa: E402

FOLLOWERS = 100_000
RUNS = 5


async def seed(db: str) -> uuid.UUID:
    conn = await asyncpg.connect(db)
    try:
        author = new_id()
        await conn.execute(
            "INSERT INTO members (id, external_id, username, display_name) VALUES ($1, 'bench-author', 'bench_author', 'A')",
            author,
        )
        ids = [new_id() for _ in range(FOLLOWERS)]
        await conn.execute(
            "INSERT INTO members (id, external_id, username, display_name)"
            " SELECT id, 'f-' || id::text, 'f' || id::text, 'F' FROM unnest($1::uuid[]) AS id",
            ids,
        )
        await conn.execute(
            "INSERT INTO follows (follower_id, target_type, target_id) SELECT id, 'member', $2 FROM unnest($1::uuid[]) AS id",
            ids,
            str(author),
        )
        await conn.execute("ANALYZE")
        return author
    finally:
        await conn.close()


async def new_post(conn: asyncpg.Connection, author: uuid.UUID) -> uuid.UUID:
    post = new_id()
    await conn.execute("INSERT INTO posts (id, author_id, content) VALUES ($1, $2, 'bench')", post, author)
    return post


async def fanout_rate(db: str, redis_url: str) -> list[float]:
    settings = Settings(database_url=db, redis_url=redis_url, celebrity_follower_threshold=10 * FOLLOWERS)
    author = await seed(db)
    redis = aioredis.from_url(redis_url)
    conn = await asyncpg.connect(db)
    rates = []
    try:
        await redis.flushdb()
        for _ in range(RUNS):
            post = await new_post(conn, author)
            started = time.perf_counter()
            async with conn.transaction():
                result = await timelines.fan_out(conn, redis, settings, post)
            elapsed = time.perf_counter() - started
            assert result is not None and result.pushed == FOLLOWERS + 1, result
            rates.append(result.pushed / elapsed)
    finally:
        await conn.close()
        await redis.aclose()
    return rates


def raw_rate(redis_url: str) -> float:
    """ZADD + trim pairs per second through `redis-cli --pipe`, RESP generated up front."""
    host_port, _, db = redis_url.removeprefix("redis://").partition("/")
    host, _, port = host_port.partition(":")
    post = str(new_id()).encode()
    parts = []
    for _ in range(FOLLOWERS):
        key = f"rawfeed:{uuid.uuid4()}".encode()
        parts.append(
            b"*4\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n$13\r\n1700000000000\r\n$%d\r\n%s\r\n" % (len(key), key, len(post), post)
        )
        parts.append(b"*4\r\n$15\r\nZREMRANGEBYRANK\r\n$%d\r\n%s\r\n$1\r\n0\r\n$4\r\n-501\r\n" % (len(key), key))
    with tempfile.NamedTemporaryFile(suffix=".resp") as f:
        f.write(b"".join(parts))
        f.flush()
        started = time.perf_counter()
        with open(f.name, "rb") as data:
            done = subprocess.run(
                [redis_cli(), "-h", host, "-p", port, "-n", db or "0", "--pipe"],
                stdin=data,
                capture_output=True,
                check=True,
            )
        elapsed = time.perf_counter() - started
    assert b"errors: 0" in done.stdout, done.stdout
    return FOLLOWERS / elapsed


def main() -> None:
    with services() as env:
        db = fresh_database(env["DATABASE_URL"])
        raw = [raw_rate(env["REDIS_URL"]) for _ in range(RUNS)]
        rates = asyncio.run(fanout_rate(db, env["REDIS_URL"]))
    fan = statistics.median(rates)
    base = statistics.median(raw)
    print(f"fan-out: {FOLLOWERS:,} followers, {RUNS} posts")
    print(f"  timeline inserts/s (worker, median):   {fan:>10,.0f}   runs: {', '.join(f'{r:,.0f}' for r in rates)}")
    print(f"  raw ZADD+trim pairs/s (redis-cli pipe): {base:>10,.0f}   runs: {', '.join(f'{r:,.0f}' for r in raw)}")
    print(f"  ratio: {fan / base:.2f}   targets: >= 150,000/s and >= 0.50")


if __name__ == "__main__":
    main()
