"""For You pages against Following pages, in machine CPU, side by side in one run, on the home-feed
benchmark's data set (bench/home_feed.load: 10,000 members, 100 follows each, 200,000 posts over
30 days, 100,000 likes; timelines filled in Redis).

The app runs in this process behind httpx's ASGI transport (as bench/home_feed.in_process_pages);
REST pages of 20 for 200 members. Blocks of BLOCK requests of each kind take turns (Following page,
For You first page, For You next page from the first page's cursor), ROUNDS times; each block's
cost is this process's CPU plus the CPU of this benchmark's Postgres server (psutil), so the figure is the
machine's work for a page, Postgres included. Redis runs on the same box and is not counted
(it is a small share of either page).

    .venv/bin/python bench/foryou_pages.py [--members 10000] [--posts 200000] [--rounds 5] [--database URL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import time
from pathlib import Path

import asyncpg
import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.core.auth import issue_token  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402

from bench import home_feed  # noqa: E402
from bench._stack import env_or, fresh_database, services  # noqa: E402

PAGE = 20
BLOCK = 40


def our_postgres_cpu(postmaster: psutil.Process) -> dict[int, float]:
    """CPU seconds of this benchmark's Postgres server (the postmaster and its children), by PID: other
    Postgres servers on a shared machine are not this page's work."""
    out = {}
    for proc in (postmaster, *postmaster.children()):
        with contextlib.suppress(psutil.NoSuchProcess):
            times = proc.cpu_times()
            out[proc.pid] = times.user + times.system
    return out


def grown(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU spent between two snapshots; a process that exited in between is not counted negative."""
    return sum(value - before.get(pid, 0.0) for pid, value in after.items())


async def measure(database_url: str, redis_url: str, rounds: int) -> dict[str, float]:
    from feedfabric.app import create_app

    names = await home_feed.member_names(database_url)
    viewers = random.Random(7).sample(names, min(200, len(names)))
    settings = Settings(
        database_url=database_url,
        redis_url=redis_url,
        feedfabric_jwt_secret=home_feed.SECRET,
        rate_limit_operations=10**9,
        rate_limit_cost=10**12,
        log_level="WARNING",
    )
    app = create_app(settings)
    headers = [{"Authorization": f"Bearer {issue_token(home_feed.SECRET, n, ttl=7200)}"} for n in viewers]
    cursors: dict[int, str] = {}
    conn = await asyncpg.connect(database_url)
    try:
        postmaster = psutil.Process(psutil.Process(await conn.fetchval("SELECT pg_backend_pid()")).ppid())
    finally:
        await conn.close()
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://b") as http:

        async def following(i: int) -> None:
            (await http.get(f"/userfeed/home?limit={PAGE}", headers=headers[i % len(headers)])).raise_for_status()

        async def first(i: int) -> None:
            response = await http.get(f"/userfeed/foryou?limit={PAGE}", headers=headers[i % len(headers)])
            response.raise_for_status()
            cursors[i % len(headers)] = response.json()["nextCursor"]

        async def later(i: int) -> None:
            cursor = cursors[i % len(headers)]
            url = f"/userfeed/foryou?limit={PAGE}&cursor={cursor}"
            (await http.get(url, headers=headers[i % len(headers)])).raise_for_status()

        kinds = {"following": following, "foryou_first": first, "foryou_next": later}
        for i in range(len(headers)):  # caches, prepared statements, the pool; every viewer's first cursor
            await following(i)
            await first(i)
        for i in range(60):
            await later(i)
        await asyncio.sleep(1)  # let the feed log drain before counting
        # Steady state: the warm-up filled the exposure counts and the feed log, which the load's
        # VACUUM ANALYZE saw empty; autovacuum analyzes them within minutes in a running system, but
        # maybe not within this run, and a generic plan cached while author_exposure looked empty
        # scans it once per candidate (about 90 ms a first page). ANALYZE invalidates those plans.
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute("ANALYZE author_exposure, topic_exposure, feed_log")
        finally:
            await conn.close()
        cpu = dict.fromkeys(kinds, 0.0)
        count = dict.fromkeys(kinds, 0)
        n = 0
        for _ in range(rounds):
            for name, run in kinds.items():
                pg = our_postgres_cpu(postmaster)
                own = time.process_time()
                for _ in range(BLOCK):
                    await run(n)
                    n += 1
                # The feed log drains in the background every 0.2 s: write what this block left in it
                # before the counters are read, so each page's log insert is charged to its own kind.
                while await app.state.resources.feed_log.flush():
                    pass
                own = time.process_time() - own
                cpu[name] += own + grown(pg, our_postgres_cpu(postmaster))
                count[name] += BLOCK
    return {name: cpu[name] / count[name] * 1000 for name in kinds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--follows-each", type=int, default=100)
    parser.add_argument("--posts", type=int, default=200_000)
    parser.add_argument("--likes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database", help="reuse a database bench/home_feed.py loaded before")
    args = parser.parse_args()
    with services() as env:
        redis_url = env_or(env, "REDIS_URL")
        os.environ["REDIS_URL"] = redis_url
        if args.database:
            database_url = args.database
        else:
            database_url = fresh_database(env_or(env, "DATABASE_URL"))
            asyncio.run(home_feed.load(database_url, redis_url, args))
        asyncio.run(home_feed.mark_seen_now(database_url))
        ms = asyncio.run(measure(database_url, redis_url, args.rounds))
        base = ms["following"]
        print(f"machine CPU per REST page of {PAGE} (this process + Postgres), {args.rounds} x {BLOCK} pages each:")
        for name, value in ms.items():
            print(f"  {name:<14}{value:8.2f} ms   {value / base:5.2f}x Following")
        print("targets: For You first page <= 4x, later page <= 1.5x")


if __name__ == "__main__":
    main()
