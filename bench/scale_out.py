"""Scaling out (issue 50): what a second relay and a second worker of a group buy, on this machine.

Runs `feedfabric relay` and `feedfabric worker` processes on the embedded services (bench/_stack.py), a fresh
database and a topic prefix of its own, tracing off. All processes share one host over loopback (the issue
asked for network-namespace hosts; the two cores are shared either way, so that is what bounds the figures).

- Relays: 1 or 2 relay processes are started on an empty outbox and left until they have split the shards
  (each holds a shard advisory lock). Then N thin PostUpdated events, keys spread over every shard, go into
  the outbox in one statement (feedfabric.db.outbox.add_events: what add_event writes, one NOTIFY a shard),
  and the clock runs until no row has published_at NULL.
- Workers: N PostLiked events (distinct random post/member pairs, so every like is a new grant) are
  published by one relay with no engagement worker running; then 1 or 2 `worker --group worker-engagement`
  processes start and the clock runs until the group's processed_events hold all N. The figure is over the
  processed_at window (first to last applied event), so process start and the group join are left out;
  the wall time from spawn is printed beside it.

Runs alternate (1, 2, 1, 2 ...) so drift in the shared machine's load shows. Each run prints events/s, each
process's CPU seconds over the measured interval (psutil) and its share of one core, and the load average.
processed_at is its transaction's start, and a worker applies a poll (up to 500 events) in one transaction, so
the worker window leaves out the last poll's own time: keep --worker-events large beside 500.

    .venv/bin/python bench/scale_out.py [--events 20000] [--worker-events 20000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
import psutil  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from feedfabric.db.outbox import add_events  # noqa: E402

from bench._stack import env_or, fresh_database, services  # noqa: E402
from bench.write_path import cpu_s, process_env  # noqa: E402

GROUP = "worker-engagement"
SHARD_LOCKS_QUERY = (
    "SELECT count(*), count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND classid::int = $1"
)


def spawn(penv: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "feedfabric", *args], env=penv)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


async def wait_until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 240) -> None:
    """Polls `check` (an async callable returning bool) every 50 ms; a bench that cannot finish says why."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


async def unpublished(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL"))


class Machine:
    """What the rest of the machine did over a run: the embedded services' CPU (this process's other children:
    Postgres with its backends, Redis, the broker) and the whole machine's busy share of its cores (every
    process, the other sessions on the shared machine included), to show where the two cores bound a run."""

    def __init__(self, measured: list[subprocess.Popen[bytes]]) -> None:
        self.measured = {p.pid for p in measured}
        self.services = self._services()
        self.times = psutil.cpu_times()

    def _services(self) -> float:
        total = 0.0
        for child in psutil.Process().children(recursive=True):
            try:
                if child.pid in self.measured or child.ppid() in self.measured:
                    continue
                times = child.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                continue
        return total

    def since(self) -> str:
        services = self._services() - self.services
        now = psutil.cpu_times()
        busy = sum(now) - now.idle - now.iowait - (sum(self.times) - self.times.idle - self.times.iowait)
        share = busy / max(1e-9, sum(now) - sum(self.times))
        return f"services {services:.2f} s CPU; machine {share:.0%} busy of {os.cpu_count()} cores"


def report(label: str, events: int, seconds: float, cpu: list[float], machine: Machine) -> float:
    rate = events / seconds
    shares = ", ".join(f"{c:.2f} s ({c / seconds:.0%} of a core)" for c in cpu)
    print(
        f"   {label}: {events} events in {seconds:.2f} s = {rate:,.0f} events/s; CPU {shares};"
        f" {machine.since()}; load average {os.getloadavg()[0]:.2f}"
    )
    return rate


async def relay_run(pool: asyncpg.Pool, penv: dict[str, str], count: int, events: int, shards: int) -> float:
    from feedfabric.db.pipeline import SHARD_LOCKS

    relays = [spawn(penv, "relay") for _ in range(count)]
    try:

        async def split() -> bool:
            row = await pool.fetchrow(SHARD_LOCKS_QUERY, SHARD_LOCKS)
            return bool(row[0] == shards and row[1] == count)

        await wait_until(split, f"{count} relays to split the shards")
        before = [cpu_s(r.pid) for r in relays]
        machine = Machine(relays)
        rows = [
            ("PostUpdated", str(uuid.uuid4()), {"postId": "", "authorId": "", "mentionedIds": []})
            for _ in range(events)
        ]
        for _, key, data in rows:
            data["postId"] = key
        async with pool.acquire() as conn:
            await add_events(conn, rows, shards=shards)
        began = time.monotonic()  # the rows are visible to the relays from the statement's commit

        async def drained() -> bool:
            return await unpublished(pool) == 0

        await wait_until(drained, "the outbox to drain")
        wall = time.monotonic() - began
        cpu = [cpu_s(r.pid) - b for r, b in zip(relays, before, strict=True)]
        return report(f"{count} relay{'s' if count > 1 else ' '}", events, wall, cpu, machine)
    finally:
        stop(relays)


async def worker_run(pool: asyncpg.Pool, penv: dict[str, str], count: int, events: int, shards: int) -> float:
    """The events are published with no worker of the group running, then the workers start."""
    first = int(await pool.fetchval("SELECT coalesce(max(id), 0) FROM outbox")) + 1
    relay = spawn(penv, "relay")
    try:
        likes = []
        for _ in range(events):
            post = str(uuid.uuid4())
            likes.append(
                ("PostLiked", post, {"postId": post, "memberId": str(uuid.uuid4()), "authorId": str(uuid.uuid4())})
            )
        async with pool.acquire() as conn:
            await add_events(conn, likes, shards=shards)

        async def drained() -> bool:
            return await unpublished(pool) == 0

        await wait_until(drained, "the relay to publish the likes")
    finally:
        stop([relay])

    async def applied() -> int:
        return int(
            await pool.fetchval(
                "SELECT count(*) FROM processed_events WHERE group_name = $1 AND event_id >= $2", GROUP, first
            )
        )

    spawned = time.monotonic()
    workers = [spawn(penv, "worker", "--group", GROUP) for _ in range(count)]
    try:
        started: list[float] = []  # the workers' CPU when the first event was applied
        meter: list[Machine] = []

        async def done() -> bool:
            seen = await applied()
            if seen and not started:
                started.extend(cpu_s(w.pid) for w in workers)
                meter.append(Machine(workers))
            return seen >= events

        await wait_until(done, f"{GROUP} to apply {events} events")
        wall = time.monotonic() - spawned
        cpu = [cpu_s(w.pid) - b for w, b in zip(workers, started, strict=True)]
        window = float(
            await pool.fetchval(
                "SELECT extract(epoch FROM max(processed_at) - min(processed_at)) FROM processed_events"
                " WHERE group_name = $1 AND event_id >= $2",
                GROUP,
                first,
            )
        )
        print(
            f"   ({count} worker{'s' if count > 1 else ''}: {wall:.2f} s from spawn, start-up and group join included)"
        )
        return report(f"{count} worker{'s' if count > 1 else ' '}", events, window, cpu, meter[0])
    finally:
        stop(workers)


async def run(args: argparse.Namespace, env: dict[str, str], database_url: str) -> None:
    from feedfabric.core.topics import ensure_topics

    settings = Settings(
        database_url=database_url,
        redis_url=env_or(env, "REDIS_URL"),
        kafka_bootstrap_servers=env_or(env, "KAFKA_BOOTSTRAP_SERVERS"),
        feedfabric_jwt_secret="bench-secret-" + uuid.uuid4().hex,
        kafka_topic_prefix=f"so{uuid.uuid4().hex[:8]}.",
        tracing_sample_ratio=0,
    )
    await ensure_topics(settings)
    penv = process_env(settings, database_url)
    shards = settings.outbox_shards
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    print(
        f"scale out on {os.cpu_count()} cores, loopback, {shards} outbox shards,"
        f" {settings.kafka_topic_partitions} partitions a topic, batch {settings.outbox_batch_size};"
        f" load average {os.getloadavg()[0]:.2f}"
    )
    try:
        print(f"\nRelays: {args.events} PostUpdated over {shards} shards, until none is unpublished")
        relay_rates: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(args.rounds):
            for count in (1, 2):
                relay_rates[count].append(await relay_run(pool, penv, count, args.events, shards))
        print(f"\nWorkers ({GROUP}): {args.worker_events} PostLiked, until all are in processed_events")
        worker_rates: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(args.rounds):
            for count in (1, 2):
                worker_rates[count].append(await worker_run(pool, penv, count, args.worker_events, shards))
        print("\nRatios, 2 processes against 1, round by round (target >= 1.6x where the stage is the bottleneck)")
        for name, rates in (("relay", relay_rates), ("worker", worker_rates)):
            ratios = ", ".join(f"{two / one:.2f}x" for one, two in zip(rates[1], rates[2], strict=True))
            print(f"   {name}: {ratios}")
        print(f"\nload average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    finally:
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="outbox rows a relay run publishes")
    parser.add_argument("--worker-events", type=int, default=20_000, help="likes a worker run applies")
    parser.add_argument("--rounds", type=int, default=2, help="1-process and 2-process runs, alternated")
    args = parser.parse_args()
    with services() as env:
        asyncio.run(run(args, env, fresh_database(env_or(env, "DATABASE_URL"))))


if __name__ == "__main__":
    main()
