"""What routing reads to a replica costs the API: CPU per page with and without DATABASE_READ_URL, side by side.

    .venv/bin/python bench/read_replica.py [--pages 300] [--rounds 3]

Starts a streaming replica of the benchmark's Postgres (devstack.start_replica,
pg_basebackup -R; DATABASE_URL must then allow replication connections), loads
one author with 40 posts, and has a reader page through the author's posts in
process (the app over httpx's ASGI transport) under three configurations, in
alternating rounds: no replica; a replica (the reader never wrote); a replica
with the reader marked as a recent writer (their reads go to the primary).
Prints the process CPU per page of each (client and app together, the same
client in all three, so the differences are the routing's).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
from feedfabric.app import create_app  # noqa: E402
from feedfabric.core.auth import issue_token  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from feedfabric.ops import devstack  # noqa: E402

from bench._stack import env_or, fresh_database, services  # noqa: E402

SECRET = "bench-secret"
QUERY = "query($u: String!) { member(username: $u) { posts(first: 20) { edges { node { id content likeCount } } } } }"


async def pages(settings: Settings, count: int, *, wrote: bool) -> float:
    """CPU seconds per page for `count` pages by the reader (after a write of theirs when `wrote`)."""
    app = create_app(settings)
    reader = {"Authorization": f"Bearer {issue_token(SECRET, 'reader')}"}
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b") as client:
            await asyncio.sleep(0.3)  # the replica monitor's first look
            if wrote:
                mutation = 'mutation { upsertProfile(username: "reader", displayName: "R") { id } }'
                await client.post("/graphql", json={"query": mutation}, headers=reader)
            body = {"query": QUERY, "variables": {"u": "author"}}
            for _ in range(20):
                await client.post("/graphql", json=body, headers=reader)
            started = time.process_time()
            for _ in range(count):
                response = await client.post("/graphql", json=body, headers=reader)
                assert len(response.json()["data"]["member"]["posts"]["edges"]) == 20
            return (time.process_time() - started) / count


async def load(settings: Settings) -> None:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b") as client:
            for name in ("author", "reader"):
                headers = {"Authorization": f"Bearer {issue_token(SECRET, name)}"}
                upsert = f'mutation {{ upsertProfile(username: "{name}", displayName: "{name}") {{ id }} }}'
                await client.post("/graphql", json={"query": upsert}, headers=headers)
            author = {"Authorization": f"Bearer {issue_token(SECRET, 'author')}"}
            for n in range(40):
                create = f'mutation {{ createPost(input: {{content: "post {n} #bench"}}) {{ id }} }}'
                await client.post("/graphql", json={"query": create}, headers=author)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="feedfabric-bench-replica-"))
    try:
        with services() as env:
            database_url = fresh_database(env_or(env, "DATABASE_URL"))
            replica = devstack.start_replica(devstack.Service("postgres", database_url), data_dir)
            try:
                base = Settings(
                    database_url=database_url,
                    redis_url=env_or(env, "REDIS_URL"),
                    feedfabric_jwt_secret=SECRET,
                    rate_limit_operations=10**9,
                    rate_limit_cost=10**12,
                    log_level="WARNING",
                )
                asyncio.run(load(base))
                time.sleep(1)  # replayed by the replica
                with_replica = base.model_copy(update={"database_read_url": replica.url})
                runs: dict[str, list[float]] = {"primary only": [], "replica": [], "replica, reader wrote": []}
                for _ in range(args.rounds):
                    runs["primary only"].append(asyncio.run(pages(base, args.pages, wrote=False)))
                    runs["replica"].append(asyncio.run(pages(with_replica, args.pages, wrote=False)))
                    runs["replica, reader wrote"].append(asyncio.run(pages(with_replica, args.pages, wrote=True)))
            finally:
                replica.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    reference = statistics.median(runs["primary only"])
    for name, values in runs.items():
        median = statistics.median(values)
        print(f"{name:>22}: {median * 1000:6.3f} ms CPU a page (median of {args.rounds}), {median / reference:.2f}x")


if __name__ == "__main__":
    main()
