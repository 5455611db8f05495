"""cProfile of home-feed pages made in-process (the app through httpx's ASGI transport), one at a time.

Uses a database bench/home_feed.py loaded (its Redis timelines still filled):

    REDIS_URL=... .venv/bin/python bench/home_feed_cprofile.py DATABASE_URL graphql 300

Prints the top functions by own time and by cumulative time. Without uvicorn
and the network, it shows what the page itself costs, GraphQL or REST.
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import random
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import home_feed as hf  # noqa: E402
from feedfabric.app import create_app  # noqa: E402
from feedfabric.auth import issue_token  # noqa: E402
from feedfabric.settings import Settings  # noqa: E402


async def main(database_url: str, kind: str, pages: int) -> pstats.Stats:
    names = await hf.member_names(database_url)
    viewers = random.Random(7).sample(names, min(200, len(names)))
    settings = Settings(database_url=database_url, redis_url=os.environ["REDIS_URL"],
                        feedfabric_jwt_secret=hf.SECRET, rate_limit_operations=10**9, log_level="WARNING")
    app = create_app(settings)
    body = {"query": hf.GRAPHQL, "operationName": "Home", "variables": {"first": hf.PAGE}}
    headers = [{"Authorization": f"Bearer {issue_token(hf.SECRET, n, ttl=7200)}"} for n in viewers]
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://b") as http:
        async def one(i: int) -> None:
            if kind == "graphql":
                response = await http.post("/graphql", json=body, headers=headers[i % len(headers)])
            else:
                response = await http.get(f"/userfeed/home?limit={hf.PAGE}", headers=headers[i % len(headers)])
            response.raise_for_status()

        for i in range(50):  # warm: caches, prepared statements, pool
            await one(i)
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(pages):
            await one(i)
        profiler.disable()
    return pstats.Stats(profiler)


if __name__ == "__main__":
    url, which, count = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 300
    stats = asyncio.run(main(url, which, count))
    stats.sort_stats("tottime").print_stats(45)
    stats.sort_stats("cumtime").print_stats(70)
