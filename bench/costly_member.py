"""What members sending operations just under GRAPHQL_MAX_COST do to everyone else, with and without the
cost budget (RATE_LIMIT_COST), side by side in one run.

    PYTHONPATH=. python bench/costly_member.py [--attackers 4] [--in-flight 2] [--seconds 20]

Loads 100 authors with 45 posts each, attackers that follow them all and a victim; then, for each
setting of RATE_LIMIT_COST, runs `feedfabric api`, measures the victim's `GET /userfeed/home` every
50 ms alone and then while the attackers send `following(first: 100) { ... posts(first: 45) ... }`
(cost 9,302, about a hundred feed pages of work) back to back but within the operation budget (600 a
minute, 10 a second each), and prints the victim's latency, the attackers' answers and the API's CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
import httpx  # noqa: E402
import psutil  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402
from feedfabric.core.auth import issue_token  # noqa: E402

from bench._stack import env_or, fresh_database, services  # noqa: E402
from bench.home_feed import free_port, pct, uuid7_at, wait_healthy  # noqa: E402

SECRET = "bench-secret"
AUTHORS, POSTS_EACH = 100, 45
OPERATIONS_PER_S = 10  # RATE_LIMIT_OPERATIONS' 600 a minute
COSTLY = """{ viewer { following(first: 100) { edges { node { followerCount followingCount
  posts(first: 45) { edges { node { likeCount commentCount } } } } } } } }"""


async def load(database_url: str, attackers: int) -> list[str]:
    """Authors with posts, attackers following every author, a victim following twenty; returns the names."""
    rng = random.Random(9)
    now_ms = int(time.time() * 1000)
    authors = [uuid7_at(now_ms - 86_400_000 + i, rng) for i in range(AUTHORS)]
    readers = [uuid7_at(now_ms - 86_000_000 + i, rng) for i in range(attackers + 1)]
    names = [f"reader{i}" for i in range(len(readers))]
    posts = []
    for author in authors:
        for _ in range(POSTS_EACH):
            pid = uuid7_at(now_ms - rng.randrange(86_000_000), rng)
            posts.append((pid, author, "a post", datetime.fromtimestamp((pid.int >> 80) / 1000, UTC)))
    follows = [(r, "member", str(a)) for r in readers[:-1] for a in authors]
    follows += [(readers[-1], "member", str(a)) for a in authors[:20]]
    conn = await asyncpg.connect(database_url)
    try:
        members = [(a, f"author{i}", f"author{i}", f"Author {i}") for i, a in enumerate(authors)]
        members += [(r, n, n, n.title()) for r, n in zip(readers, names, strict=True)]
        await conn.copy_records_to_table(
            "members", records=members, columns=["id", "external_id", "username", "display_name"]
        )
        await conn.copy_records_to_table(
            "follows", records=follows, columns=["follower_id", "target_type", "target_id"]
        )
        await conn.copy_records_to_table("posts", records=posts, columns=["id", "author_id", "content", "created_at"])
        await conn.execute("VACUUM (ANALYZE)")
    finally:
        await conn.close()
    return names


async def measure(
    api: psutil.Process, port: int, names: list[str], in_flight: int, seconds: float
) -> dict[str, object]:
    base = f"http://127.0.0.1:{port}"
    victim = {"Authorization": f"Bearer {issue_token(SECRET, names[-1], ttl=3600)}"}
    attackers = [{"Authorization": f"Bearer {issue_token(SECRET, n, ttl=3600)}"} for n in names[:-1]]
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=httpx.Limits(max_connections=100)) as client:

        async def read_home(until: float) -> list[float]:
            latencies = []
            while time.monotonic() < until:
                start = time.perf_counter()
                response = await client.get("/userfeed/home?limit=20", headers=victim)
                assert response.status_code == 200, response.text
                latencies.append(time.perf_counter() - start)
                await asyncio.sleep(0.05)
            return latencies

        async def attack(headers: dict[str, str], until: float, answers: Counter[str]) -> None:
            """Back to back, but within the operation budget: at most OPERATIONS_PER_S per attacker."""
            while time.monotonic() < until:
                sent = time.monotonic()
                body = (await client.post("/graphql", json={"query": COSTLY}, headers=headers)).json()
                answers[body["errors"][0]["extensions"]["code"] if body.get("errors") else "ok"] += 1
                await asyncio.sleep(max(0.0, in_flight / OPERATIONS_PER_S - (time.monotonic() - sent)))

        alone = await read_home(time.monotonic() + 5)
        answers: Counter[str] = Counter()
        until = time.monotonic() + seconds
        cpu = api.cpu_times()
        busy, *_ = await asyncio.gather(
            read_home(until), *(attack(h, until, answers) for h in attackers for _ in range(in_flight))
        )
        after = api.cpu_times()
    return {
        "alone": alone,
        "busy": busy,
        "answers": answers,
        "cpu_s": after.user + after.system - cpu.user - cpu.system,
    }


async def _flush(redis_url: str) -> None:
    redis = aioredis.from_url(redis_url)
    try:
        await redis.flushdb()
    finally:
        await redis.aclose()


def run(database_url: str, redis_url: str, names: list[str], cost_budget: int, args: argparse.Namespace) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "KAFKA_BOOTSTRAP_SERVERS": "",
        "FEEDFABRIC_JWT_SECRET": SECRET,
        "LOG_LEVEL": "WARNING",
        "RATE_LIMIT_COST": str(cost_budget),
    }
    asyncio.run(_flush(redis_url))  # each run starts with unspent budgets
    api = subprocess.Popen([sys.executable, "-m", "feedfabric", "api", "--port", str(port)], env=env)
    try:
        wait_healthy(port)
        r = asyncio.run(measure(psutil.Process(api.pid), port, names, args.in_flight, args.seconds))
    finally:
        api.terminate()
        api.wait(20)
    alone, busy = r["alone"], r["busy"]
    print(
        f"RATE_LIMIT_COST {cost_budget:>15,}: victim alone p50 {pct(alone, 0.5):.0f} ms; "  # type: ignore[arg-type]
        f"under attack p50 {pct(busy, 0.5):.0f} ms, p95 {pct(busy, 0.95):.0f} ms, "  # type: ignore[arg-type]
        f"max {max(busy) * 1000:.0f} ms; attackers' answers {dict(r['answers'])}; "  # type: ignore[arg-type, call-overload]
        f"API CPU {r['cpu_s']:.1f} s in {args.seconds:.0f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attackers", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    with services() as env:
        database_url = fresh_database(env_or(env, "DATABASE_URL"))
        names = asyncio.run(load(database_url, args.attackers))
        for cost_budget in (10**12, 60_000):
            run(database_url, env_or(env, "REDIS_URL"), names, cost_budget, args)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
