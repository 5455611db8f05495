"""Garbage-collector pauses during home-feed pages made in-process, with the API's gc tuning (gctune).

Uses a database bench/home_feed.py loaded (its Redis timelines still filled):

    REDIS_URL=... .venv/bin/python bench/home_feed_gc.py DATABASE_URL graphql 1500

Prints the pages' latency and every collection's generation and duration
(gc.callbacks), so a latency tail can be matched against collector pauses.
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import home_feed as hf  # noqa: E402
from feedfabric.app import create_app  # noqa: E402
from feedfabric.auth import issue_token  # noqa: E402
from feedfabric.gctune import tune_for_serving  # noqa: E402
from feedfabric.settings import Settings  # noqa: E402


async def main(database_url: str, kind: str, pages: int) -> None:
    pauses: list[tuple[int, float]] = []
    started: list[float] = [0.0]

    def observe(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append((info["generation"], (time.perf_counter() - started[0]) * 1000))

    names = await hf.member_names(database_url)
    viewers = random.Random(7).sample(names, min(200, len(names)))
    settings = Settings(database_url=database_url, redis_url=os.environ["REDIS_URL"],
                        feedfabric_jwt_secret=hf.SECRET, rate_limit_operations=10**9, log_level="WARNING")
    app = create_app(settings)
    tune_for_serving()
    body = {"query": hf.GRAPHQL, "operationName": "Home", "variables": {"first": hf.PAGE}}
    headers = [{"Authorization": f"Bearer {issue_token(hf.SECRET, n, ttl=7200)}"} for n in viewers]
    latencies: list[float] = []
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://b") as http:
        async def one(i: int) -> None:
            if kind == "graphql":
                response = await http.post("/graphql", json=body, headers=headers[i % len(headers)])
            else:
                response = await http.get(f"/userfeed/home?limit={hf.PAGE}", headers=headers[i % len(headers)])
            response.raise_for_status()

        for i in range(50):
            await one(i)
        gc.callbacks.append(observe)
        for i in range(pages):
            began = time.perf_counter()
            await one(i)
            latencies.append((time.perf_counter() - began) * 1000)
        gc.callbacks.remove(observe)
    latencies.sort()
    print(f"{kind}: {pages} pages, p50 {latencies[pages // 2]:.1f} ms, p99 {latencies[int(pages * 0.99)]:.1f} ms, "
          f"max {latencies[-1]:.1f} ms")
    for generation in (0, 1, 2):
        took = sorted(ms for g, ms in pauses if g == generation)
        if took:
            print(f"gen{generation}: {len(took)} collections, median {took[len(took) // 2]:.1f} ms, max {took[-1]:.1f} ms")
    if not pauses:
        print("no collection")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1500))
