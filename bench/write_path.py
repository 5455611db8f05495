"""The write path against its floors (issue 50): what a post, a like and a follow cost, stage by stage.

Runs `feedfabric api`, `relay` and `worker` (worker-events, -notifications, -engagement; each group its own
process) on embedded services and a fresh database, tracing off, and prints, each figure beside its floor
measured in the same run:

1. Postgres statements and round trips of each mutation (counted at the pool, in-process, as
   tests/db/test_write_statements.py pins them).
2. Rising open-loop rates of a mix (posts 50%, likes 35%, follows 15%, half of them over REST) through the
   whole pipeline: per step, API, relay and group CPU per event, outbox backlog and each group's lag
   (events of its types published and not yet in its processed_events) at mid-step and end. The highest
   rate with no stage falling behind is the sustained rate; the first stage that falls behind is named.
3. Post -> follower timeline p50/p99 at half and nine tenths of the sustained rate.
4. Relay CPU per event and events per claim beside the relay floor (aiokafka alone, the same events in
   batches of the same mean size, acks=all); each group's CPU per event beside its floor, a consumer
   running live beside the worker during the steps (bench/pipeline_floor.py).
5. API CPU per mutation, by kind and interface (createPost, likePost, follow over GraphQL; PUT /follows
   over REST; the contract has no REST route for posts or likes), beside a ladder from the bare Starlette
   floor (bench/write_floor.py) through the product's steps one by one to the real API. Each rung gets the
   same open-loop requests (--api-rate for --api-seconds); its idle background is measured and subtracted.
   Run last, with the relay and workers stopped.

`--profile N` adds a cProfile of N createPost in process, by own time.

The machine is shared: absolute figures are noise; ratios are measured side by side in one run and the
load average is printed with them.

    .venv/bin/python bench/write_path.py [--members 120] [--api-rate 60] [--api-seconds 4]
                                         [--rates 10,20,40,80,120] [--step-seconds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing as mp
import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
import httpx  # noqa: E402
import psutil  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402
from feedfabric.core.auth import issue_token  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from feedfabric.feeds.timelines import encode_member, feed_key  # noqa: E402

from bench import pipeline_floor, write_floor  # noqa: E402
from bench._stack import env_or, fresh_database, services  # noqa: E402
from bench.home_feed import free_port, wait_healthy  # noqa: E402

SECRET = "bench-secret-" + uuid.uuid4().hex
CREATE = "mutation($c: String!) { createPost(input: {content: $c}) { id content tags createdAt } }"
LIKE = "mutation($p: ID!) { likePost(postId: $p) { id likeCount viewerHasLiked } }"
FOLLOW = "mutation($e: String!) { follow(externalUserId: $e) { id username } }"
COMBOS = ("createPost gql", "likePost gql", "follow gql", "follow rest")
GROUPS = ("worker-events", "worker-notifications", "worker-engagement")
GROUP_TOPICS = {
    "worker-events": ("feedfabric.posts", "feedfabric.members"),
    "worker-notifications": ("feedfabric.posts", "feedfabric.engagement", "feedfabric.members"),
    "worker-engagement": ("feedfabric.engagement",),
}

Request = tuple[str, str, dict[str, Any] | None, str]  # method, path, JSON body, token


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class World:
    """Members with tokens, a follow graph, posts to like; every request made from it is new work (a post
    never seen, a like or follow not yet made), so each rung and step does the same writes."""

    names: list[str]
    tokens: dict[str, str]
    ids: dict[str, uuid.UUID]
    posts: list[str]
    follows: set[tuple[str, str]]
    followers: dict[str, list[str]]
    rng: random.Random = field(default_factory=lambda: random.Random(50))
    serial: Any = field(default_factory=itertools.count)
    likes: set[tuple[str, str]] = field(default_factory=set)

    def post(self, floor: bool) -> Request:
        who = self.rng.choice(self.names)
        other = self.rng.choice(self.names)
        content = f"write path {next(self.serial)} #bench{self.rng.randrange(20)} @{other}"
        if floor:
            return "POST", "/post", {"content": content}, self.tokens[who]
        return "POST", "/graphql", {"query": CREATE, "variables": {"c": content}}, self.tokens[who]

    def like(self, floor: bool) -> Request:
        while True:
            who, post_id = self.rng.choice(self.names), self.rng.choice(self.posts)
            if (who, post_id) not in self.likes:
                self.likes.add((who, post_id))
                break
        if floor:
            return "POST", "/like", {"postId": post_id}, self.tokens[who]
        return "POST", "/graphql", {"query": LIKE, "variables": {"p": post_id}}, self.tokens[who]

    def _pair(self) -> tuple[str, str]:
        while True:
            who, target = self.rng.choice(self.names), self.rng.choice(self.names)
            if who != target and (who, target) not in self.follows:
                self.follows.add((who, target))
                return who, target

    def follow(self, floor: bool, rest: bool) -> Request:
        who, target = self._pair()
        if rest:
            return "PUT", f"/follows/{target}", None, self.tokens[who]
        if floor:
            return "POST", "/follow", {"externalUserId": target}, self.tokens[who]
        return "POST", "/graphql", {"query": FOLLOW, "variables": {"e": target}}, self.tokens[who]

    def of(self, combo: str, floor: bool) -> Request:
        if combo == "createPost gql":
            return self.post(floor)
        if combo == "likePost gql":
            return self.like(floor)
        return self.follow(floor, rest=combo == "follow rest")

    def mixed(self) -> Request:
        roll = self.rng.random()
        if roll < 0.5:
            return self.post(False)
        if roll < 0.85:
            return self.like(False)
        return self.follow(False, rest=self.rng.random() < 0.5)


@dataclass
class Driven:
    sent: int
    ok: int
    elapsed: float
    latencies: list[float]
    bodies: list[Any]


async def drive(
    http: httpx.AsyncClient, requests: list[Request], rate: float, keep: Callable[[Request, Any], None] | None = None
) -> Driven:
    """Open loop: request i is sent at i / rate whatever the answers before it."""
    latencies: list[float] = []
    bodies: list[Any] = []
    ok = 0

    async def one(request: Request) -> None:
        nonlocal ok
        method, path, body, token = request
        started = time.perf_counter()
        try:
            response = await http.request(method, path, json=body, headers={"Authorization": f"Bearer {token}"})
        except httpx.HTTPError:
            return
        latencies.append(time.perf_counter() - started)
        if response.status_code == 200 and "errors" not in response.text[:20]:
            ok += 1
            if keep is not None:
                keep(request, response.json())

    began = time.monotonic()
    tasks = []
    for i, request in enumerate(requests):
        delay = began + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(request)))
    await asyncio.gather(*tasks)
    return Driven(len(requests), ok, time.monotonic() - began, latencies, bodies)


def cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


async def quiet(pids: dict[str, int], share: float = 0.05, timeout: float = 60) -> None:
    """Until every process uses under `share` of a core over half a second (done with what came before)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rates = await idle_rate(pids, 0.5)
        if all(rate < share for rate in rates.values()):
            return
    print(f"   (processes still busy after {timeout:.0f} s: {rates})")


async def idle_rate(pids: dict[str, int], seconds: float = 1.5) -> dict[str, float]:
    """Each process's background CPU per second (timers, heartbeats, polls), subtracted from its busy figures."""
    before = {n: cpu_s(p) for n, p in pids.items()}
    await asyncio.sleep(seconds)
    return {n: (cpu_s(p) - before[n]) / seconds for n, p in pids.items()}


async def api_cpu_per_request(
    http: httpx.AsyncClient, pid: int, requests: list[Request], rate: float
) -> tuple[float, Driven]:
    await drive(http, requests[:15], rate)  # warm: prepared statements, caches
    idle = (await idle_rate({"api": pid}))["api"]
    before = cpu_s(pid)
    driven = await drive(http, requests[15:], rate)
    used = cpu_s(pid) - before - idle * driven.elapsed
    return used * 1000 / max(1, driven.ok), driven


# -- set-up -------------------------------------------------------------------------------------------------


def process_env(settings: Settings, database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": settings.redis_url or "",
        "KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers or "",
        "FEEDFABRIC_JWT_SECRET": SECRET,
        "KAFKA_TOPIC_PREFIX": settings.kafka_topic_prefix,
        "LOG_LEVEL": "WARNING",
        "TRACING_SAMPLE_RATIO": "0",
        "RATE_LIMIT_OPERATIONS": "1000000000",
        "RATE_LIMIT_COST": "1000000000000",
        "METRICS_PORT": "0",
        "HF_HUB_OFFLINE": "1",
    }


async def make_world(http: httpx.AsyncClient, pool: asyncpg.Pool, members: int, posts: int) -> World:
    from feedfabric.feeds.playlists import liked_playlists

    rng = random.Random(7)
    names = [f"w{i:04d}" for i in range(members)]
    tokens = {n: issue_token(SECRET, n, ttl=7200) for n in names}
    upsert = "mutation($u: String!) { upsertProfile(username: $u, displayName: $u) { id } }"
    for chunk in range(0, members, 20):
        await asyncio.gather(
            *(
                http.post("/graphql", json={"query": upsert, "variables": {"u": n}}, headers=_auth(tokens[n]))
                for n in names[chunk : chunk + 20]
            )
        )
    ids = {r["external_id"]: r["id"] for r in await pool.fetch("SELECT external_id, id FROM members")}
    follows = {(a, b) for a in names for b in rng.sample(names, 8) if a != b}
    await pool.executemany(
        "INSERT INTO follows (follower_id, target_type, target_id) VALUES ($1, 'member', $2) ON CONFLICT DO NOTHING",
        [(ids[a], str(ids[b])) for a, b in follows],
    )
    followers: dict[str, list[str]] = {n: [] for n in names}
    for a, b in follows:
        followers[b].append(a)
    await liked_playlists(pool, list(ids.values()))
    world = World(names, tokens, ids, [], follows, followers)
    requests = [world.post(False) for _ in range(posts)]
    driven = await drive(http, requests, 200, keep=lambda _, body: world.posts.append(body["data"]["createPost"]["id"]))
    assert driven.ok == posts, f"{driven.ok} of {posts} posts made"
    return world


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def floor_members(pool: asyncpg.Pool) -> write_floor.Members:
    rows = await pool.fetch(
        "SELECT id, external_id, username, display_name, avatar_url, status, last_seen_at FROM members"
    )
    return {r["external_id"]: {"id": r["id"], "username": r["username"], "row": dict(r)} for r in rows}


# -- 1. statements and round trips ------------------------------------------------------------------------


async def round_trips(settings: Settings, world: World, profile: int = 0) -> dict[str, int]:
    """Each mutation through the whole app in-process, on a pool that logs every call (one call, one round
    trip once prepared; asyncpg's type introspection left out)."""
    from feedfabric.app import create_app
    from feedfabric.db.pool import create_pool

    seen: list[str] = []
    marks = ("typeinfo_tree", "current_setting('jit')", "set_config('jit'")

    async def attach(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(lambda r: seen.append(r.query) if not any(m in r.query for m in marks) else None)

    pool = await create_pool(
        settings.database_url or "", min_size=1, max_size=2, lean_reset=True, generic_plans=True, on_connect=attach
    )
    app = create_app(settings)
    counts: dict[str, int] = {}
    try:
        async with app.router.lifespan_context(app):
            app.state.resources.pool = pool
            if app.state.resources.reads is not None:
                app.state.resources.reads.primary = pool
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                for combo in COMBOS:
                    for measured in (False, True):  # the first prepares the statements
                        method, path, body, token = world.of(combo, floor=False)
                        before = len(seen)
                        response = await client.request(method, path, json=body, headers=_auth(token))
                        assert response.status_code == 200, response.text
                        if measured:
                            counts[combo] = len(seen) - before
                if profile:
                    await profile_in_process(client, world, profile)
    finally:
        await pool.close()
    return counts


async def profile_in_process(client: httpx.AsyncClient, world: World, count: int) -> None:
    """--profile N: N createPost through the app in-process under cProfile; the functions with the most own time."""
    import cProfile
    import pstats

    requests = [world.post(False) for _ in range(count)]
    profiler = cProfile.Profile(time.process_time)  # CPU, not wall time: waits are not costs
    profiler.enable()
    for method, path, body, token in requests:
        await client.request(method, path, json=body, headers=_auth(token))
    profiler.disable()
    print(f"\n   cProfile of {count} createPost in process (ASGI client included), by own time:")
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(18)


# -- 2. the API ladder --------------------------------------------------------------------------------------


async def api_ladder(
    args: argparse.Namespace, settings: Settings, database_url: str, world: World, api_pid: int, api_port: int
) -> dict[str, dict[str, float]]:
    """CPU ms per request: rung -> combo -> figure. Rungs: bare, +member, +ratelimit, +domain, product."""
    members = await floor_members_of(database_url)
    rungs = [("bare", frozenset())]
    for i in range(len(write_floor.STEPS)):
        rungs.append(("+" + write_floor.STEPS[i], frozenset(write_floor.STEPS[: i + 1])))
    n = int(args.api_rate * args.api_seconds) + 15
    figures: dict[str, dict[str, float]] = {}
    for label, steps in rungs:
        port = free_port()
        server = mp.get_context("spawn").Process(
            target=write_floor.serve,
            args=(port, database_url, settings.redis_url, SECRET, members, steps),
        )
        server.start()
        try:
            wait_healthy(port)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                figures[label] = {}
                for combo in COMBOS:
                    requests = [world.of(combo, floor=True) for _ in range(n)]
                    ms, driven = await api_cpu_per_request(http, server.pid or 0, requests, args.api_rate)
                    assert driven.ok == driven.sent, f"{label} {combo}: {driven.ok} of {driven.sent} answered"
                    figures[label][combo] = ms
        finally:
            server.terminate()
            server.join(30)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", timeout=30) as http:
        figures["product"] = {}
        for combo in COMBOS:
            requests = [world.of(combo, floor=False) for _ in range(n)]
            ms, driven = await api_cpu_per_request(http, api_pid, requests, args.api_rate)
            assert driven.ok == driven.sent, f"product {combo}: {driven.ok} of {driven.sent} answered"
            figures["product"][combo] = ms
    return figures


async def floor_members_of(database_url: str) -> write_floor.Members:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    try:
        return await floor_members(pool)
    finally:
        await pool.close()


# -- 3. the pipeline at rising rates ---------------------------------------------------------------------------


class Progress:
    """Each group's progress read from Postgres: the published events of its types it has not recorded in
    processed_events. (Tansu, the dev broker, reports a partition's end offset as its last batch's base
    offset + 1, so end offsets minus committed ones do not give a lag there.)"""

    def __init__(self, pool: asyncpg.Pool) -> None:
        from feedfabric.workers.groups import all_groups

        self.pool = pool
        specs = all_groups()
        self.types = {g: sorted(specs[g].event_types) for g in GROUPS}

    async def lag(self, group: str) -> int:
        return int(
            await self.pool.fetchval(
                "SELECT count(*) FROM outbox o WHERE o.published_at IS NOT NULL AND o.event_type = ANY($2::text[])"
                " AND NOT EXISTS (SELECT 1 FROM processed_events p WHERE p.group_name = $1 AND p.event_id = o.id)",
                group,
                self.types[group],
            )
        )

    async def published(self, group: str, since: Any, until: Any) -> int:
        """Events of the group's types published between two database times."""
        return int(
            await self.pool.fetchval(
                "SELECT count(*) FROM outbox WHERE published_at BETWEEN $2 AND $3 AND event_type = ANY($1::text[])",
                self.types[group],
                since,
                until,
            )
        )

    async def total(self, group: str) -> int:
        return int(
            await self.pool.fetchval(
                "SELECT count(*) FROM outbox WHERE published_at IS NOT NULL AND event_type = ANY($1::text[])",
                self.types[group],
            )
        )


@dataclass
class Step:
    rate: float
    offered: int
    ok: int
    p99_ms: float
    cpu_ms: dict[str, float]  # process -> CPU ms in the step, idle background subtracted
    published: int
    batches: int
    records: dict[str, int]  # group -> records on its topics during the step
    backlog: tuple[int, int]  # unpublished rows at mid-step and end
    lags: dict[str, tuple[int, int]]  # group -> lag at mid-step and end
    behind: list[str]


async def unpublished(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL"))


async def pipeline_step(
    http: httpx.AsyncClient,
    pool: asyncpg.Pool,
    kafka: Progress,
    pids: dict[str, int],
    idle: dict[str, float],
    world: World,
    rate: float,
    seconds: float,
) -> Step:
    requests = [world.mixed() for _ in range(int(rate * seconds))]
    started_at = await pool.fetchval("SELECT clock_timestamp()")
    cpu_before = {n: cpu_s(p) for n, p in pids.items()}
    driving = asyncio.create_task(drive(http, requests, rate))
    await asyncio.sleep(seconds / 2)
    mid_backlog = await unpublished(pool)
    mid_lags = {g: await kafka.lag(g) for g in GROUPS}
    driven = await driving
    await asyncio.sleep(0.5)  # one idle wait of the relay, so a stage that keeps up has caught up
    end_backlog = await unpublished(pool)
    end_lags = {g: await kafka.lag(g) for g in GROUPS}
    elapsed = driven.elapsed + 0.5
    cpu = {n: (cpu_s(p) - cpu_before[n] - idle[n] * elapsed) * 1000 for n, p in pids.items()}
    ended_at = await pool.fetchval("SELECT clock_timestamp()")
    published, batches = await pool.fetchrow(
        "SELECT count(*), count(DISTINCT published_at) FROM outbox WHERE published_at BETWEEN $1 AND $2",
        started_at,
        ended_at,
    )
    records = {g: await kafka.published(g, started_at, ended_at) for g in GROUPS}
    allowance = max(50, rate * 1.0)  # a second of arrivals may be in flight at any stage
    behind = []
    quarter = max(1, len(driven.latencies) // 4)
    early, late = pct(driven.latencies[:quarter], 0.5), pct(driven.latencies[-quarter:], 0.5)
    if driven.ok < 0.95 * driven.sent or late > max(0.5, 4 * early):  # answers later and later: queueing
        behind.append("api")
    if end_backlog > allowance and end_backlog >= mid_backlog:
        behind.append("relay")
    behind += [g for g in GROUPS if end_lags[g] > allowance and end_lags[g] >= mid_lags[g]]
    return Step(
        rate,
        driven.sent,
        driven.ok,
        pct(driven.latencies, 0.99) * 1000,
        cpu,
        int(published),
        int(batches),
        records,
        (mid_backlog, end_backlog),
        {g: (mid_lags[g], end_lags[g]) for g in GROUPS},
        behind,
    )


async def settle(pool: asyncpg.Pool, kafka: Progress, timeout: float = 300) -> None:
    """Until the outbox is published and every group has caught up (a step starts from an empty pipeline)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await unpublished(pool) == 0 and all([await kafka.lag(g) == 0 for g in GROUPS]):
            return
        await asyncio.sleep(0.25)
    lags = {g: await kafka.lag(g) for g in GROUPS}
    raise RuntimeError(f"the pipeline did not drain: {await unpublished(pool)} unpublished, lags {lags}")


async def timeline_latency(
    http: httpx.AsyncClient, redis: aioredis.Redis, world: World, rate: float, seconds: float
) -> list[float]:
    """Post -> one follower's timeline, from the post's scheduled send, for every fourth post of a mixed
    open-loop run at `rate` (the timeline polled every 5 ms)."""
    latencies: list[float] = []
    watchers: list[asyncio.Task[None]] = []
    by_token = {t: n for n, t in world.tokens.items()}
    counted = itertools.count()

    async def watch(post_id: str, follower: str, sent: float) -> None:
        key, member = feed_key(world.ids[follower]), encode_member(post_id)
        while time.monotonic() - sent < 20:
            if await redis.zscore(key, member) is not None:
                latencies.append(time.monotonic() - sent)
                return
            await asyncio.sleep(0.005)

    requests = [world.mixed() for _ in range(int(rate * seconds))]
    began = time.monotonic()
    sent_at = {id(r): began + i / rate for i, r in enumerate(requests)}

    def keep(request: Request, body: Any) -> None:
        data = body.get("data") or {}
        if "createPost" in data and next(counted) % 4 == 0:
            followers = world.followers[by_token[request[3]]]
            if followers:
                follower = world.rng.choice(followers)
                watchers.append(asyncio.create_task(watch(data["createPost"]["id"], follower, sent_at[id(request)])))

    await drive(http, requests, rate, keep=keep)
    await asyncio.gather(*watchers)
    return latencies


# -- 5. the relay and the groups beside their floors ------------------------------------------------------------


async def relay_records(database_url: str, limit: int) -> list[tuple[str, bytes, bytes]]:
    from feedfabric.db.pipeline import OutboxRow
    from feedfabric.workers.relay import encode

    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT id, topic, key, event_type, aggregate_version, payload::text AS payload FROM outbox"
            " WHERE published_at IS NOT NULL ORDER BY id DESC LIMIT $1",
            limit,
        )
    finally:
        await conn.close()
    return [
        (
            r["topic"],
            r["key"].encode(),
            encode(OutboxRow(r["id"], r["topic"], r["key"], r["event_type"], r["aggregate_version"], r["payload"])),
        )
        for r in reversed(rows)
    ]


def run_in_process(target: Callable[..., dict[str, float]], *args: Any) -> dict[str, float]:
    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(target, args)


# -- the run -----------------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, env: dict[str, str], database_url: str) -> None:
    from feedfabric.core.topics import ensure_topics

    settings = Settings(
        database_url=database_url,
        redis_url=env_or(env, "REDIS_URL"),
        kafka_bootstrap_servers=env_or(env, "KAFKA_BOOTSTRAP_SERVERS"),
        feedfabric_jwt_secret=SECRET,
        kafka_topic_prefix=f"wp{uuid.uuid4().hex[:8]}.",
        tracing_sample_ratio=0,
    )
    penv = process_env(settings, database_url)
    await ensure_topics(settings)
    api_port = free_port()
    api = subprocess.Popen([sys.executable, "-m", "feedfabric", "api", "--port", str(api_port)], env=penv)
    workers: dict[str, subprocess.Popen[bytes]] = {}
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=4)
    redis = aioredis.from_url(settings.redis_url or "")
    kafka = Progress(pool)
    try:
        wait_healthy(api_port, 60)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", timeout=60) as http:
            world = await make_world(http, pool, args.members, args.posts)
            print(f"write path: {args.members} members, {len(world.follows)} follows, {len(world.posts)} posts to like")

            # No broker for the in-process app: its realtime consumer's fetches are not a mutation's cost.
            in_process = settings.model_copy(update={"database_url": database_url, "kafka_bootstrap_servers": None})
            trips = await round_trips(in_process, world, args.profile)
            print("\n1. Postgres round trips per mutation (each call one statement; BEGIN and COMMIT counted)")
            for combo, count in trips.items():
                print(f"   {combo:<16} {count}")

            # The pipeline first, on an outbox holding only the world's events; the API ladder last, with the relay
            # and workers stopped (its events are never published).
            workers["relay"] = subprocess.Popen([sys.executable, "-m", "feedfabric", "relay"], env=penv)
            for group in GROUPS:
                workers[group] = subprocess.Popen(
                    [sys.executable, "-m", "feedfabric", "worker", "--group", group], env=penv
                )
            floors = {
                g: mp.get_context("spawn").Process(
                    target=pipeline_floor.consumer_floor,
                    args=(
                        g,
                        settings.kafka_bootstrap_servers,
                        settings.kafka_topic_prefix,
                        list(GROUP_TOPICS[g]),
                        kafka.types[g],
                        database_url,
                        settings.redis_url,
                    ),
                    daemon=True,
                )
                for g in GROUPS
            }
            for floor_process in floors.values():
                floor_process.start()
            await drive(http, [world.mixed() for _ in range(40)], 20)
            await settle(pool, kafka)
            pids = {
                "api": api.pid,
                **{n: p.pid for n, p in workers.items()},
                **{f"floor {g}": p.pid or 0 for g, p in floors.items()},
            }
            await quiet(pids)
            idle = await idle_rate(pids, 5.0)
            steps: list[Step] = []
            for rate in args.rates:
                step = await pipeline_step(http, pool, kafka, pids, idle, world, rate, args.step_seconds)
                steps.append(step)
                if step.behind:
                    break
                await settle(pool, kafka)
                await quiet(pids)
            load = os.getloadavg()[0]
            print(f"\n2. Rising rates (mix: posts 50%, likes 35%, follows 15%; load average {load:.1f})")
            print(
                "   idle background subtracted, % of a core: "
                + ", ".join(f"{n} {r * 100:.1f}" for n, r in idle.items())
            )
            for s in steps:
                per_event = {n: ms / max(1, s.published) for n, ms in s.cpu_ms.items() if not n.startswith("floor")}
                print(
                    f"   {s.rate:>5.0f}/s: {s.ok}/{s.offered} answered, p99 {s.p99_ms:.0f} ms; {s.published} events in"
                    f" {s.batches} claims ({s.published / max(1, s.batches):.1f} a claim); backlog {s.backlog};"
                    f" lags {dict((g.removeprefix('worker-'), v) for g, v in s.lags.items())};"
                    f" CPU ms/event "
                    + ", ".join(f"{n.removeprefix('worker-')} {v:.2f}" for n, v in per_event.items())
                    + (f"  <- behind: {', '.join(s.behind)}" if s.behind else "")
                )
            kept = [s for s in steps if not s.behind]
            sustained = kept[-1].rate if kept else 0.0
            first_behind = steps[-1].behind if steps[-1].behind else ["none within the rates tried"]
            print(
                f"   sustained: {sustained:.0f} mutations/s; first behind at the next rate: {', '.join(first_behind)}"
            )

            if sustained:
                await settle(pool, kafka)
                print("\n3. Post -> follower timeline")
                for share in (0.5, 0.9):
                    lat = await timeline_latency(http, redis, world, sustained * share, args.step_seconds)
                    print(
                        f"   at {share:.0%} of {sustained:.0f}/s: p50 {pct(lat, 0.5) * 1000:.0f} ms,"
                        f" p99 {pct(lat, 0.99) * 1000:.0f} ms ({len(lat)} posts)"
                    )
                    await settle(pool, kafka)

            for proc in workers.values():
                proc.terminate()
            for proc in workers.values():
                proc.wait(30)
            for floor_process in floors.values():
                floor_process.terminate()
                floor_process.join(30)
            measured = kept or steps
            events = sum(s.published for s in measured)
            batches = sum(s.batches for s in measured)
            relay_ms = sum(s.cpu_ms["relay"] for s in measured) / max(1, events)
            mean_batch = max(1, round(events / max(1, batches)))
            floor_settings = settings.model_copy(update={"kafka_topic_prefix": f"wpf{uuid.uuid4().hex[:8]}."})
            await ensure_topics(floor_settings)
            records = await relay_records(database_url, 3000)
            relay_floor = run_in_process(
                pipeline_floor.relay_floor,
                settings.kafka_bootstrap_servers,
                floor_settings.kafka_topic_prefix,
                records,
                mean_batch,
            )
            relay_floor_ms = relay_floor["cpu_s"] * 1000 / relay_floor["events"]
            load = os.getloadavg()[0]
            print(f"\n4. Stages beside their floors (load average {load:.1f})")
            print(
                f"   relay: {relay_ms:.3f} ms CPU/event, {events / max(1, batches):.1f} events a claim, so at least"
                f" {events / max(1, batches) / 3:.1f} a round trip (a claim: 1 produce, 1 Postgres round trip with"
                " the stamp folded into the next claim, 2 when the relay waits after it);"
                f" floor (aiokafka, batches of {mean_batch},"
                f" acks=all) {relay_floor_ms:.3f} ms/event -> {relay_ms / relay_floor_ms:.2f}x"
            )
            for group in GROUPS:
                group_events = sum(s.records[group] for s in measured)
                group_ms = sum(s.cpu_ms[group] for s in measured) / max(1, group_events)
                floor_ms = sum(s.cpu_ms[f"floor {group}"] for s in measured) / max(1, group_events)
                print(
                    f"   {group}: {group_ms:.3f} ms CPU/event ({group_events} events of its types); floor, live"
                    f" beside it {floor_ms:.3f} ms/event -> {group_ms / floor_ms:.2f}x"
                )

            ladder = await api_ladder(args, settings, database_url, world, api.pid, api_port)
            load = os.getloadavg()[0]
            print(
                f"\n5. API CPU ms per mutation, the ladder (open loop {args.api_rate:.0f}/s; load average {load:.1f})"
            )
            print(f"   {'rung':<12}" + "".join(f"{c:>16}" for c in COMBOS))
            for rung, figures in ladder.items():
                print(f"   {rung:<12}" + "".join(f"{figures[c]:>16.2f}" for c in COMBOS))
            print(
                f"   {'x floor':<12}" + "".join(f"{ladder['product'][c] / ladder['bare'][c]:>15.2f}x" for c in COMBOS)
            )

            print(f"\nload average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    finally:
        for proc in [*workers.values(), api]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [*workers.values(), api]:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        await redis.aclose()
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=120)
    parser.add_argument("--posts", type=int, default=300, help="posts made first, for the likes")
    parser.add_argument("--api-rate", type=float, default=60)
    parser.add_argument("--api-seconds", type=float, default=4)
    parser.add_argument("--rates", default="10,20,40,80,120")
    parser.add_argument("--step-seconds", type=float, default=8)
    parser.add_argument("--profile", type=int, default=0, help="N createPost in process under cProfile")
    args = parser.parse_args()
    args.rates = [float(r) for r in args.rates.split(",")]
    with services() as env:
        asyncio.run(run(args, env, fresh_database(env_or(env, "DATABASE_URL"))))


if __name__ == "__main__":
    main()
