"""Instructions the API executes per home-feed page, counted by valgrind: repeatable where CPU time is not.

On a shared 2-core machine the same tree's CPU time per page varies by 20%
or more between runs (docs/benchmarks.md), which hides changes of a few
percent. Instruction counts do not move with the machine's other load. This
runs the app in-process (bench/home_feed.in_process_pages: httpx's ASGI
transport, no uvicorn) under `valgrind --tool=callgrind` twice per path, with
`--pages` more pages the second time, and prints the difference per page.
Postgres and Redis run in their own processes, so what is counted is the
API's side of a page (plus the httpx harness, the same for every tree).

Uses a database bench/home_feed.py loaded (its Redis timelines still filled);
needs valgrind (Debian's package):

    REDIS_URL=... .venv/bin/python bench/home_feed_instructions.py DATABASE_URL [--pages 200] [--only graphql]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WARM = 50


def instructions(database_url: str, kind: str, pages: int) -> int:
    """All instructions of one process that makes WARM + `pages` pages (imports and warm-up included)."""
    run = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--pages-in-process",
            str(pages),
            "--kind",
            kind,
            database_url,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", run.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind:\n{run.stderr[-2000:]}")
    return int(found.group(1))


async def make_pages(database_url: str, kind: str, pages: int) -> None:
    from feedfabric.ops.gctune import tune_for_serving

    from bench import home_feed as hf

    async with hf.in_process_pages(database_url, kind, before_serving=tune_for_serving) as page:
        for i in range(WARM + pages):
            await page(i)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database_url")
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--only", choices=["rest", "graphql"])
    parser.add_argument("--pages-in-process", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pages_in_process is not None:
        asyncio.run(make_pages(args.database_url, args.kind, args.pages_in_process))
        return
    per_page = {}
    for kind in ("rest", "graphql"):
        if args.only and kind != args.only:
            continue
        base = instructions(args.database_url, kind, 0)
        more = instructions(args.database_url, kind, args.pages)
        per_page[kind] = (more - base) / args.pages
        print(f"{kind:8s} {per_page[kind] / 1e6:.2f} M instructions a page (over {args.pages} pages)", flush=True)
    if len(per_page) == 2:
        print(f"GraphQL/REST instructions per page: {per_page['graphql'] / per_page['rest']:.2f}x")


if __name__ == "__main__":
    main()
