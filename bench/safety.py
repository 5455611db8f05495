"""Safety's cost: what blocks, mutes and muted words add to a home page and to a live item, as ratios in one run.

Three figures, each a ratio against the same work without the relations, measured in one process on
the same data and interleaved (so a noisy neighbour on the shared machine hits both sides alike):

1. Home page CPU for a viewer with 10,000 blocks and 1,000 muted words, against a viewer with none,
   on the same timeline (both follow the same 200 authors; their Redis timelines hold the same
   entries). Target: at most 1.3x.
2. A home page where 80 % of the timeline's entries are from muted authors: always a full page (checked
   on every page), CPU against an unfiltered page of the same timeline. Target: at most 3x.
3. Live delivery: CPU per delivered event to 1,000 connected subscribers, each with 100 blocks and 20
   muted words, against 1,000 with none (realtime.delivery.deliver into the hub, the subscribers'
   relations held in memory as the realtime consumer holds them). Target: at most 1.15x.

The pages are GET /userfeed/home?limit=20 through the real app over ASGI in this process, so each
figure is the process's CPU (time.process_time) per page: the API's work plus the in-process client's,
the same on both sides of each ratio (which makes a ratio lower than the API's alone would be: the
client's share is printed, from a page with the API's work removed, so the API-only ratio can be read
off too). The live figure is the consumer's work for one event (hydrate, route, filter, publish),
without the sockets' writes, which are the same for both sides.

    .venv/bin/python bench/safety.py [--pages 300] [--events 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.app import create_app  # noqa: E402
from feedfabric.core.auth import issue_token  # noqa: E402
from feedfabric.core.events import Event  # noqa: E402
from feedfabric.core.ids import id_millis  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from feedfabric.db.pool import create_pool, transaction  # noqa: E402
from feedfabric.db.redisclient import create_redis  # noqa: E402
from feedfabric.feeds import timelines  # noqa: E402
from feedfabric.feeds.relations import RelationsCache  # noqa: E402
from feedfabric.realtime.delivery import deliver  # noqa: E402
from feedfabric.realtime.hub import Channel, Hub  # noqa: E402

from bench._stack import fresh_database, services  # noqa: E402

SECRET = "bench-secret-" + uuid.uuid4().hex
AUTHORS = 200
POSTS_EACH = 50
OTHERS = 10_000
SUBSCRIBERS = 1_000
DAY_MS = 86_400_000


def uuid7_at(ms: int, rng: random.Random) -> uuid.UUID:
    value = (ms << 80) | (0x7 << 76) | (rng.getrandbits(12) << 64) | (0b10 << 62) | rng.getrandbits(62)
    return uuid.UUID(int=value)


async def load(pool: asyncpg.Pool) -> None:
    """Authors, others, viewers and subscribers; the authors' posts; the viewers' follows and relations."""
    rng = random.Random(48)
    await pool.execute(
        """INSERT INTO members (id, external_id, username, display_name)
           SELECT gen_random_uuid(), n, n, n FROM (
               SELECT 'a' || g AS n FROM generate_series(1, $1) g
               UNION ALL SELECT 'o' || g FROM generate_series(1, $2) g
               UNION ALL SELECT 's' || g FROM generate_series(1, $3) g
               UNION ALL SELECT 'q' || g FROM generate_series(1, $3) g
               UNION ALL SELECT unnest(ARRAY['plain', 'heavy', 'muting'])) x""",
        AUTHORS,
        OTHERS,
        SUBSCRIBERS,
    )
    ids = {r["username"]: r["id"] for r in await pool.fetch("SELECT id, username FROM members")}
    now = int(time.time() * 1000)
    rows = []
    for a in range(1, AUTHORS + 1):
        for n in range(POSTS_EACH):
            at = now - rng.randrange(10 * DAY_MS)
            rows.append((uuid7_at(at, rng), ids[f"a{a}"], f"post {n} of a{a} about things #t{n % 7}", "live"))
    async with pool.acquire() as conn:
        await conn.copy_records_to_table("posts", records=rows, columns=["id", "author_id", "content", "status"])
    await pool.execute(
        """INSERT INTO follows (follower_id, target_type, target_id)
           SELECT v.id, 'member', a.id::text FROM members v, members a
           WHERE v.username IN ('plain', 'heavy', 'muting') AND a.username LIKE 'a%'""",
    )
    # 10,000 blocks and 1,000 muted words (none of them in the timeline: the page is full either way).
    await pool.execute(
        """INSERT INTO blocks (blocker_id, blocked_id)
           SELECT $1, id FROM members WHERE username LIKE 'o%'""",
        ids["heavy"],
    )
    await pool.execute(
        """INSERT INTO muted_words (id, member_id, phrase)
           SELECT gen_random_uuid(), $1, 'zq' || md5(g::text) FROM generate_series(1, 1000) g""",
        ids["heavy"],
    )
    # 80 % of the authors muted.
    await pool.execute(
        """INSERT INTO mutes (muter_id, muted_id)
           SELECT $1, id FROM members WHERE username LIKE 'a%' AND substring(username, 2)::int <= $2""",
        ids["muting"],
        AUTHORS * 8 // 10,
    )
    # Subscribers follow a1; each s-subscriber has 100 blocks and 20 words, the q-subscribers none.
    await pool.execute(
        """INSERT INTO follows (follower_id, target_type, target_id)
           SELECT s.id, 'member', $1::text FROM members s WHERE s.username LIKE 's%' OR s.username LIKE 'q%'""",
        str(ids["a1"]),
    )
    await pool.execute(
        """INSERT INTO blocks (blocker_id, blocked_id)
           SELECT s.id, o.id
           FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM members WHERE username LIKE 's%') s
           JOIN (SELECT id, row_number() OVER (ORDER BY id) AS n FROM members WHERE username LIKE 'o%') o
             ON o.n > (s.n * 37) % 9900 AND o.n <= (s.n * 37) % 9900 + 100"""
    )
    await pool.execute(
        """INSERT INTO muted_words (id, member_id, phrase)
           SELECT gen_random_uuid(), s.id, 'zq' || md5(s.id::text || g::text)
           FROM members s, generate_series(1, 20) g WHERE s.username LIKE 's%'"""
    )
    await pool.execute(
        "UPDATE members SET relations_version = 1 WHERE username IN ('heavy', 'muting') OR username LIKE 's%'"
    )
    await pool.execute("ANALYZE")


async def pages_cpu(client: httpx.AsyncClient, token: str, pages: int) -> tuple[float, int]:
    """CPU seconds for `pages` first pages, and the shortest page seen."""
    headers = {"Authorization": f"Bearer {token}"}
    shortest = 10**9
    start = time.process_time()
    for _ in range(pages):
        response = await client.get("/userfeed/home?limit=20", headers=headers)
        body = response.json()
        shortest = min(shortest, len(body["posts"]))
    return time.process_time() - start, shortest


async def client_floor(client: httpx.AsyncClient, pages: int) -> float:
    """CPU per request of the in-process client and the app's edge with no feed work (/healthz)."""
    start = time.process_time()
    for _ in range(pages):
        await client.get("/healthz")
    return (time.process_time() - start) / pages


async def home_ratios(settings: Settings, pool: asyncpg.Pool, pages: int) -> dict[str, Any]:
    redis = create_redis(settings)
    ids = {
        r["username"]: r["id"]
        for r in await pool.fetch("SELECT id, username FROM members WHERE username IN ('plain', 'heavy', 'muting')")
    }
    async with transaction(pool) as conn:
        for member in ids.values():
            await timelines.rebuild(conn, redis, settings, member)
    await redis.aclose()
    app = create_app(settings)
    tokens = {n: issue_token(SECRET, n) for n in ids}
    cpu = {n: 0.0 for n in ids}
    shortest = {n: 10**9 for n in ids}
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
            for name in ids:  # warm: plans, relations read once per version, the matcher compiled
                await pages_cpu(client, tokens[name], 20)
            rounds = 10
            for _ in range(rounds):
                for name in ids:
                    spent, short = await pages_cpu(client, tokens[name], pages // rounds)
                    cpu[name] += spent
                    shortest[name] = min(shortest[name], short)
            floor = await client_floor(client, pages)
    per = {n: cpu[n] / pages for n in ids}
    return {
        "plain_ms": per["plain"] * 1000,
        "heavy_ms": per["heavy"] * 1000,
        "muting_ms": per["muting"] * 1000,
        "floor_ms": floor * 1000,
        "heavy_ratio": per["heavy"] / per["plain"],
        "heavy_ratio_api": (per["heavy"] - floor) / (per["plain"] - floor),
        "muting_ratio": per["muting"] / per["plain"],
        "muting_ratio_api": (per["muting"] - floor) / (per["plain"] - floor),
        "muting_shortest": shortest["muting"],
        "heavy_shortest": shortest["heavy"],
    }


async def postgres_times(pool: asyncpg.Pool) -> dict[str, float]:
    """Postgres's own time for the home page's hydration of 100 timeline entries (EXPLAIN ANALYZE), per
    viewer: what the rule costs the database, which the figures above (this process's CPU) leave out."""
    ids = [r["id"] for r in await pool.fetch("SELECT id FROM posts ORDER BY id DESC LIMIT 100")]
    found: dict[str, float] = {}
    for name in ("plain", "heavy", "muting"):
        viewer = await pool.fetchval("SELECT id FROM members WHERE username = $1", name)
        best = float("inf")
        for _ in range(20):
            plan = await pool.fetchval(
                "EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM feed_posts($1) WHERE id = ANY($2::uuid[])", viewer, ids
            )
            parsed = json.loads(plan) if isinstance(plan, str) else plan  # the pool decodes json itself
            best = min(best, float(parsed[0]["Execution Time"]))
        found[name] = best
    return found


async def live_ratio(pool: asyncpg.Pool, events: int) -> dict[str, Any]:
    """Both sets of 1,000 subscribers on hubs of their own, warmed, then timed in alternating rounds."""
    author = await pool.fetchval("SELECT id FROM members WHERE username = 'a1'")
    posts = [
        r["id"]
        for r in await pool.fetch("SELECT id FROM posts WHERE author_id = $1 ORDER BY id LIMIT $2", author, events)
    ]
    made = [
        Event(n + 1, "PostCreated", str(p), 1, {"postId": str(p), "authorId": str(author), "createdAtMs": id_millis(p)})
        for n, p in enumerate(posts)
    ]
    sides: dict[str, tuple[Hub, RelationsCache]] = {}
    for prefix in ("q", "s"):
        hub = Hub(queue_size=10**6)
        cache = RelationsCache(size=10_000)
        for r in await pool.fetch("SELECT id FROM members WHERE username LIKE $1", f"{prefix}%"):
            hub.add(Channel.TIMELINE, r["id"])
        await deliver(pool, hub, made[:5], cache)  # warm: plans, each subscriber's relations read once
        sides[prefix] = (hub, cache)
    cpu = {"q": 0.0, "s": 0.0}
    rounds = 10
    size = max(1, len(made) // rounds)
    for start in range(0, len(made), size):
        for prefix in ("q", "s") if start // size % 2 == 0 else ("s", "q"):
            hub, cache = sides[prefix]
            began = time.process_time()
            delivered = 0
            for event in made[start : start + size]:
                delivered += await deliver(pool, hub, [event], cache)
            cpu[prefix] += time.process_time() - began
            assert delivered == len(made[start : start + size]) * SUBSCRIBERS, delivered
    per = {k: v / len(made) for k, v in cpu.items()}
    return {"none_ms": per["q"] * 1000, "with_ms": per["s"] * 1000, "ratio": per["s"] / per["q"]}


async def run(url: str, redis_url: str, pages: int, events: int) -> None:
    settings = Settings(database_url=url, redis_url=redis_url, feedfabric_jwt_secret=SECRET, feed_log_enabled=False)
    pool = await create_pool(url, min_size=2, max_size=8)
    try:
        await load(pool)
        home = await home_ratios(settings, pool, pages)
        database = await postgres_times(pool)
        live = await live_ratio(pool, events)
    finally:
        await pool.close()
    print(f"home page, {pages} pages each (CPU per page, this process: API + in-process client)")
    print(f"  client and edge floor (/healthz)      {home['floor_ms']:.2f} ms")
    print(f"  no relations                         {home['plain_ms']:.2f} ms")
    print(
        f"  10,000 blocks + 1,000 muted words    {home['heavy_ms']:.2f} ms   ratio {home['heavy_ratio']:.2f}x"
        f" (API only {home['heavy_ratio_api']:.2f}x; target <= 1.3x); shortest page {home['heavy_shortest']}"
    )
    print(
        f"  80 % of the timeline muted           {home['muting_ms']:.2f} ms   ratio {home['muting_ratio']:.2f}x"
        f" (API only {home['muting_ratio_api']:.2f}x; target <= 3x); shortest page {home['muting_shortest']}"
    )
    print("Postgres, hydrating 100 timeline entries through feed_posts (best of 20, EXPLAIN ANALYZE)")
    for name, label in (("plain", "no relations"), ("heavy", "10,000 blocks"), ("muting", "80 % of authors muted")):
        print(f"  {label:<37}{database[name]:.2f} ms")
    print(f"live delivery to {SUBSCRIBERS} subscribers, {events} events (CPU per event)")
    print(f"  no relations                         {live['none_ms']:.2f} ms")
    print(
        f"  100 blocks + 20 muted words each     {live['with_ms']:.2f} ms   ratio {live['ratio']:.2f}x (target <= 1.15x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--events", type=int, default=60)
    args = parser.parse_args()
    logging.disable(logging.INFO)  # the access log of every page would be most of the output, and its CPU
    with services() as env:
        asyncio.run(run(fresh_database(env["DATABASE_URL"]), env["REDIS_URL"], args.pages, args.events))


if __name__ == "__main__":
    main()
