"""Realtime delivery: mutation response → receipt at every subscriber, and memory per idle subscription,
each beside the WebSocket floor (bench/ws_floor.py) measured in the same run.

One API process (`feedfabric api`, its own process so its memory is its own),
the outbox relay in this process, and real WebSocket clients here speaking
graphql-transport-ws (websockets' sans-I/O client on bare asyncio transports,
bench/_wsclient.py). First the floor: a bare Starlette WebSocket endpoint
under the same uvicorn, its CPU per send_text (one after another, and each in a
task of its own) and RSS per idle connection.
Then, in the API's fresh process, idle subscriptions up to each count of
IDLE: the RSS growth over the count is the cost per subscription. Then
delivery: SUBSCRIBERS members follow a poster and subscribe to homeTimeline;
the poster creates POSTS posts one after another and each subscriber's
receipt time minus the createPost response time is one sample (p50/p99 over
all samples); API CPU over the posts per delivered event. Delivery runs
twice: a selection that reads nothing about the viewer (rendered once for
all) and the same selection with `viewerHasLiked` (rendered once per value
of it: feedfabric.adapter.execution.live.LikedRenderer).
Last, the same posts with no subscriber connected (each post's own share of
an event) and ten seconds with nothing to do (the idle process's background).
Clients and server share the machine's cores, so the figures include the
clients' own scheduling (their CPU per message is printed). Runs on a
private devstack unless DATABASE_URL / REDIS_URL / KAFKA_BOOTSTRAP_SERVERS
are set.

    .venv/bin/python bench/realtime.py [--subscribers 1000] [--posts 20] [--idle 1000 10000]

Targets (issue 37): at most 60 us of API CPU per delivered event and at most 1.5x the floor's CPU per
send (printed against both of the floor's sends: one after another, and each in a task of its own),
p99 < 250 ms at 1,000 subscribers; an idle subscription at most 1.2x the floor's idle connection.
The latest figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.core.auth import issue_token  # noqa: E402
from feedfabric.core.ids import new_id  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from feedfabric.workers.relay import Relay  # noqa: E402

from bench import ws_floor  # noqa: E402
from bench._stack import env_or, fresh_database, services  # noqa: E402
from bench._wsclient import OnMessage, Subscriber, connect  # noqa: E402
from bench.ws_floor import idle_growth  # noqa: E402

SUB = "subscription { homeTimeline { cursor post { id content author { username } } } }"
VIEWER_SUB = "subscription { homeTimeline { cursor post { id content viewerHasLiked author { username } } } }"
CREATE = "mutation($c: String!) { createPost(input: {content: $c}) { id } }"
SECRET = "bench-secret-" + uuid.uuid4().hex


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def make_members(pool: asyncpg.Pool, count: int, follow: uuid.UUID | None) -> list[str]:
    """Members (external ID = username) in one statement, optionally all following `follow`."""
    ids = [new_id() for _ in range(count)]
    names = [f"m{i.hex[-12:]}" for i in ids]
    await pool.execute(
        "INSERT INTO members (id, external_id, username, display_name)"
        " SELECT i, n, n, n FROM unnest($1::uuid[], $2::text[]) AS t(i, n)",
        ids,
        names,
    )
    if follow is not None:
        await pool.execute(
            "INSERT INTO follows (follower_id, target_type, target_id) SELECT f, 'member', $2 FROM unnest($1::uuid[]) f",
            ids,
            str(follow),
        )
    return names


async def open_sub(port: int, name: str, query: str = SUB) -> Subscriber:
    conn = await connect(f"ws://127.0.0.1:{port}/graphql", "graphql-transport-ws", "127.0.0.1", port)
    token = issue_token(SECRET, name, ttl=7200)
    conn.send_text(json.dumps({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}}))
    ack = json.loads(await asyncio.wait_for(conn.messages.get(), 30))
    assert ack["type"] == "connection_ack", ack
    conn.send_text(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
    return conn


async def open_many(port: int, names: list[str], parallel: int = 100, query: str = SUB) -> list[Subscriber]:
    conns: list[Subscriber] = []
    for i in range(0, len(names), parallel):
        conns += await asyncio.gather(*(open_sub(port, n, query) for n in names[i : i + parallel]))
    return conns


async def close_all(conns: list[Subscriber]) -> None:
    for conn in conns:
        conn.close()
    await asyncio.wait([asyncio.ensure_future(c.closed) for c in conns], timeout=30)


POST_ID = b'"post":{"id":"'


def receiver(seen: dict[str, list[float]], raw_messages: list[bytes]) -> OnMessage:
    """Records each message's receipt time under the post ID it carries, found by a bytes search.

    The 1,000 clients share this process (and the machine's two cores) with the API: a full
    JSON decode per message put client-side queueing into the latency. Every message is kept
    and checked after the run (`check_messages`), so nothing unparsed counts as received.
    """

    def on_message(raw: bytes, at: float) -> None:
        start = raw.find(POST_ID)
        if start < 0:
            return
        start += len(POST_ID)
        seen.setdefault(raw[start : raw.index(b'"', start)].decode(), []).append(at)
        raw_messages.append(raw)

    return on_message


def check_messages(raw_messages: list[bytes]) -> None:
    """The deferred parse: every counted message is a well-formed `next` carrying the post it was counted for."""
    for raw in raw_messages:
        message = json.loads(raw)
        assert message["type"] == "next" and message["id"] == "1", message
        timeline = message["payload"]["data"]["homeTimeline"]
        assert timeline["cursor"] == timeline["post"]["id"] and timeline["post"]["author"]["username"], message
        start = raw.index(POST_ID) + len(POST_ID)
        assert raw[start : raw.index(b'"', start)].decode() == timeline["post"]["id"], message


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(args: argparse.Namespace, env: dict[str, str], database_url: str) -> None:
    prefix = f"bench{uuid.uuid4().hex[:8]}."
    settings = Settings(
        database_url=database_url,
        redis_url=env_or(env, "REDIS_URL"),
        kafka_bootstrap_servers=env_or(env, "KAFKA_BOOTSTRAP_SERVERS"),
        feedfabric_jwt_secret=SECRET,
        kafka_topic_prefix=prefix,
        outbox_idle_ms=50,
    )
    floor = (
        ws_floor.Floor(0, float("nan"), float("nan"), {})
        if args.no_floor
        else await ws_floor.measure(args.subscribers, args.posts, tuple(args.idle))
    )
    alone = idle = float("nan")
    port = free_port()
    api_env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": settings.redis_url or "",
        "KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers or "",
        "FEEDFABRIC_JWT_SECRET": SECRET,
        "KAFKA_TOPIC_PREFIX": prefix,
        "LOG_LEVEL": "WARNING",
        "RATE_LIMIT_OPERATIONS": "1000000",
        "RATE_LIMIT_COST": "1000000000000",
    }
    # --profile: the API under cProfile (its figures then include the profiler's own cost; read the ranks).
    profiler = ["-m", "cProfile", "-o", args.profile] if args.profile else []
    api = subprocess.Popen([sys.executable, *profiler, "-m", "feedfabric", "api", "--port", str(port)], env=api_env)
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=4)
    stop = asyncio.Event()
    relay_task = asyncio.create_task(Relay(settings).run(stop))
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            for _ in range(300):
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            await asyncio.sleep(3)  # the realtime consumer joins its group and takes the latest offsets
            poster_name = (await make_members(pool, 1, None))[0]
            poster_id = await pool.fetchval("SELECT id FROM members WHERE external_id = $1", poster_name)
            poster = {"Authorization": f"Bearer {issue_token(SECRET, poster_name, ttl=7200)}"}
            idle_rss = rss_bytes(api.pid)

            # Idle subscriptions first, in the fresh process (as the floor measures its idle connections).
            idle_names = await make_members(pool, max(args.idle), None) if args.idle else []
            opened: list[Subscriber] = []

            async def open_idle(count: int) -> list[Subscriber]:
                more = await open_many(port, idle_names[len(opened) : len(opened) + count], parallel=200)
                opened.extend(more)
                return more

            per_idle = await idle_growth(api.pid, open_idle, tuple(args.idle)) if args.idle else {}

            names = await make_members(pool, args.subscribers, poster_id)
            runs = []
            variants = {
                "shared": ("shared selection", SUB),
                "viewer": ("per-viewer selection (viewerHasLiked)", VIEWER_SUB),
            }
            for label, query in (variants[v] for v in args.variants):
                runs.append((label, await deliver(args, http, pool, api.pid, port, names, poster, query)))
            alone = await posts_alone(args, http, api.pid, poster)
            idle = await idle_cpu(api.pid)
    finally:
        stop.set()
        await asyncio.wait_for(relay_task, 30)
        await pool.close()
        # SIGINT: uvicorn re-raises it after its shutdown, and cProfile writes its file on the way out.
        api.send_signal(signal.SIGINT) if args.profile else api.terminate()
        api.wait(60)
    print(floor)
    fixed = alone / args.subscribers
    print(
        f"a post with no subscriber: {alone:.0f} us API CPU, {fixed:.1f} us per event at {args.subscribers} subscribers"
        f" (of it, the idle process's background over the post's {ALONE_GAP * 1000:.0f} ms: "
        f"{idle * ALONE_GAP:.0f} us; an idle API process spends {idle / 1000:.1f} ms of CPU a second)"
    )
    for label, figures in runs:
        print(
            f"{label}: {figures} -> {figures.cpu_us / floor.us_per_send:.2f}x the floor's CPU per send, "
            f"{figures.cpu_us / floor.us_per_task_send:.2f}x per send in a task"
        )
        beyond = figures.cpu_us - fixed
        print(
            f"  less the post's own share: {beyond:.1f} us per event -> {beyond / floor.us_per_send:.2f}x the floor, "
            f"{beyond / floor.us_per_task_send:.2f}x per send in a task"
        )
    for count, per in per_idle.items():
        ratio = per / floor.bytes_per_idle[count] if floor.bytes_per_idle.get(count) else float("nan")
        print(
            f"memory, {count:,} idle subscriptions: {per / 1000:.1f} kB RSS per subscription "
            f"(process at start {idle_rss / 2**20:.0f} MB) -> {ratio:.2f}x the floor's idle connection"
        )
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


@dataclass
class Delivery:
    subscribers: int
    posts: int
    samples: list[float]
    firsts: list[float]
    spreads: list[float]
    missing: int
    api_user: float
    api_sys: float
    clients: float

    @property
    def cpu_us(self) -> float:
        return self.api_user + self.api_sys

    def __str__(self) -> str:
        samples = self.samples
        return (
            f"{self.subscribers} subscribers x {self.posts} posts, mutation response -> receipt: "
            f"p50 {pct(samples, 0.5):.1f} ms, p99 {pct(samples, 0.99):.1f} ms, max {max(samples):.1f} ms, "
            f"first receipt of each post median {statistics.median(self.firsts):.1f} ms, "
            f"first-to-last receipt spread median {statistics.median(self.spreads):.1f} ms, missing {self.missing}; "
            f"API CPU {self.cpu_us:.1f} us per delivered event ({self.api_user:.1f} user + {self.api_sys:.1f} system); "
            f"clients and relay {self.clients:.0f} us per received event"
        )


ALONE_GAP = 0.25  # seconds between the posts with no subscriber


async def posts_alone(args: argparse.Namespace, http: httpx.AsyncClient, pid: int, poster: dict[str, str]) -> float:
    """API CPU (µs) per post with no subscriber connected: the createPost request, the relay's records
    consumed, the background of an idle process over the same wall time. Every delivered event of a post
    carries 1/SUBSCRIBERS of it, which no WebSocket floor has."""
    await settled(pid)
    api_cpu = psutil.Process(pid)
    before = after = api_cpu.cpu_times()
    for i in range(args.posts + 1):
        if i == 1:
            before = api_cpu.cpu_times()
        await http.post("/graphql", json={"query": CREATE, "variables": {"c": f"alone {i}"}}, headers=poster)
        await asyncio.sleep(ALONE_GAP)
    after = api_cpu.cpu_times()
    return (after.user + after.system - before.user - before.system) * 1e6 / args.posts


async def idle_cpu(pid: int, seconds: float = 10) -> float:
    """API CPU (µs) a second with nothing to do: its timers, and its consumers' fetches that come back
    empty after REALTIME_FETCH_WAIT_MS."""
    await settled(pid)
    process = psutil.Process(pid)
    before = process.cpu_times()
    await asyncio.sleep(seconds)
    after = process.cpu_times()
    return (after.user + after.system - before.user - before.system) * 1e6 / seconds


async def settled(pid: int, busy: float = 0.1, timeout: float = 60) -> None:
    """Waits until the API process uses under `busy` of a core over half a second: what an earlier phase
    left running (10,000 idle sockets closing, their leases released) is not counted against delivery."""
    process = psutil.Process(pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = sum(process.cpu_times()[:2])
        await asyncio.sleep(0.5)
        if sum(process.cpu_times()[:2]) - before < busy * 0.5:
            return


async def deliver(
    args: argparse.Namespace,
    http: httpx.AsyncClient,
    pool: asyncpg.Pool,
    pid: int,
    port: int,
    names: list[str],
    poster: dict[str, str],
    query: str,
) -> Delivery:
    """POSTS posts, one after another, to SUBSCRIBERS followers subscribed with `query`."""
    conns = await open_many(port, names, query=query)
    seen: dict[str, list[float]] = {}
    raw_messages: list[bytes] = []
    on_message = receiver(seen, raw_messages)
    for c in conns:
        c.on_message = on_message
    await asyncio.sleep(2)
    await settled(pid)
    samples: list[float] = []
    firsts: list[float] = []  # per post, its first receipt: the fixed part (relay, broker, consumer)
    spreads: list[float] = []
    missing = 0
    api_cpu = psutil.Process(pid)
    cpu_before = api_cpu.cpu_times()
    bench_cpu = psutil.Process()
    bench_before = bench_cpu.cpu_times()
    for i in range(args.posts + 1):
        if i == 1:
            cpu_before, bench_before = api_cpu.cpu_times(), bench_cpu.cpu_times()
        response = await http.post(
            "/graphql", json={"query": CREATE, "variables": {"c": f"bench post {i}"}}, headers=poster
        )
        responded = time.monotonic()
        post_id = response.json()["data"]["createPost"]["id"]
        deadline = time.monotonic() + 10
        while len(seen.get(post_id, [])) < len(conns) and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        got = seen.get(post_id, [])
        if i == 0:
            continue  # warm-up: first execution of the query, caches, connections
        missing += len(conns) - len(got)
        samples += [(t - responded) * 1000 for t in got]
        firsts.append((min(got) - responded) * 1000 if got else float("nan"))
        spreads.append((max(got) - min(got)) * 1000 if got else float("nan"))
        await asyncio.sleep(0.2)
    # The idle gaps cost next to nothing, so this is the work of creating and delivering the posts.
    cpu_after, bench_after = api_cpu.cpu_times(), bench_cpu.cpu_times()
    per = 1e6 / max(len(samples), 1)
    check_messages(raw_messages)
    await close_all(conns)
    await asyncio.sleep(2)
    return Delivery(
        subscribers=len(conns),
        posts=args.posts,
        samples=samples,
        firsts=firsts,
        spreads=spreads,
        missing=missing,
        api_user=(cpu_after.user - cpu_before.user) * per,
        api_sys=(cpu_after.system - cpu_before.system) * per,
        clients=(bench_after.user + bench_after.system - bench_before.user - bench_before.system) * per,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--posts", type=int, default=20)
    parser.add_argument("--idle", type=int, nargs="*", default=[1000, 10_000])
    parser.add_argument("--profile", help="write the API process's cProfile statistics to this file")
    parser.add_argument("--variants", nargs="+", choices=["shared", "viewer"], default=["shared", "viewer"])
    parser.add_argument("--no-floor", action="store_true", help="skip the floor (with --profile)")
    args = parser.parse_args()
    with services() as env:
        asyncio.run(run(args, env, fresh_database(env_or(env, "DATABASE_URL"))))


if __name__ == "__main__":
    main()
