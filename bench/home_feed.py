"""Home-feed page of 20 under concurrent clients, through GraphQL and through REST, on the same data.

Data (defaults): 10,000 members, 1,000,000 member follows (100 each), 200,000
posts (20 each, spread over 30 days, a quarter with a tag), 100,000 likes,
bulk-loaded with COPY; every timeline is then filled in Redis with what
`timelines.rebuild` would write (computed in bulk here, and checked against
`rebuild` on a sample of members).

The API is a real `feedfabric api` process (uvicorn, one worker); the load
generator is a separate process (multiprocessing, raw asyncio HTTP/1.1 with
keep-alive, so the client costs little CPU): CLIENTS connections, each asking
for the first page of a random member's home feed back to back for DURATION
seconds. Each phase reports requests/s, p50/p99 latency, and the API
processes' CPU time per page (psutil, workers included), so GraphQL and REST
are compared by the work they cost, not only by latency, which on a shared
2-core box includes the clients' and Postgres's scheduling. With `--rate N`
each client is paced to N requests/s instead (latency at a given load rather
than at saturation). With `--offered N` the load is open-loop: N requests/s in
all, spread evenly over the clients on a fixed schedule, each latency counted
from the request's scheduled time, so a slow answer that delays the next
request is counted against the server (no coordinated omission). `--workers N`
runs the API with N uvicorn workers.

    .venv/bin/python bench/home_feed.py [--clients 16] [--duration 30] [--rate 0 | --offered 0] [--workers 1]
                                        [--profile FILE] [--database URL]
                                        [--log-rounds 4] [--log-duration 8] [--fold-seconds 10]

`--profile FILE` also runs pyinstrument (pip install pyinstrument) over 500
GraphQL pages made in-process and writes its text report to FILE.

Then the feed log's cost (issue 51): a logged and an unlogged API serve the same load in
alternating phases, REST home pages, For You first pages and For You second pages (each reader's
chain continued at the cursor its first page ended with); the database is ANALYZEd before each
kind's phases (the phases before it filled the exposure tables), and each logged phase is charged
with its own last exposure fold (`--fold-seconds`, the logged API's FEED_LOG_FOLD_SECONDS).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import random
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import psutil
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.core.auth import issue_token  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from feedfabric.feeds import timelines  # noqa: E402

from bench._stack import env_or, fresh_database, services  # noqa: E402

SECRET = "bench-secret-" + uuid.uuid4().hex
GRAPHQL = (
    "query Home($first: Int, $after: String) { homeFeed(first: $first, after: $after) {"
    " source pageInfo { hasNextPage endCursor }"
    " edges { cursor node { id content status createdAt updatedAt tags likeCount commentCount viewerHasLiked"
    " author { id username displayName avatarUrl } media { id contentType width height url score }"
    " repostOf { id content author { username displayName avatarUrl } } } } } }"
)
PAGE = 20
DAY_MS = 86_400_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def uuid7_at(ms: int, rng: random.Random) -> uuid.UUID:
    """A UUIDv7 carrying the given Unix-ms timestamp, so ID order is the posts' time order."""
    value = (ms << 80) | (0x7 << 76) | (rng.getrandbits(12) << 64) | (0b10 << 62) | rng.getrandbits(62)
    return uuid.UUID(int=value)


# --- data -------------------------------------------------------------------------------------------


async def load(database_url: str, redis_url: str, args: argparse.Namespace) -> list[str]:
    """Bulk-loads members, follows, posts, tags and likes; fills the timelines. Returns external IDs."""
    rng = random.Random(42)
    now_ms = int(time.time() * 1000)
    t0 = time.monotonic()
    member_ids = [uuid7_at(now_ms - 60 * DAY_MS + i, rng) for i in range(args.members)]
    names = [f"bench{i:06d}" for i in range(args.members)]
    follows: dict[uuid.UUID, list[uuid.UUID]] = {}
    for m in member_ids:
        follows[m] = [t for t in rng.sample(member_ids, args.follows_each + 1) if t != m][: args.follows_each]
    posts_by_author: dict[uuid.UUID, list[str]] = {m: [] for m in member_ids}
    post_rows = []
    for i in range(args.posts):
        author = member_ids[i % len(member_ids)]
        pid = uuid7_at(now_ms - rng.randrange(30 * DAY_MS), rng)
        posts_by_author[author].append(str(pid))
        created = datetime.fromtimestamp((pid.int >> 80) / 1000, UTC)
        post_rows.append((pid, author, f"bench post {i} " + "lorem ipsum " * rng.randrange(1, 12), created))
    all_posts = [r[0] for r in post_rows]
    conn = await asyncpg.connect(database_url)
    try:
        await conn.copy_records_to_table(
            "members",
            records=[(m, n, n, n.title()) for m, n in zip(member_ids, names)],
            columns=["id", "external_id", "username", "display_name"],
        )
        # A million follows in one COPY: the statement-level trigger counts them per member once.
        await conn.copy_records_to_table(
            "follows",
            records=((f, "member", str(t)) for f, ts in follows.items() for t in ts),
            columns=["follower_id", "target_type", "target_id"],
        )
        await conn.copy_records_to_table(
            "posts", records=post_rows, columns=["id", "author_id", "content", "created_at"]
        )
        await conn.copy_records_to_table(
            "post_tags",
            records=[(p, f"topic{rng.randrange(50)}", "hashtag") for p in all_posts[::4]],
            columns=["post_id", "tag", "source"],
        )
        likes = {(rng.choice(all_posts), rng.choice(member_ids)) for _ in range(args.likes)}
        await conn.copy_records_to_table("likes", records=list(likes), columns=["post_id", "member_id"])
        # VACUUM as well as ANALYZE: the first reads of COPYed rows set their hint bits, dirtying every
        # page they touch, and autovacuum then rewrites the visibility map; both landed in the first runs.
        await conn.execute("VACUUM (ANALYZE)")
        print(
            f"loaded {len(member_ids):,} members, {sum(map(len, follows.values())):,} follows, "
            f"{len(post_rows):,} posts, {len(likes):,} likes in {time.monotonic() - t0:.1f} s",
            flush=True,
        )

        # Timelines: own posts and followed authors' posts, newest FEED_MAX_LENGTH, as rebuild writes them.
        t1 = time.monotonic()
        settings = Settings(database_url=database_url, redis_url=redis_url)
        redis = aioredis.from_url(redis_url)
        try:
            await redis.flushdb()
            pipe = redis.pipeline(transaction=False)
            for n, member in enumerate(member_ids, 1):
                ids = list(posts_by_author[member])
                for target in follows[member]:
                    ids += posts_by_author[target]
                ids.sort(reverse=True)
                newest = ids[: settings.feed_max_length]
                if newest:
                    pipe.zadd(timelines.feed_key(member), timelines.entries(newest))
                if n % 250 == 0:
                    await pipe.execute()
            await pipe.execute()
            # The bulk fill must equal what the real rebuild writes.
            for member in rng.sample(member_ids, 3):
                bulk = await timelines.timeline_ids(redis, member)
                await redis.delete(timelines.feed_key(member))
                await timelines.rebuild(conn, redis, settings, member)
                assert await timelines.timeline_ids(redis, member) == bulk, "bulk timelines differ from rebuild"
            await settle_run(conn, redis)
        finally:
            await redis.aclose()
        print(f"filled {len(member_ids):,} Redis timelines in {time.monotonic() - t1:.1f} s", flush=True)
    finally:
        await conn.close()
    return names


async def member_names(database_url: str) -> list[str]:
    conn = await asyncpg.connect(database_url)
    try:
        return [r[0] for r in await conn.fetch("SELECT external_id FROM members ORDER BY id")]
    finally:
        await conn.close()


async def mark_seen_now(database_url: str) -> None:
    """A reused database's members were last seen when it was loaded. Once that is an hour ago, each
    viewer's first page writes last_seen_at (feeds/viewer.py: at most hourly per member), so a short
    run would start with 2,000 writes that a member reading for an hour makes once."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("UPDATE members SET last_seen_at = now()")
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def in_process_pages(
    database_url: str, kind: str, before_serving: Callable[[], None] | None = None
) -> AsyncIterator[Callable[[int], Awaitable[None]]]:
    """The app in this process through httpx's ASGI transport (no uvicorn, no network), warmed by 50 pages.

    Yields `page(i)`, which reads the first home page of one of 200 members
    (the i-th, round robin) through GraphQL or REST (`kind`), so profiles and
    pause measurements see what the page itself costs. `before_serving` runs
    after the app is made and before its lifespan starts, as the API's does.
    """
    import httpx
    from feedfabric.app import create_app

    names = await member_names(database_url)
    viewers = random.Random(7).sample(names, min(200, len(names)))
    settings = Settings(
        database_url=database_url,
        redis_url=os.environ["REDIS_URL"],
        feedfabric_jwt_secret=SECRET,
        rate_limit_operations=10**9,
        rate_limit_cost=10**12,
        log_level="WARNING",
    )
    app = create_app(settings)
    if before_serving is not None:
        before_serving()
    body = {"query": GRAPHQL, "operationName": "Home", "variables": {"first": PAGE}}
    headers = [{"Authorization": f"Bearer {issue_token(SECRET, n, ttl=7200)}"} for n in viewers]
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://b") as http:

        async def page(i: int) -> None:
            if kind == "graphql":
                response = await http.post("/graphql", json=body, headers=headers[i % len(headers)])
            else:
                response = await http.get(f"/userfeed/home?limit={PAGE}", headers=headers[i % len(headers)])
            response.raise_for_status()

        for i in range(50):  # caches, prepared statements, the pool
            await page(i)
        yield page


async def settle_run(conn: asyncpg.Connection, redis: aioredis.Redis) -> None:
    """Settles this Redis run once, before any reader, so the filled timelines are trusted whole.

    (Readers settle a new run themselves; if the first ones race, the run gets
    a floor and every page would be read from Postgres, which is not what this
    benchmark measures.)
    """
    settle = getattr(timelines, "serving_floor", None)
    if settle is not None:
        await conn.execute("DELETE FROM timeline_epoch")
        await redis.delete(timelines.EPOCH_KEY)
        assert await settle(conn, redis) is None


# --- load generator (its own process) ----------------------------------------------------------------


def _request(kind: str, token: str, cursor: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n"
    if kind == "foryou":
        return (f"GET /userfeed/foryou?limit={PAGE} HTTP/1.1\r\nHost: bench\r\n{auth}\r\n").encode()
    if kind == "foryou_next":  # a later page of a chain: the cursor a first page ended with
        query = f"limit={PAGE}&cursor={cursor}"
        return (f"GET /userfeed/foryou?{query} HTTP/1.1\r\nHost: bench\r\n{auth}\r\n").encode()
    if kind == "rest":
        return (f"GET /userfeed/home?limit={PAGE} HTTP/1.1\r\nHost: bench\r\n{auth}\r\n").encode()
    body = json.dumps({"query": GRAPHQL, "operationName": "Home", "variables": {"first": PAGE}}).encode()
    head = (
        f"POST /graphql HTTP/1.1\r\nHost: bench\r\n{auth}Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = next(int(line.split(b":", 1)[1]) for line in lines if line.lower().startswith(b"content-length:"))
    return status, await reader.readexactly(length)


async def _client(
    port: int,
    kind: str,
    requests: list[bytes],
    until: float,
    rate: float,
    out: list[float],
    errors: list[str],
    seed: int,
    offset: float = -1.0,
) -> None:
    """`offset` >= 0: open loop, the first request at that fraction of an interval, latency from the schedule."""
    rng = random.Random(seed)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    interval = 1 / rate if rate > 0 else 0.0
    open_loop = offset >= 0
    next_at = time.monotonic() + (offset * interval if open_loop else 0.0)
    try:
        while (now := time.monotonic()) < until:
            scheduled = now
            if interval:
                if next_at > now:
                    await asyncio.sleep(next_at - now)
                scheduled = next_at
                next_at += interval
            started = scheduled if open_loop else time.monotonic()
            writer.write(rng.choice(requests))
            status, body = await _read_response(reader)
            out.append(time.monotonic() - started)
            if status != 200 or (kind == "graphql" and b'"errors"' in body) or b'"posts":[]' in body:
                errors.append(f"{status} {body[:200]!r}")
    finally:
        writer.close()


def load_generator(
    port: int,
    kind: str,
    tokens: list[str],
    clients: int,
    duration: float,
    rate: float,
    offered: float,
    result: mp.Queue,  # type: ignore[type-arg]
    cursors: list[str] | None = None,
) -> None:
    # Built before the clock starts: built by each client as it started (2,000 JSON bodies each), they
    # stalled the generator's loop for 0.2-0.3 s, which open-loop timing charged to the server's p99.
    requests = [_request(kind, t, cursors[n] if cursors else None) for n, t in enumerate(tokens)]

    async def main() -> tuple[list[float], list[str], float]:
        latencies: list[float] = []
        errors: list[str] = []
        started = time.monotonic()
        until = started + duration
        each = offered / clients if offered > 0 else rate
        await asyncio.gather(
            *(
                _client(port, kind, requests, until, each, latencies, errors, i, i / clients if offered > 0 else -1.0)
                for i in range(clients)
            )
        )
        return latencies, errors, time.monotonic() - started

    result.put(asyncio.run(main()))


def wait_healthy(port: int, seconds: float = 180) -> None:
    """Until the server on `port` answers /healthz (it is starting in another process)."""
    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"nothing answered /healthz on port {port} within {seconds:g} s")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def api_cpu(servers: list[psutil.Process]) -> dict[int, float]:
    """CPU seconds of the server processes and of their children (uvicorn --workers), by PID."""
    out = {}
    for proc in (p for server in servers for p in (server, *server.children(recursive=True))):
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        out[proc.pid] = times.user + times.system
    return out


def machine_busy() -> float:
    """CPU seconds every core spent on anything but idling, since boot."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq + t.steal


def postgres_cpu() -> dict[int, float]:
    """CPU seconds of the Postgres server processes (the API's backends included), by PID."""
    out = {}
    for proc in psutil.process_iter(["name"]):
        if (proc.info["name"] or "").startswith("postgres"):
            with contextlib.suppress(psutil.NoSuchProcess):
                times = proc.cpu_times()
                out[proc.pid] = times.user + times.system
    return out


def run_phase(
    servers: list[psutil.Process],
    port: int,
    kind: str,
    tokens: list[str],
    clients: int,
    duration: float,
    rate: float,
    offered: float = 0.0,
) -> dict[str, float]:
    """One phase's figures. Besides the API's CPU per page, the whole machine's and Postgres's: with
    clients back to back, throughput is the cores divided by everything a page costs, so these show
    what latency at a given concurrency can be on this machine."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    cpu0, pg0, busy0 = api_cpu(servers), postgres_cpu(), machine_busy()
    child = ctx.Process(target=load_generator, args=(port, kind, tokens, clients, duration, rate, offered, queue))
    child.start()
    latencies, errors, elapsed = queue.get()
    child.join()
    cpu1, pg1, busy1 = api_cpu(servers), postgres_cpu(), machine_busy()
    cpu = sum(t - cpu0.get(pid, 0.0) for pid, t in cpu1.items())
    pg = sum(t - pg0.get(pid, 0.0) for pid, t in pg1.items())
    if errors:
        raise SystemExit(f"{kind}: {len(errors)} bad responses, first: {errors[0]}")
    n = len(latencies)
    return {
        "requests": n,
        "rps": n / elapsed,
        "p50": pct(latencies, 0.5),
        "p99": pct(latencies, 0.99),
        "cpu_ms_per_page": cpu / n * 1000,
        "cpu_share": cpu / elapsed,
        "pg_ms_per_page": pg / n * 1000,
        "machine_ms_per_page": (busy1 - busy0) / n * 1000,
    }


# --- the feed log's cost: logged against unlogged, side by side ---------------------------------------


def our_postgres(database_url: str) -> psutil.Process:
    """The postmaster of the benchmark's database: other Postgres servers on a shared machine (other
    people's tests) are not this page's work."""

    async def postmaster() -> int:
        conn = await asyncpg.connect(database_url)
        try:  # the backend's parent, read while the backend lives
            return int(psutil.Process(int(await conn.fetchval("SELECT pg_backend_pid()"))).ppid())
        finally:
            await conn.close()

    return psutil.Process(asyncio.run(postmaster()))


def tree_cpu(roots: list[psutil.Process]) -> dict[int, float]:
    """CPU seconds of these processes and all their children (a postmaster's: every backend,
    autovacuum, the WAL writer and checkpointer), by PID."""
    out = {}
    for root in roots:
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                times = proc.cpu_times()
                out[proc.pid] = times.user + times.system
    return out


def grown(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(value - before.get(pid, 0.0) for pid, value in after.items())


def cost_phase(
    api: psutil.Process,
    postmaster: psutil.Process,
    port: int,
    kind: str,
    tokens: list[str],
    clients: int,
    duration: float,
    cursors: list[str] | None = None,
    fold_wait: float = 0.0,
) -> tuple[int, float, float]:
    """Pages served, API CPU and Postgres CPU (all of the server's processes) of one closed-loop phase.
    The counters are read `fold_wait` seconds after the load stopped (a logged API folds the exposure
    it counted on that schedule) and once the API has been idle for a moment, so a logged API's writer
    has written and folded what the phase served and is charged for it, not the phase after it."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    api0, pg0 = tree_cpu([api]), tree_cpu([postmaster])
    child = ctx.Process(target=load_generator, args=(port, kind, tokens, clients, duration, 0.0, 0.0, queue, cursors))
    child.start()
    latencies, errors, _ = queue.get()
    child.join()
    time.sleep(fold_wait)
    settle_idle(api)
    if errors:
        raise SystemExit(f"{kind}: {len(errors)} bad responses, first: {errors[0]}")
    return len(latencies), grown(api0, tree_cpu([api])), grown(pg0, tree_cpu([postmaster]))


def settle_idle(api: psutil.Process, quiet: float = 0.02, step: float = 0.25, most: float = 5.0) -> None:
    """Until the API spends less than `quiet` of a core over `step` seconds (its writer is done)."""
    deadline = time.monotonic() + most
    last = grown({}, tree_cpu([api]))
    while time.monotonic() < deadline:
        time.sleep(step)
        now = grown({}, tree_cpu([api]))
        if now - last < quiet * step:
            return
        last = now


FLOOR_BATCH = 50  # pages a COPY, as the API's writer batches them


async def floor_rows(database_url: str, postmaster: psutil.Process, pages: int) -> tuple[float, float]:
    """The least the log can cost `pages` pages: their 20 rows each, signals already known, encoded
    (`db.feed_log.LogRows`, the writer's encoder) and COPYed into today's partition in batches of
    `FLOOR_BATCH` pages, with no signal computed, no reader read and no exposure counted. Returns this
    process's CPU and the Postgres server's (every process; the writing backend read before it exits,
    the others half a second after, once the WAL writer had a moment)."""
    from feedfabric.db import feed_log as feed_log_db

    conn = await asyncpg.connect(database_url)
    try:
        readers = [r["id"] for r in await conn.fetch("SELECT id FROM members ORDER BY id LIMIT 2000")]
        posts = [r["id"] for r in await conn.fetch("SELECT id FROM posts ORDER BY id DESC LIMIT 5000")]
        rng = random.Random(pages)
        await feed_log_db.ensure_partitions(conn, {datetime.now(UTC).date()})
        pg0, own0 = tree_cpu([postmaster]), time.process_time()
        for first in range(0, pages, FLOOR_BATCH):
            rows = feed_log_db.LogRows()
            for _ in range(min(FLOOR_BATCH, pages - first)):
                prefix, out = rows.page(rng.choice(readers), "following", "redis", datetime.now(UTC), None)
                for position, post in enumerate(rng.sample(posts, PAGE)):
                    value = rng.random()
                    rows.add(
                        prefix, out, post, position, value, value, False, 60.0, 0.0, 3.0, value, value, 0.0, 0.0, None
                    )
            await feed_log_db.copy_rows(conn, rows)
        own = time.process_time() - own0
        pg1 = tree_cpu([postmaster])  # while this connection's backend lives
    finally:
        await conn.close()
    time.sleep(0.5)
    return own, grown(pg0, pg1) + grown(pg1, tree_cpu([postmaster]))


def feed_log_ratio(
    logged: tuple[psutil.Process, int],
    unlogged: tuple[psutil.Process, int],
    postmaster: psutil.Process,
    kind: str,
    tokens: list[str],
    clients: int,
    duration: float,
    rounds: int,
    cursors: list[str] | None = None,
    fold_s: float = 10.0,
    database_url: str | None = None,
) -> dict[str, float]:
    """Per page, logged and unlogged, measured in alternating phases (so a neighbour's load falls on both
    alike): API CPU, Postgres CPU and their sum (the whole job: the writer runs in the API). With
    `database_url`, also the floor: after each unlogged phase, `floor_rows` for as many pages as it
    served, added to that phase's cost (what any design must spend to log those pages)."""
    totals = {"logged": [0, 0.0, 0.0], "unlogged": [0, 0.0, 0.0], "floor": [0, 0.0, 0.0]}
    # The last fold of a logged phase lands in it; the unlogged phase waits as long, so idle background
    # CPU (both servers', Postgres's) is counted alike on both sides.
    waits = {logged[1]: fold_s + 1.0, unlogged[1]: fold_s + 1.0}
    for api, port in (logged, unlogged):
        cost_phase(api, postmaster, port, kind, tokens, clients, 3, cursors, waits[port])  # warm-up
    for n in range(rounds):
        order = (
            (("logged", logged), ("unlogged", unlogged)) if n % 2 == 0 else (("unlogged", unlogged), ("logged", logged))
        )
        for name, (api, port) in order:
            pages, api_s, pg_s = cost_phase(
                api, postmaster, port, kind, tokens, clients, duration, cursors, waits[port]
            )
            totals[name][0] += pages
            totals[name][1] += api_s
            totals[name][2] += pg_s
            if name == "unlogged" and database_url is not None:
                own_s, floor_pg_s = asyncio.run(floor_rows(database_url, postmaster, pages))
                totals["floor"][0] += pages
                totals["floor"][1] += api_s + own_s
                totals["floor"][2] += pg_s + floor_pg_s
    out: dict[str, float] = {}
    for name, (pages, api_s, pg_s) in totals.items():
        if not pages:
            continue
        out[f"{name}_api"] = api_s / pages * 1000
        out[f"{name}_pg"] = pg_s / pages * 1000
        out[f"{name}_machine"] = (api_s + pg_s) / pages * 1000
        out[f"{name}_pages"] = pages
    return out


async def analyze(database_url: str) -> None:
    """Fresh statistics before a kind's phases: the phases before it filled the exposure tables, and a
    generic plan made from the statistics of empty ones cost For You's candidates 200+ ms a page."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def next_cursors(port: int, tokens: list[str]) -> tuple[list[str], list[str]]:
    """Each reader's For You first page, read once, and the cursor it ended with: what a later page of
    the chain asks with (readers whose first page ends the chain are left out)."""
    import httpx

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
        gate = asyncio.Semaphore(8)

        async def first(token: str) -> str | None:
            async with gate:
                got = await http.get(
                    "/userfeed/foryou", params={"limit": PAGE}, headers={"Authorization": f"Bearer {token}"}
                )
            got.raise_for_status()
            cursor = got.json()["nextCursor"]
            return str(cursor) if cursor else None

        found = await asyncio.gather(*(first(t) for t in tokens))
    kept = [(t, c) for t, c in zip(tokens, found, strict=True) if c is not None]
    return [t for t, _ in kept], [c for _, c in kept]


def start_api(
    database_url: str, redis_url: str, port: int, workers: int, *, feed_log: bool, fold_s: float = 10.0
) -> subprocess.Popen[bytes]:
    # No Kafka for the API: this benchmark reads; the realtime consumer would only add noise.
    api_env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "KAFKA_BOOTSTRAP_SERVERS": "",
        "FEEDFABRIC_JWT_SECRET": SECRET,
        "LOG_LEVEL": "WARNING",
        "RATE_LIMIT_OPERATIONS": "1000000000",
        "RATE_LIMIT_COST": "1000000000000",
        "FEED_LOG_ENABLED": "true" if feed_log else "false",
        "FEED_LOG_FOLD_SECONDS": str(fold_s),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "feedfabric", "api", "--port", str(port), "--workers", str(workers)], env=api_env
    )


def print_ratio(label: str, r: dict[str, float]) -> None:
    print(
        f"  {label}: logged API {r['logged_api']:.2f} + Postgres {r['logged_pg']:.2f} = {r['logged_machine']:.2f} ms/page"
        f" ({r['logged_pages']:.0f} pages); unlogged API {r['unlogged_api']:.2f} + Postgres {r['unlogged_pg']:.2f}"
        f" = {r['unlogged_machine']:.2f} ms/page ({r['unlogged_pages']:.0f} pages)",
        flush=True,
    )
    if "floor_machine" in r:
        print(
            f"  {label}, floor (unlogged + COPY of its rows, batches of {FLOOR_BATCH} pages):"
            f" API + writer {r['floor_api']:.2f} + Postgres {r['floor_pg']:.2f} = {r['floor_machine']:.2f} ms/page;"
            f" floor / unlogged: whole machine {r['floor_machine'] / r['unlogged_machine']:.2f}x,"
            f" Postgres {r['floor_pg'] / r['unlogged_pg']:.2f}x",
            flush=True,
        )


# --- profile ------------------------------------------------------------------------------------------


async def profile(database_url: str, redis_url: str, names: list[str], requests: int) -> str:
    """Runs GraphQL home-feed requests in-process under pyinstrument (the app through httpx's ASGI transport)."""
    import httpx
    from feedfabric.app import create_app
    from pyinstrument import Profiler

    settings = Settings(
        database_url=database_url,
        redis_url=redis_url,
        feedfabric_jwt_secret=SECRET,
        rate_limit_operations=10**9,
        rate_limit_cost=10**12,
    )
    app = create_app(settings)
    body = {"query": GRAPHQL, "operationName": "Home", "variables": {"first": PAGE}}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
            headers = [{"Authorization": f"Bearer {issue_token(SECRET, n, ttl=7200)}"} for n in names[:200]]
            for h in headers[:20]:
                (await http.post("/graphql", json=body, headers=h)).raise_for_status()
            profiler = Profiler(async_mode="enabled")
            profiler.start()
            for i in range(requests):
                (await http.post("/graphql", json=body, headers=headers[i % len(headers)])).raise_for_status()
            profiler.stop()
    return profiler.output_text(unicode=False, color=False, show_all=False)


# --- main ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--follows-each", type=int, default=100)
    parser.add_argument("--posts", type=int, default=200_000)
    parser.add_argument("--likes", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=30)
    parser.add_argument("--rate", type=float, default=0, help="requests/s per client; 0 = back to back")
    parser.add_argument(
        "--offered",
        type=float,
        default=0,
        help="open loop: requests/s offered in all, on a fixed schedule; 0 = closed loop",
    )
    parser.add_argument("--workers", type=int, default=1, help="API worker processes (uvicorn --workers)")
    parser.add_argument("--viewers", type=int, default=2000, help="distinct members the clients read as")
    parser.add_argument("--profile", metavar="FILE", help="write a pyinstrument report of the GraphQL path here")
    parser.add_argument("--only", choices=["rest", "graphql"], default=None)
    parser.add_argument("--database", help="reuse a database this benchmark loaded before (REDIS_URL still filled)")
    parser.add_argument(
        "--log-rounds",
        type=int,
        default=4,
        help="pairs of logged / unlogged phases for the feed log's cost (REST home, For You); 0: skip",
    )
    parser.add_argument("--log-duration", type=float, default=8, help="seconds of each of those phases")
    parser.add_argument(
        "--fold-seconds", type=float, default=10.0, help="the logged API's FEED_LOG_FOLD_SECONDS (0: every batch)"
    )
    parser.add_argument(
        "--log-kinds",
        default="home,foryou,foryou_next",
        help="which pages the feed log's cost is measured on (comma-separated: home, foryou, foryou_next)",
    )
    parser.add_argument(
        "--no-floor", action="store_true", help="skip the floor (the unlogged page plus a bare COPY of its rows)"
    )
    args = parser.parse_args()
    kinds = set(args.log_kinds.split(","))
    if not kinds <= {"home", "foryou", "foryou_next"}:
        parser.error("--log-kinds: home, foryou, foryou_next")

    with services() as env:
        redis_url = env_or(env, "REDIS_URL")
        if args.database:
            database_url = args.database
            names = asyncio.run(member_names(database_url))
            asyncio.run(mark_seen_now(database_url))
        else:
            database_url = fresh_database(env_or(env, "DATABASE_URL"))
            names = asyncio.run(load(database_url, redis_url, args))
            print(f"database: {database_url}")
        viewers = random.Random(7).sample(names, min(args.viewers, len(names)))
        tokens = [issue_token(SECRET, n, ttl=7200) for n in viewers]
        if args.profile:
            Path(args.profile).write_text(asyncio.run(profile(database_url, redis_url, viewers, 500)))
            print(f"pyinstrument profile of 500 GraphQL pages: {args.profile}")
        port = free_port()
        api = start_api(database_url, redis_url, port, args.workers, feed_log=True, fold_s=args.fold_seconds)
        try:
            wait_healthy(port)
            servers = [psutil.Process(api.pid)]
            results = {}
            for kind in ("rest", "graphql"):
                if args.only and kind != args.only:
                    continue
                run_phase(servers, port, kind, tokens, args.clients, 3, args.rate, args.offered)  # warm-up
                r = run_phase(servers, port, kind, tokens, args.clients, args.duration, args.rate, args.offered)
                results[kind] = r
                pace = (
                    f" offered {args.offered:g}/s (open loop)"
                    if args.offered
                    else f" at {args.rate:g}/s each"
                    if args.rate
                    else ""
                )
                workers = f", {args.workers} API workers" if args.workers != 1 else ""
                print(
                    f"{kind:8s} {args.clients} clients x {args.duration:.0f} s{pace}{workers}: {r['rps']:.0f} req/s, "
                    f"p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, API CPU {r['cpu_ms_per_page']:.2f} ms/page "
                    f"({r['cpu_share'] * 100:.0f}% of a core); Postgres {r['pg_ms_per_page']:.2f} ms/page; "
                    f"whole machine {r['machine_ms_per_page']:.2f} ms/page",
                    flush=True,
                )
            if len(results) == 2:
                ratio = results["graphql"]["cpu_ms_per_page"] / results["rest"]["cpu_ms_per_page"]
                print(f"GraphQL/REST API CPU per page: {ratio:.2f}x")
            print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
            if args.log_rounds:
                unlogged_port = free_port()
                unlogged = start_api(database_url, redis_url, unlogged_port, args.workers, feed_log=False)
                try:
                    wait_healthy(unlogged_port)
                    postmaster = our_postgres(database_url)
                    pair = ((servers[0], port), (psutil.Process(unlogged.pid), unlogged_port))
                    load_before = os.getloadavg()[0]

                    def measured(kind: str, readers: list[str], cursors: list[str] | None = None) -> dict[str, float]:
                        """One kind's alternating phases, on statistics fresh from what the phases before wrote."""
                        asyncio.run(analyze(database_url))
                        return feed_log_ratio(
                            *pair,
                            postmaster,
                            kind,
                            readers,
                            args.clients,
                            args.log_duration,
                            args.log_rounds,
                            cursors,
                            args.fold_seconds,
                            None if args.no_floor else database_url,
                        )

                    results_log: list[tuple[str, str, dict[str, float]]] = []
                    if "home" in kinds:
                        results_log.append(("home", "REST home", measured("rest", tokens)))
                    if "foryou" in kinds:
                        results_log.append(("For You", "For You first pages (REST)", measured("foryou", tokens)))
                    if "foryou_next" in kinds:
                        chain_tokens, cursors = asyncio.run(next_cursors(port, tokens))
                        label = f"For You second pages (REST, {len(chain_tokens)} chains)"
                        results_log.append(("For You page 2", label, measured("foryou_next", chain_tokens, cursors)))
                    load_after = os.getloadavg()[0]
                finally:
                    unlogged.terminate()
                    unlogged.wait(30)
                print(
                    f"feed log: {args.log_rounds} x {args.log_duration:g} s each of logged and unlogged, alternating,"
                    f" {args.clients} clients; exposure folded every {args.fold_seconds:g} s (0: every batch);"
                    f" whole machine = API + every process of this Postgres server;"
                    f" load average {load_before:.2f} -> {load_after:.2f} on {os.cpu_count()} cores",
                    flush=True,
                )
                for _, label, r in results_log:
                    print_ratio(label, r)
                for name, _, r in sorted(results_log, key=lambda x: x[0] == "home"):
                    which = "" if name == "home" else f" ({name})"
                    print(
                        f"feed log{which}, logged / unlogged: whole machine"
                        f" {r['logged_machine'] / r['unlogged_machine']:.2f}x,"
                        f" Postgres {r['logged_pg'] / r['unlogged_pg']:.2f}x",
                        flush=True,
                    )
        finally:
            api.terminate()
            api.wait(30)


if __name__ == "__main__":
    main()
