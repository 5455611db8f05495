"""A cost ladder under bench/home_feed.py: from a bare page that does only the unavoidable work to the real one.

The home-feed benchmark's load (16 clients sending back to back) makes latency a throughput matter: with 16 requests always
in flight, p50 is about 16 / throughput. This script measures what the same
load generator gets from a server that does the least any home feed must do
per page (the bare page), on the same data and machine: one uvicorn worker
(httptools, uvloop) with a bare ASGI callable, no framework, no middleware; the bearer
token mapped to the member from a dict filled before the run (no JWT, no
member row, no rate limit); one Redis ZREVRANGE of the timeline; one
Postgres statement fetching the 20 posts by primary key (no visibility rule,
no authors, tags, counts or media, no feed log); orjson. Whatever the
bare page serves, the real service can only serve less, so if its p99
misses a target, no implementation of the page on this stack and machine
meets it; if it meets it, the gap is what the product's own steps cost.

`--with` adds those steps one by one, each the product's own function, so a
run per step is a cost ladder from the bare page to the real one:

- `member`: the viewer's member row by external ID (feeds.viewer, each request)
- `ratelimit`: one operation of the member's Redis window (feedfabric.feeds.ratelimit)
- `first-round`: the home feed's first statement (visibility, celebrities, extras;
  db.timeline_queries.first_round) instead of the bare primary-key fetch, on the API's
  pool settings (generic plans, the JSON codecs)
- `feed-log`: the served page queued to the feed log (feeds.feed_log, batched as in the API)

    .venv/bin/python bench/home_feed_ladder.py --database URL [--clients 16] [--duration 20] [--workers 1]
                                              [--with member,ratelimit,first-round,feed-log]

`--workers N` runs N server processes on the port (SO_REUSEPORT), to see
whether a second core for the server changes the floor (it does not: the
page is bounded by the whole machine's CPU, not by one process's).

`--database` is a database bench/home_feed.py loaded (REDIS_URL still filled).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.core.auth import issue_token  # noqa: E402

from bench.home_feed import SECRET, free_port, run_phase, wait_healthy  # noqa: E402

_POSTS = "SELECT id, author_id, content, created_at FROM posts WHERE id = ANY($1::uuid[]) ORDER BY id DESC"


STEPS = ("member", "ratelimit", "first-round", "feed-log")


def make_app(database_url: str, redis_url: str, members: dict[str, tuple[str, str]], steps: frozenset[str]) -> Any:
    """The bare page: token -> member (dict), Redis IDs, Postgres rows, JSON; plus the chosen `steps`."""
    import uuid

    import orjson
    import redis.asyncio as aioredis
    from feedfabric.core.models import Page
    from feedfabric.core.settings import Settings
    from feedfabric.db import members as members_db
    from feedfabric.db.pool import create_pool
    from feedfabric.feeds import ratelimit, timelines
    from feedfabric.feeds.feed_log import FeedLog

    windows = ratelimit.LocalWindows()

    settings = Settings(
        database_url=database_url, redis_url=redis_url, rate_limit_operations=10**9, rate_limit_cost=10**12
    )
    state: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()
            state["pool"] = await create_pool(database_url, max_size=20, lean_reset=True, generic_plans=True)
            state["redis"] = aioredis.from_url(redis_url)
            state["feed_log"] = FeedLog(state["pool"])
            state["feed_log"].start()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await state["feed_log"].stop()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["path"] == "/healthz":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        auth = next(v for k, v in scope["headers"] if k == b"authorization").decode()
        member, external_id = members[auth[7:]]
        pool, redis = state["pool"], state["redis"]
        if "member" in steps:
            row = await members_db.by_external_id(pool, external_id)
            assert row is not None and row.active
        if "ratelimit" in steps:
            await ratelimit.spend(redis, settings, windows, ratelimit.client_key(member, None), 1)
        ids = [timelines.decode_member(i) for i in await redis.zrevrange(timelines.feed_key(member), 0, 20)]
        if "first-round" in steps:
            first = await timelines.first_round(
                pool, settings, uuid.UUID(member), [uuid.UUID(i) for i in ids], None, 21
            )
            rows = sorted(
                (
                    {"id": p.id, "author_id": p.author_id, "content": p.content, "created_at": p.created_at}
                    for p in first.found
                ),
                key=lambda r: r["id"],
                reverse=True,
            )
        else:
            rows = await pool.fetch(_POSTS, ids)
        posts = [
            {
                "id": str(r["id"]),
                "authorId": str(r["author_id"]),
                "content": r["content"],
                "createdAt": r["created_at"].isoformat(),
            }
            for r in rows[:20]
        ]
        if "feed-log" in steps:
            state["feed_log"].record(
                uuid.UUID(member), "following", Page([_Served(uuid.UUID(p["id"])) for p in posts], None, "redis")
            )
        body = orjson.dumps({"posts": posts, "nextCursor": posts[-1]["id"] if posts else None, "source": "redis"})
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


class _Served:
    """What the feed log reads of a served post."""

    repost_of = None

    def __init__(self, post_id: Any) -> None:
        self.id = post_id


def serve(
    port: int, database_url: str, redis_url: str, members: dict[str, tuple[str, str]], steps: frozenset[str]
) -> None:
    """One server process. Several of them share the port through SO_REUSEPORT, the kernel spreading
    connections over them, as uvicorn's own workers share one listening socket."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    config = uvicorn.Config(
        make_app(database_url, redis_url, members, steps),
        log_level="warning",
        loop="uvloop",
        http="httptools",
        lifespan="on",
    )
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, help="a database bench/home_feed.py loaded")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--viewers", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=1, help="server processes sharing the port")
    parser.add_argument("--with", dest="steps", default="", help="comma-separated: " + ",".join(STEPS))
    args = parser.parse_args()
    steps = frozenset(s for s in args.steps.split(",") if s)
    if steps - set(STEPS):
        parser.error(f"unknown steps: {', '.join(sorted(steps - set(STEPS)))}")

    import random

    import asyncpg
    import psutil

    async def ids() -> dict[str, str]:
        """External ID -> member ID, in member_names' order (so the same viewers are sampled)."""
        conn = await asyncpg.connect(args.database)
        try:
            return {r[0]: str(r[1]) for r in await conn.fetch("SELECT external_id, id FROM members ORDER BY id")}
        finally:
            await conn.close()

    by_name = asyncio.run(ids())
    viewers = random.Random(7).sample(list(by_name), args.viewers)
    tokens = [issue_token(SECRET, n, ttl=7200) for n in viewers]
    members = {t: (by_name[n], n) for t, n in zip(tokens, viewers)}
    port = free_port()
    servers = [
        mp.get_context("spawn").Process(
            target=serve, args=(port, args.database, os.environ["REDIS_URL"], members, steps)
        )
        for _ in range(args.workers)
    ]
    for server in servers:
        server.start()
    try:
        wait_healthy(port)
        procs = [psutil.Process(server.pid) for server in servers]
        run_phase(procs, port, "rest", tokens, args.clients, 3, 0)  # warm-up
        r = run_phase(procs, port, "rest", tokens, args.clients, args.duration, 0)
        label = "bare" + "".join(f" +{s}" for s in STEPS if s in steps)
        if args.workers > 1:
            label += f" ({args.workers} workers)"
        print(
            f"{label}: {args.clients} clients x {args.duration:.0f} s: {r['rps']:.0f} req/s, p50 {r['p50']:.1f} ms, "
            f"p99 {r['p99']:.1f} ms, server CPU {r['cpu_ms_per_page']:.2f} ms/page "
            f"({r['cpu_share'] * 100:.0f}% of a core); Postgres {r['pg_ms_per_page']:.2f} ms/page; "
            f"whole machine {r['machine_ms_per_page']:.2f} ms/page",
            flush=True,
        )
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.join(30)


if __name__ == "__main__":
    main()
