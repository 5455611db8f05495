"""The framework's own floor for a GraphQL home page: a bare Strawberry app serving the page from memory.

A schema of the home page's shape (FeedConnection, Post, Member, Media, the
same 20 posts of about 180 fields) whose resolvers return objects built once
at start, with Strawberry's parser and validation caches, served by uvicorn
with the API's options (feedfabric.adapter.serving), under the same load
generator as bench/home_feed.py (same document, same clients). No database,
no Redis, no authentication, no guards: what any Strawberry page of this
selection costs. Run it alternately with bench/home_feed.py, so every
GraphQL figure reads as "REST work + framework floor - what rendering once
saves":

    .venv/bin/python bench/graphql_floor.py [--clients 16] [--duration 15] [--in-process 300]

Prints the API CPU per page (user + system of the server process over the
pages it served), and with `--in-process N` the CPU per page of N pages
executed in this process through `schema.execute` (no HTTP).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import strawberry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from strawberry.asgi import GraphQL
from strawberry.extensions import ParserCache, ValidationCache

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.adapter.serving import serve_options  # noqa: E402

from bench import home_feed as hf  # noqa: E402


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None


@strawberry.type
class Member:
    id: strawberry.ID
    username: str
    display_name: str
    avatar_url: str | None


@strawberry.type
class Media:
    id: strawberry.ID
    content_type: str | None
    width: int | None
    height: int | None
    url: str | None
    score: float | None


@strawberry.type
class Post:
    id: strawberry.ID
    content: str
    status: str
    created_at: datetime
    updated_at: datetime | None
    tags: list[str]
    like_count: int
    comment_count: int
    viewer_has_liked: bool
    author: Member
    media: list[Media]
    repost_of: Post | None


@strawberry.type
class FeedEdge:
    cursor: str
    node: Post


@strawberry.type
class FeedConnection:
    source: str
    page_info: PageInfo
    edges: list[FeedEdge]


def _page() -> FeedConnection:
    """20 posts as the benchmark's data has them: a quarter tagged, every fifth a repost, some with a photo."""
    now = datetime.now(UTC)
    authors = [
        Member(
            id=strawberry.ID(str(uuid.uuid4())), username=f"bench{i:06d}", display_name=f"Bench {i}", avatar_url=None
        )
        for i in range(20)
    ]
    edges = []
    for i in range(20):
        media = (
            [
                Media(
                    id=strawberry.ID(str(uuid.uuid4())),
                    content_type="image/webp",
                    width=1280,
                    height=960,
                    url="/media/x",
                    score=0.5,
                )
            ]
            if i % 7 == 0
            else []
        )
        original = (
            Post(
                id=strawberry.ID(str(uuid.uuid4())),
                content="the original",
                status="LIVE",
                created_at=now,
                updated_at=None,
                tags=[],
                like_count=3,
                comment_count=1,
                viewer_has_liked=False,
                author=authors[(i + 1) % 20],
                media=[],
                repost_of=None,
            )
            if i % 5 == 0
            else None
        )
        post = Post(
            id=strawberry.ID(str(uuid.uuid4())),
            content=f"post {i} of the bench, a sentence or two long like the loaded posts #tag{i % 4}",
            status="LIVE",
            created_at=now - timedelta(minutes=i),
            updated_at=None,
            tags=[f"tag{i % 4}"] if i % 4 == 0 else [],
            like_count=i,
            comment_count=i // 2,
            viewer_has_liked=i % 3 == 0,
            author=authors[i],
            media=media,
            repost_of=original,
        )
        edges.append(FeedEdge(cursor=str(post.id), node=post))
    return FeedConnection(
        source="REDIS", page_info=PageInfo(has_next_page=True, end_cursor=edges[-1].cursor), edges=edges
    )


PAGE = _page()


@strawberry.type
class Query:
    @strawberry.field
    def home_feed(self, first: int | None = 20, after: str | None = None) -> FeedConnection:
        return PAGE


schema = strawberry.Schema(
    query=Query, extensions=[lambda: ParserCache(maxsize=256), lambda: ValidationCache(maxsize=256)]
)


async def healthz(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


def app() -> Starlette:
    return Starlette(routes=[Route("/healthz", healthz), Route("/graphql", GraphQL(schema, graphql_ide=None))])


def serve(port: int) -> None:
    import uvicorn

    uvicorn.run(app(), host="127.0.0.1", port=port, log_level="warning", lifespan="off", **serve_options())


async def in_process(pages: int) -> float:
    """CPU seconds per page of `schema.execute` on the benchmark's document, warmed first."""
    for _ in range(50):
        result = await schema.execute(hf.GRAPHQL, variable_values={"first": hf.PAGE}, operation_name="Home")
        assert not result.errors, result.errors
    started = time.process_time()
    for _ in range(pages):
        await schema.execute(hf.GRAPHQL, variable_values={"first": hf.PAGE}, operation_name="Home")
    return (time.process_time() - started) / pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=15)
    parser.add_argument("--in-process", type=int, default=0, metavar="PAGES")
    parser.add_argument("--serve", type=int, default=0, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.in_process:
        per_page = asyncio.run(in_process(args.in_process))
        print(f"in process: {per_page * 1000:.2f} ms CPU per page ({args.in_process} pages of schema.execute)")
    port = hf.free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], env=os.environ.copy())
    try:
        hf.wait_healthy(port)
        servers = [psutil.Process(server.pid)]
        tokens = [f"t{i}" for i in range(100)]  # sent and ignored: no authentication here
        hf.run_phase(servers, port, "graphql", tokens, args.clients, 3, 0.0)  # warm-up
        r = hf.run_phase(servers, port, "graphql", tokens, args.clients, args.duration, 0.0)
        print(
            f"floor    {args.clients} clients x {args.duration:.0f} s: {r['rps']:.0f} req/s, p50 {r['p50']:.1f} ms, "
            f"p99 {r['p99']:.1f} ms, API CPU {r['cpu_ms_per_page']:.2f} ms/page ({r['cpu_share'] * 100:.0f}% of a core)",
            flush=True,
        )
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
