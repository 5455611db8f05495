"""Garbage-collector pauses during home-feed pages made in-process, with the API's gc tuning (gctune).

Uses a database bench/home_feed.py loaded (its Redis timelines still filled):

    REDIS_URL=... .venv/bin/python bench/home_feed_gc.py DATABASE_URL graphql 1500

Prints the pages' latency and every collection's generation and duration
(gc.callbacks), so a latency tail can be matched against collector pauses.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.ops.gctune import tune_for_serving  # noqa: E402

from bench import home_feed as hf  # noqa: E402


async def main(database_url: str, kind: str, pages: int) -> None:
    pauses: list[tuple[int, float]] = []
    started: list[float] = [0.0]

    def observe(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append((info["generation"], (time.perf_counter() - started[0]) * 1000))

    latencies: list[float] = []
    async with hf.in_process_pages(database_url, kind, before_serving=tune_for_serving) as page:
        gc.callbacks.append(observe)
        for i in range(pages):
            began = time.perf_counter()
            await page(i)
            latencies.append((time.perf_counter() - began) * 1000)
        gc.callbacks.remove(observe)
    latencies.sort()
    print(
        f"{kind}: {pages} pages, p50 {latencies[pages // 2]:.1f} ms, p99 {latencies[int(pages * 0.99)]:.1f} ms, "
        f"max {latencies[-1]:.1f} ms"
    )
    for generation in (0, 1, 2):
        took = sorted(ms for g, ms in pauses if g == generation)
        if took:
            print(
                f"gen{generation}: {len(took)} collections, median {took[len(took) // 2]:.1f} ms, max {took[-1]:.1f} ms"
            )
    if not pauses:
        print("no collection")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1500))
