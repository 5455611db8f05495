"""What For You keeps in Redis for one member, and what its cursors weigh, under the operation budget.

One reader with 800 candidates (FORYOU_CANDIDATES' default, every source; see `seed`). The app runs in this process behind httpx's ASGI transport with the default rate
limit (RATE_LIMIT_OPERATIONS operations a window per member); the reader then spends a whole
window's budget on `forYouFeed(first: 1)`, each one a first page. After 1, 3, 4, 10, 100 and every
first page the benchmark counts the reader's For You keys (SCAN `foryou:{<member>}*`), their bytes
(`MEMORY USAGE`, summed) and the growth of Redis's `used_memory` (INFO memory) since before the
first page. Then a second reader with the same candidates walks one chain to its end at
`first: 100` (each page's end cursor length and the answer's bytes, the edges' cursors included),
and another at `first: 2`, whose next page from near its end is timed with the list in Redis and,
after FLUSHDB, ranked again from Postgres (its path is then hundreds of page records deep).

    .venv/bin/python bench/foryou_redis.py [--pages 600]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import numpy as np
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.core.auth import issue_token  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402

from bench._stack import env_or, fresh_database, services  # noqa: E402

SECRET = "bench-secret-" + uuid.uuid4().hex
POSTS_EACH = 25
LIKED = 100
CHECKPOINTS = (1, 3, 4, 10, 100)
DEEP = 2
FOR_YOU = """query($first: Int, $after: String) {
  forYouFeed(first: $first, after: $after) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } }
}"""


class Client:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    def headers(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {issue_token(SECRET, name, ttl=7200)}"}

    async def gql(self, name: str, query: str, variables: dict[str, Any] | None = None) -> tuple[Any, int]:
        response = await self.http.post(
            "/graphql", json={"query": query, "variables": variables or {}}, headers=self.headers(name)
        )
        body = response.json()
        if body.get("errors"):
            raise RuntimeError(body["errors"])
        return body["data"], len(response.content)

    async def member(self, name: str) -> None:
        await self.gql(
            name, "mutation($u: String!) { upsertProfile(username: $u, displayName: $u) { id } }", {"u": name}
        )


READERS = ("reader", "walker")  # the first one spends its budget on first pages, the other walks chains


async def seed(client: Client, database_url: str) -> None:
    """Each reader's candidates, through the API as members would make them: FOLLOWING (the newest 200
    of 10 followed authors' posts), TAGS (200 of 10 authors posting under a followed tag), FAVOURITES
    (4 favourite authors' 100), POPULAR (100 posts of 10 other authors, liked), SIMILAR (200 of 10 more
    authors' posts near the 5 the reader liked; their vectors written as worker-embeddings would)."""
    groups = {g: [f"{g}{i}" for i in range(10)] for g in ("followed", "tagged", "popular", "similar")}
    groups["favourite"] = [f"favourite{i}" for i in range(4)]
    for name in (*READERS, "fan", *(n for names in groups.values() for n in names)):
        await client.member(name)
    for reader in READERS:
        await client.gql(reader, 'mutation { followTag(tag: "bench") }')
        for name in groups["followed"]:
            await client.gql(reader, "mutation($e: String!) { follow(externalUserId: $e) { id } }", {"e": name})
        for name in groups["favourite"]:
            await client.gql(reader, "mutation($e: String!) { addFavourite(externalUserId: $e) { id } }", {"e": name})
    made: dict[str, list[str]] = {g: [] for g in groups}
    for n in range(POSTS_EACH):
        for group, names in groups.items():
            for name in names:
                content = f"post {n} by {name}" + (" #bench" if group == "tagged" else "")
                data, _ = await client.gql(
                    name, "mutation($c: String!) { createPost(input: {content: $c}) { id } }", {"c": content}
                )
                made[group].append(data["createPost"]["id"])
    for post_id in made["popular"][:LIKED]:
        await client.gql("fan", "mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": post_id})
    rng = np.random.default_rng(7)
    conn = await asyncpg.connect(database_url)
    try:
        for post_id in made["similar"]:
            vector = rng.normal(size=384).astype("<f4")
            vector[0] = abs(vector[0]) + 20  # all near one direction: cosine > 0 with the taste
            vector /= np.linalg.norm(vector)
            await conn.execute(
                "INSERT INTO post_embeddings (post_id, vector) VALUES ($1, $2)", uuid.UUID(post_id), vector.tobytes()
            )
    finally:
        await conn.close()
    for reader in READERS:
        for post_id in made["similar"][:5]:
            await client.gql(reader, "mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": post_id})


async def for_you_keys(redis: aioredis.Redis, member_id: str) -> tuple[int, int]:
    """The member's For You keys and their bytes (MEMORY USAGE, summed)."""
    keys = [k async for k in redis.scan_iter(match=f"foryou:{{{member_id}}}*", count=1000)]
    sizes = [await redis.memory_usage(k, samples=0) or 0 for k in keys]
    return len(keys), sum(sizes)


async def timed(client: Client, cursor: str) -> float:
    started = time.perf_counter()
    await client.gql("walker", FOR_YOU, {"first": 20, "after": cursor})
    return time.perf_counter() - started


async def path_ms(database_url: str, settings: Settings, cursor: str) -> float:
    """Reading the served path a cursor names (db.foryou.served_path), median of 5."""
    from feedfabric.db import foryou as foryou_db
    from feedfabric.feeds.foryou import cursor_key, parse_cursor

    conn = await asyncpg.connect(database_url)
    try:
        walker = await conn.fetchval("SELECT id FROM members WHERE external_id = 'walker'")
        _, place = parse_cursor(cursor, cursor_key(settings), walker)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            await foryou_db.served_path(conn, place.page, walker, place.taken)
            times.append(time.perf_counter() - started)
    finally:
        await conn.close()
    return sorted(times)[2] * 1000


async def used_memory(redis: aioredis.Redis) -> int:
    return int((await redis.info("memory"))["used_memory"])


async def run(database_url: str, redis_url: str, pages: int) -> None:
    from feedfabric.app import create_app

    settings = Settings(
        database_url=database_url, redis_url=redis_url, feedfabric_jwt_secret=SECRET, log_level="WARNING"
    )
    app = create_app(settings)
    redis = aioredis.from_url(redis_url)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://b") as http:
        client = Client(http)
        t0 = time.monotonic()
        await seed(client, database_url)
        print(f"seeded {44 * POSTS_EACH} posts in {time.monotonic() - t0:.1f} s")
        member_id = (await client.gql("reader", "{ viewer { id } }"))[0]["viewer"]["id"]
        await client.gql("reader", FOR_YOU, {"first": 1})  # the shared POPULAR list, prepared statements
        await redis.delete(*[k async for k in redis.scan_iter(match=f"foryou:{{{member_id}}}*")] or ["-"])
        baseline = await used_memory(redis)
        print(
            f"\n{pages} first pages of forYouFeed(first: 1) by one member "
            f"(RATE_LIMIT_OPERATIONS {settings.rate_limit_operations} a {settings.rate_limit_window_seconds} s window)"
        )
        print(f"{'first pages':>11} {'keys':>5} {'MEMORY USAGE':>13} {'used_memory growth':>19} {'refused':>8}")
        refused = 0
        t0 = time.monotonic()
        for n in range(1, pages + 1):
            response = await http.post(
                "/graphql", json={"query": FOR_YOU, "variables": {"first": 1}}, headers=client.headers("reader")
            )
            if response.status_code == 429 or response.json().get("errors"):
                refused += 1
            if n in CHECKPOINTS or n == pages:
                keys, size = await for_you_keys(redis, member_id)
                grown = await used_memory(redis) - baseline
                print(f"{n:>11} {keys:>5} {size:>13,} {grown:>19,} {refused:>8}")
        print(f"({time.monotonic() - t0:.1f} s)")

        print("\none chain walked to its end at forYouFeed(first: 100), by another member")
        print(f"{'page':>5} {'posts so far':>13} {'end cursor chars':>17} {'answer bytes':>13}")
        after, page, served = None, 0, 0
        while True:
            data, size = await client.gql("walker", FOR_YOU, {"first": 100, "after": after})
            feed = data["forYouFeed"]
            page += 1
            served += len(feed["edges"])
            end = feed["pageInfo"]["endCursor"] or ""
            print(f"{page:>5} {served:>13} {len(end):>17} {size:>13,}")
            if not feed["pageInfo"]["hasNextPage"]:
                break
            after = end

        print(f"\na chain walked {DEEP} posts a page, then its next page with the list kept and lost")
        after, cursors = None, []
        while True:
            feed = (await client.gql("walker", FOR_YOU, {"first": DEEP, "after": after}))[0]["forYouFeed"]
            if not feed["pageInfo"]["hasNextPage"]:
                break
            after = feed["pageInfo"]["endCursor"]
            cursors.append(after)
        deep = cursors[-2]
        kept = sorted([await timed(client, deep) for _ in range(3)])[1] * 1000
        await redis.flushdb()  # the cursor's list is gone: each page from it below is ranked again
        lost = sorted([await timed(client, deep) for _ in range(3)])[1] * 1000
        path = await path_ms(database_url, settings, deep)
        print(
            f"the next page after {len(cursors) - 1} pages (medians of 3): {kept:.1f} ms from the kept list, "
            f"{lost:.1f} ms ranked again, of which reading the path of {len(cursors) - 1} page records {path:.2f} ms"
        )
    await redis.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pages", type=int, default=600, help="first pages by the one member (default: one window's budget)"
    )
    args = parser.parse_args()
    with services() as env:
        asyncio.run(run(fresh_database(env_or(env, "DATABASE_URL")), env_or(env, "REDIS_URL"), args.pages))


if __name__ == "__main__":
    main()
