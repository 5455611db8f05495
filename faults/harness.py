"""The fault suite's machinery: real services and `feedfabric` processes on loopback, a workload, waits.

Every case gets a fresh database (on a shared Postgres, or its own when the
case restarts Postgres), its own Redis and broker, and its own `feedfabric
api`, `relay` and `worker` subprocesses with the effect log on
(FEEDFABRIC_EFFECT_LOG). Writes go through the API over HTTP; the harness
records which were acknowledged, so the checker can tell a lost write from an
indeterminate one (a request that died with the process serving it).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from feedfabric.core.auth import issue_token
from feedfabric.db.migrate import migrate
from feedfabric.ops import devstack

SECRET = "fault-suite-secret-of-at-least-32-bytes"


def process_env(
    database_url: str, redis_url: str, kafka_url: str, effect_dir: Path, settings: dict[str, str]
) -> dict[str, str]:
    """The environment of every feedfabric process a fault run starts: its services, the effect log the
    checker reads, limits out of the load's way, and fast retries; `settings` add to it or override it."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "KAFKA_BOOTSTRAP_SERVERS": kafka_url,
        "FEEDFABRIC_JWT_SECRET": SECRET,
        "FEEDFABRIC_EFFECT_LOG": str(effect_dir),
        "METRICS_PORT": "0",
        "LOG_FORMAT": "text",
        "OUTBOX_IDLE_MS": "50",
        "RATE_LIMIT_OPERATIONS": "1000000",
        "RATE_LIMIT_COST": "1000000000000",
        "REDIS_BREAKER_COOLDOWN_MS": "500",
        "HF_HUB_OFFLINE": "1",
        **settings,
    }


GROUPS = ("worker-events", "worker-notifications", "worker-engagement")


# -- Services -------------------------------------------------------------------


async def create_database(server_url: str) -> str:
    base, _, _ = server_url.rpartition("/")
    name = f"faults_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(f"{base}/postgres")
    try:
        await admin.execute(f"CREATE DATABASE {name}")
    finally:
        await admin.close()
    url = f"{base}/{name}"
    await migrate(url)
    return url


# -- Processes ------------------------------------------------------------------


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    ended_by_harness: bool = False

    def died_unexpectedly(self) -> bool:
        """Exited on its own, other than by an armed crash point (SIGKILL)."""
        code = self.popen.poll()
        return code is not None and not self.ended_by_harness and code != -signal.SIGKILL

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.popen.pid, sig)

    def stop(self, timeout: float = 10.0) -> None:
        if not self.alive():
            return
        self.ended_by_harness = True
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()

    def kill(self) -> None:
        self.ended_by_harness = True
        if self.alive():
            self.popen.kill()
        self.popen.wait()


@dataclass
class Case:
    """One fault case's world: services, processes, settings, and the workload's record."""

    name: str
    work_dir: Path
    pg_server: str
    database_url: str = ""
    redis: devstack.Service | None = None
    kafka: devstack.Service | None = None
    api_port: int = 0
    procs: list[Proc] = field(default_factory=list)
    env_extra: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def effect_dir(self) -> Path:
        return self.work_dir / "effects"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def env(self, **extra: str) -> dict[str, str]:
        assert self.redis is not None and self.kafka is not None
        return process_env(
            self.database_url,
            self.redis.url,
            self.kafka.url,
            self.effect_dir,
            {"KAFKA_SESSION_TIMEOUT_MS": "3000", "KAFKA_HEARTBEAT_INTERVAL_MS": "500", **self.env_extra, **extra},
        )

    def spawn(self, name: str, *argv: str, **env: str) -> Proc:
        log = self.work_dir / "logs" / f"{name}-{len(self.procs)}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
            popen = subprocess.Popen(
                [sys.executable, "-m", "feedfabric", *argv],
                env=self.env(**env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=devstack.die_with_parent(signal.SIGKILL),
            )
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def relay(self, **env: str) -> Proc:
        return self.spawn("relay", "relay", **env)

    def worker(self, *groups: str, **env: str) -> Proc:
        args = [a for g in (groups or GROUPS) for a in ("--group", g)]
        return self.spawn("worker", "worker", *args, **env)

    def api(self, **env: str) -> Proc:
        if not self.api_port:
            self.api_port = devstack.free_port()
        return self.spawn("api", "api", "--port", str(self.api_port), **env)

    async def wait_api(self, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2) as client:
            while time.monotonic() < deadline:
                try:
                    if (await client.get(self.api_url + "/healthz")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.name}: the API did not come up")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        for service in (self.kafka, self.redis):
            if service is not None:
                service.stop()

    def live(self, name: str) -> list[Proc]:
        return [p for p in self.procs if p.name == name and p.alive()]


async def open_case(
    name: str, root: Path, pg_server: str, *, env: dict[str, str] | None = None, workers: int = 1, relays: int = 1
) -> Case:
    """A fresh database, Redis and broker, an API, `relays` relays and `workers` workers (all groups)."""
    work = root / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    case = Case(name, work, pg_server, env_extra=dict(env or {}))
    case.database_url = await create_database(pg_server)
    case.redis = devstack.start_redis(work / "redis")
    case.kafka = devstack.start_kafka(work / "kafka")
    case.api()
    for _ in range(relays):
        case.relay()
    for _ in range(workers):
        case.worker()
    await case.wait_api()
    return case


# -- Workload -------------------------------------------------------------------


@dataclass
class Record:
    """What clients were told: acknowledged writes, and requests whose outcome is unknown."""

    posts: dict[str, str] = field(default_factory=dict)  # post ID -> author external ID
    post_sent_at: dict[str, float] = field(default_factory=dict)
    likes: set[tuple[str, str]] = field(default_factory=set)  # (member external ID, post ID)
    unliked: set[tuple[str, str]] = field(default_factory=set)  # acknowledged last as unliked
    failed: int = 0
    reads: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)

    def fail(self, what: str) -> None:
        self.failed += 1
        self.errors[what] = self.errors.get(what, 0) + 1


class Client:
    """GraphQL/REST over one HTTP connection pool to the case's API."""

    def __init__(self, base_url: str) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, timeout=10, limits=httpx.Limits(max_connections=200))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def gql(self, who: str, query: str, variables: dict[str, Any] | None = None) -> Any:
        response = await self.http.post(
            "/graphql",
            json={"query": query, "variables": variables or {}},
            headers={"Authorization": f"Bearer {issue_token(SECRET, who, ttl=3600)}"},
        )
        body = response.json()
        if body.get("errors"):
            raise RuntimeError(str(body["errors"])[:300])
        return body["data"]

    async def member(self, name: str) -> None:
        await self.gql(
            name, "mutation($u: String!) { upsertProfile(username: $u, displayName: $u) { id } }", {"u": name}
        )

    async def follow(self, who: str, target: str) -> None:
        await self.gql(who, "mutation($e: String!) { follow(externalUserId: $e) { id } }", {"e": target})

    async def post(self, who: str, content: str) -> str:
        data = await self.gql(who, "mutation($c: String!) { createPost(input: {content: $c}) { id } }", {"c": content})
        return str(data["createPost"]["id"])

    async def like(self, who: str, post_id: str, on: bool = True) -> None:
        field_ = "likePost" if on else "unlikePost"
        await self.gql(who, f"mutation($p: ID!) {{ {field_}(postId: $p) {{ id }} }}", {"p": post_id})

    async def home(self, who: str, limit: int = 30) -> list[str]:
        response = await self.http.get(
            "/userfeed/home",
            params={"limit": limit},
            headers={"Authorization": f"Bearer {issue_token(SECRET, who, ttl=3600)}"},
        )
        response.raise_for_status()
        return [p["id"] for p in response.json()["posts"]]


def member_names(count: int) -> list[str]:
    return [f"m{i:03d}" for i in range(count)]


async def retrying(action: Callable[[], Awaitable[Any]], attempts: int = 40) -> Any:
    """For set-up steps during faults: idempotent actions retried until the API answers."""
    for attempt in range(attempts):
        try:
            return await action()
        except (httpx.HTTPError, RuntimeError, ValueError):
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.25)


async def setup_graph(client: Client, members: int, follows_each: int, seed: int = 7) -> list[str]:
    """Members and a follow graph, before any post, so every follow predates every post."""
    names = member_names(members)
    rng = random.Random(seed)
    await asyncio.gather(*(retrying(lambda n=n: client.member(n)) for n in names))
    pairs = [(n, t) for n in names for t in rng.sample([x for x in names if x != n], follows_each)]
    sem = asyncio.Semaphore(20)

    async def one(who: str, target: str) -> None:
        async with sem:
            await retrying(lambda: client.follow(who, target))

    await asyncio.gather(*(one(w, t) for w, t in pairs))
    return names


async def run_load(
    client: Client,
    names: list[str],
    record: Record,
    seconds: float,
    *,
    writers: int = 8,
    readers: int = 2,
    like_share: float = 0.3,
    stop: asyncio.Event | None = None,
) -> None:
    """Writers post and like, readers read home feeds, until `seconds` pass or `stop` is set."""
    deadline = time.monotonic() + seconds
    stop = stop or asyncio.Event()
    rng = random.Random()

    def running() -> bool:
        return time.monotonic() < deadline and not stop.is_set()

    async def writer(i: int) -> None:
        n = 0
        while running():
            who = rng.choice(names)
            n += 1
            if record.posts and rng.random() < like_share:
                post_id = rng.choice(list(record.posts))
                try:
                    await client.like(who, post_id)
                    record.likes.add((who, post_id))
                except Exception as exc:  # noqa: BLE001 - outcome unknown, counted
                    record.fail(type(exc).__name__)
                    await asyncio.sleep(0.05)
                continue
            content = f"post {i}-{n} by {who}"
            sent = time.time()
            try:
                post_id = await client.post(who, content)
                record.posts[post_id] = who
                record.post_sent_at[post_id] = sent
            except Exception as exc:  # noqa: BLE001
                record.fail(type(exc).__name__)
                await asyncio.sleep(0.05)

    async def reader() -> None:
        while running():
            started = time.perf_counter()
            try:
                await client.home(rng.choice(names))
                record.reads.append(time.perf_counter() - started)
            except Exception as exc:  # noqa: BLE001
                record.fail("read " + type(exc).__name__)
                await asyncio.sleep(0.05)

    await asyncio.gather(*(writer(i) for i in range(writers)), *(reader() for _ in range(readers)))


# -- Waiting for the pipeline ---------------------------------------------------

_BACKLOG = r"""
SELECT
  (SELECT count(*) FROM outbox WHERE published_at IS NULL) AS unpublished,
  (SELECT count(*) FROM outbox o WHERE o.event_type = ANY($1::text[]) AND NOT EXISTS
     (SELECT 1 FROM processed_events p WHERE p.group_name = 'worker-events' AND p.event_id = o.id)
     AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.group_name = 'worker-events'
                     AND substring(d.payload from '"eventId":(\d+)')::bigint = o.id)) AS events,
  (SELECT count(*) FROM outbox o WHERE o.event_type = ANY($2::text[]) AND NOT EXISTS
     (SELECT 1 FROM processed_events p WHERE p.group_name = 'worker-notifications' AND p.event_id = o.id)
     AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.group_name = 'worker-notifications'
                     AND substring(d.payload from '"eventId":(\d+)')::bigint = o.id)) AS notifications,
  (SELECT count(*) FROM outbox o WHERE o.event_type = ANY($3::text[]) AND NOT EXISTS
     (SELECT 1 FROM processed_events p WHERE p.group_name = 'worker-engagement' AND p.event_id = o.id)
     AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.group_name = 'worker-engagement'
                     AND substring(d.payload from '"eventId":(\d+)')::bigint = o.id)) AS engagement
"""


def group_types() -> dict[str, list[str]]:
    from feedfabric.workers.groups import all_groups

    groups = all_groups()
    return {g: sorted(groups[g].event_types) for g in GROUPS}


async def backlog(database_url: str) -> dict[str, int]:
    types = group_types()
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow(
            _BACKLOG, types["worker-events"], types["worker-notifications"], types["worker-engagement"]
        )
    finally:
        await conn.close()
    assert row is not None
    return dict(row)


async def quiesce(case: Case, timeout: float = 90.0) -> float:
    """Waits until every event is published and handled (or parked) by every group; returns seconds waited."""
    started = time.monotonic()
    last: dict[str, int] = {}
    while time.monotonic() - started < timeout:
        try:
            last = await backlog(case.database_url)
            if not any(last.values()):
                return time.monotonic() - started
        except (OSError, asyncpg.PostgresError):
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{case.name}: pipeline did not drain within {timeout:.0f}s: {last}")


async def probe(case: Case, client: Client, who: str, timeout: float = 90.0) -> float:
    """Seconds until a post written now (retried until the API takes it) is in its author's Redis timeline."""
    import redis.asyncio as aioredis
    from feedfabric.feeds.timelines import encode_member, feed_key

    started = time.monotonic()
    post_id = await retrying(lambda: client.post(who, "probe"), attempts=int(timeout * 4))
    member = await retrying(lambda: _member_id(case, who), attempts=int(timeout * 4))
    assert case.redis is not None
    redis = aioredis.from_url(case.redis.url, socket_timeout=1)
    try:
        while time.monotonic() - started < timeout:
            try:
                if await redis.zscore(feed_key(member), encode_member(post_id)) is not None:
                    return time.monotonic() - started
            except Exception:  # noqa: BLE001 - Redis may still be coming back
                pass
            await asyncio.sleep(0.05)
    finally:
        await redis.aclose()
    raise TimeoutError(f"{case.name}: the probe post never reached its timeline")


async def _member_id(case: Case, who: str) -> str:
    conn = await asyncpg.connect(case.database_url)
    try:
        return str(await conn.fetchval("SELECT id FROM members WHERE external_id = $1", who))
    finally:
        await conn.close()


def run_verify(case: Case) -> tuple[int, str]:
    """`feedfabric verify` as an operator runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "feedfabric", "verify"], env=case.env(), capture_output=True, text=True, timeout=120
    )
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, "\n".join(lines[-6:])
