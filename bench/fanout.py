"""Fan-out throughput: one post by an author with 100,000 followers.

Prints timeline inserts per second from one worker process (the real
`timelines.fan_out`: keyset pages of followers from Postgres and one
server-side batch per page), beside what the same Redis takes for the same
ZADD + ZREMRANGEBYRANK pair (the same 16-byte member and score) fed by
`redis-cli --pipe`, and the ratio; then the same fan-out on a 3-master Redis
Cluster started from the same binaries (REDIS_CLUSTER), in the same run.
Targets: >= 150,000 inserts/s and >= 0.6 of the raw rate on one Redis.

    PYTHONPATH=$PWD python bench/fanout.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
from feedfabric.core.ids import new_id  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from feedfabric.db.redisclient import create_redis  # noqa: E402
from feedfabric.feeds import timelines  # noqa: E402
from feedfabric.ops import devstack  # noqa: E402

from bench._stack import fresh_database, redis_cli, services  # noqa: E402

FOLLOWERS = 100_000
RUNS = 7


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


@dataclass
class Costs:
    """CPU seconds per insert: Redis's own (INFO cpu, one Redis only), the worker process's, and its Postgres
    backend's (from /proc: the benchmark's Postgres runs on this machine)."""

    redis: list[float] = field(default_factory=list)
    worker: list[float] = field(default_factory=list)
    postgres: list[float] = field(default_factory=list)
    raw_redis: list[float] = field(default_factory=list)


def _process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _redis_cpu(info: dict) -> float:
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def fanout_rate(
    db: str,
    redis_url: str,
    author: uuid.UUID,
    cluster: bool = False,
    raw: list[float] | None = None,
    costs: Costs | None = None,
) -> list[float]:
    """Inserts/s of RUNS posts; with `raw`, a `redis-cli --pipe` run before each post is appended to it, so
    the two alternate and the shared machine's drift reaches both alike."""
    settings = Settings(
        database_url=db, redis_url=redis_url, redis_cluster=cluster, celebrity_follower_threshold=10 * FOLLOWERS
    )
    redis = create_redis(settings)
    conn = await asyncpg.connect(db)
    backend = int(await conn.fetchval("SELECT pg_backend_pid()"))
    rates = []
    try:
        await (redis.flushall() if cluster else redis.flushdb())
        for _ in range(RUNS):
            if raw is not None:
                before = _redis_cpu(await redis.info("cpu"))
                raw.append(raw_rate(redis_url))
                if costs is not None:
                    costs.raw_redis.append((_redis_cpu(await redis.info("cpu")) - before) / FOLLOWERS)
            post = await new_post(conn, author)
            cpu = None if cluster else _redis_cpu(await redis.info("cpu"))
            worker = time.process_time()
            pg = _process_cpu(backend)
            started = time.perf_counter()
            async with conn.transaction():
                result = await timelines.fan_out(conn, redis, settings, post)
            elapsed = time.perf_counter() - started
            assert result is not None and result.pushed == FOLLOWERS + 1, result
            rates.append(result.pushed / elapsed)
            if costs is not None:
                costs.worker.append((time.process_time() - worker) / result.pushed)
                costs.postgres.append((_process_cpu(backend) - pg) / result.pushed)
                if cpu is not None:
                    costs.redis.append((_redis_cpu(await redis.info("cpu")) - cpu) / result.pushed)
    finally:
        await conn.close()
        await redis.aclose()
    return rates


def raw_rate(redis_url: str) -> float:
    """ZADD + trim pairs per second through `redis-cli --pipe`, RESP generated up front."""
    host_port, _, db = redis_url.removeprefix("redis://").partition("/")
    host, _, port = host_port.partition(":")
    post = timelines.encode_member(new_id())
    score = timelines.RAW_SCORE.encode()
    parts = []
    for _ in range(FOLLOWERS):
        key = f"rawfeed:{uuid.uuid4()}".encode()
        parts.append(
            b"*4\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
            % (len(key), key, len(score), score, len(post), post)
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


def _runs(rates: list[float]) -> str:
    return ", ".join(f"{r:,.0f}" for r in rates)


def main() -> None:
    with services() as env, tempfile.TemporaryDirectory(prefix="feedfabric-bench-cluster-") as cluster_dir:
        db = fresh_database(env["DATABASE_URL"])
        started = time.perf_counter()
        author = asyncio.run(seed(db))
        setup = time.perf_counter() - started
        raw: list[float] = []
        costs = Costs()
        rates = asyncio.run(fanout_rate(db, env["REDIS_URL"], author, raw=raw, costs=costs))
        cluster = devstack.start_redis_cluster(Path(cluster_dir))
        try:
            on_cluster = asyncio.run(fanout_rate(db, cluster.url, author, cluster=True))
        finally:
            cluster.stop()
    fan = statistics.median(rates)
    base = statistics.median(raw)
    print(f"fan-out: {FOLLOWERS:,} followers, {RUNS} rounds; setup (seed + {FOLLOWERS:,} follows) {setup:.1f} s")
    print(f"  timeline inserts/s (worker, one Redis):  {fan:>10,.0f}   runs: {_runs(rates)}")
    print(f"  raw ZADD+trim pairs/s (redis-cli pipe):  {base:>10,.0f}   runs: {_runs(raw)}")
    paired = [f / r for f, r in zip(rates, raw, strict=True)]
    print(f"  ratio of medians: {fan / base:.2f}   median of each round's ratio: {statistics.median(paired):.2f}")
    print(f"  each round's ratio: {', '.join(f'{p:.2f}' for p in paired)}   targets: >= 150,000/s and >= 0.60")
    print(
        f"  Redis CPU per insert: fan-out {statistics.median(costs.redis) * 1e6:.2f} µs,"
        f" raw pipe {statistics.median(costs.raw_redis) * 1e6:.2f} µs;"
        f" worker process {statistics.median(costs.worker) * 1e6:.2f} µs,"
        f" Postgres backend {statistics.median(costs.postgres) * 1e6:.2f} µs"
    )
    print(
        f"  timeline inserts/s (3-master cluster):   {statistics.median(on_cluster):>10,.0f}   runs: {_runs(on_cluster)}"
    )


if __name__ == "__main__":
    main()
