"""A suggestedMembers page against a For You first page of the same size, in machine CPU, side by side
in one run, on the home-feed benchmark's data set (bench/home_feed.load: 10,000 members, 100 follows
each, 200,000 posts over 30 days, a quarter tagged, 100,000 likes), plus one member who follows all
10,000 (the bounded fan-in).

The app runs in this process behind httpx's ASGI transport, as bench/foryou_pages.py: REST pages of
20 for 200 members, blocks of BLOCK requests of each kind taking turns, ROUNDS times; each block's
cost is this process's CPU plus the CPU of this benchmark's Postgres server. "members, cold" forgets
every viewer's cached suggestions before each request (each page computes them); "members, cached"
reads them from the cache (filtered again, hydrated). "members, 10k follows" is the member following
everyone, cold.

    .venv/bin/python bench/suggestions.py [--members 10000] [--posts 200000] [--rounds 5] [--database URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from pathlib import Path

import asyncpg
import httpx
import psutil
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.core.auth import issue_token  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402

from bench import home_feed  # noqa: E402
from bench._stack import env_or, fresh_database, services  # noqa: E402
from bench.foryou_pages import grown, our_postgres_cpu  # noqa: E402

PAGE = 20
BLOCK = 40


async def follow_everyone(database_url: str, name: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO follows (follower_id, target_type, target_id)"
            " SELECT (SELECT id FROM members WHERE external_id = $1), 'member', m.id::text FROM members m"
            " WHERE m.external_id <> $1 ON CONFLICT DO NOTHING",
            name,
        )
        await conn.execute("ANALYZE follows")
    finally:
        await conn.close()


async def measure(database_url: str, redis_url: str, rounds: int) -> dict[str, float]:
    from feedfabric.app import create_app

    names = await home_feed.member_names(database_url)
    viewers = random.Random(7).sample(names, min(201, len(names)))
    heavy = viewers.pop()
    await follow_everyone(database_url, heavy)
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
    heavy_headers = {"Authorization": f"Bearer {issue_token(home_feed.SECRET, heavy, ttl=7200)}"}
    conn = await asyncpg.connect(database_url)
    try:
        postmaster = psutil.Process(psutil.Process(await conn.fetchval("SELECT pg_backend_pid()")).ppid())
        ids = [r["id"] for r in await conn.fetch("SELECT id FROM members WHERE external_id = ANY($1)", viewers)]
        heavy_id = await conn.fetchval("SELECT id FROM members WHERE external_id = $1", heavy)
    finally:
        await conn.close()
    redis = aioredis.from_url(redis_url)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://b") as http:

        async def foryou(i: int) -> None:
            response = await http.get(f"/userfeed/foryou?limit={PAGE}", headers=headers[i % len(headers)])
            response.raise_for_status()

        async def members(i: int) -> None:
            response = await http.get(f"/suggestions/members?limit={PAGE}", headers=headers[i % len(headers)])
            response.raise_for_status()

        async def heavy_members(i: int) -> None:
            (await http.get(f"/suggestions/members?limit={PAGE}", headers=heavy_headers)).raise_for_status()

        async def forget() -> None:
            keys = [f"suggestions:{{{m}}}:members" for m in (*ids, heavy_id)]
            await redis.delete(*keys)

        async def warm(n: int) -> None:
            for i in range(n, n + BLOCK):  # this block's viewers' lists in the cache, unmeasured
                await members(i)

        # Each kind: the page, what runs before each measured page, what runs before the measured block.
        kinds = {
            "foryou_first": (foryou, None, None),
            "members, cold": (members, forget, None),
            "members, cached": (members, None, warm),
            "members, 10k follows": (heavy_members, forget, None),
        }
        for i in range(len(headers)):  # caches, prepared statements, the pool
            await foryou(i)
            await members(i)
        await heavy_members(0)
        await asyncio.sleep(1)
        # Every table analyzed once the warm-up filled the exposure counts and the feed log (and the
        # 10,000 follows above): a generic plan cached on stale statistics can make For You's candidates
        # statement scan author_exposure per candidate (about 90 ms a page; bench/foryou_pages.py).
        async with asyncpg.create_pool(database_url, min_size=1, max_size=1) as pool:
            await pool.execute("ANALYZE")
        cpu = dict.fromkeys(kinds, 0.0)
        count = dict.fromkeys(kinds, 0)
        n = 0
        for _ in range(rounds):
            for name, (run, before, prepare) in kinds.items():
                if prepare is not None:
                    await prepare(n)
                pg = our_postgres_cpu(postmaster)
                own = time.process_time()
                for _ in range(BLOCK):
                    if before is not None:
                        await before()  # one DEL: a Redis round trip, no Postgres
                    await run(n)
                    n += 1
                while await app.state.resources.feed_log.flush():
                    pass
                cpu[name] += time.process_time() - own + grown(pg, our_postgres_cpu(postmaster))
                count[name] += BLOCK
    await redis.aclose()
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
        base = ms["foryou_first"]
        print(f"machine CPU per REST page of {PAGE} (this process + Postgres), {args.rounds} x {BLOCK} pages each:")
        for name, value in ms.items():
            print(f"  {name:<22}{value:8.2f} ms   {value / base:5.2f}x For You first page")
        print("target: a suggestedMembers page costs no more than a For You page of the same size (<= 1.00x)")


if __name__ == "__main__":
    main()
