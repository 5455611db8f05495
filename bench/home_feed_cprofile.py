"""cProfile of home-feed pages made in-process (the app through httpx's ASGI transport), one at a time.

Uses a database bench/home_feed.py loaded (its Redis timelines still filled):

    REDIS_URL=... .venv/bin/python bench/home_feed_cprofile.py DATABASE_URL graphql 300

Prints the top functions by own time and by cumulative time. Without uvicorn
and the network, it shows what the page itself costs, GraphQL or REST.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.app import schema  # noqa: E402

from bench import home_feed as hf  # noqa: E402


async def main(database_url: str, kind: str, pages: int) -> pstats.Stats:
    async with hf.in_process_pages(database_url, kind) as page:
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(pages):
            await page(i)
        profiler.disable()
    return pstats.Stats(profiler)


if __name__ == "__main__":
    url, which, count = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 300
    stats = asyncio.run(main(url, which, count))
    stats.sort_stats("tottime").print_stats(45)
    stats.sort_stats("cumtime").print_stats(70)
    renders = getattr(schema.execution_context_class, "renders", None)
    if renders is not None:  # feedfabric.adapter.execution.render_once: how often a post's shared part was reused
        print(f"render-once cache: {renders.hits} hits, {renders.misses} misses, {len(renders.results)} kept")
