"""The API CPU a home-feed page costs with tracing on (ratio 1.0, or --ratio) against off, side by side.

Two apps in this process, made from the same settings but one with tracing
(every trace sampled, spans kept in the in-memory ring as `feedfabric dev`
does; asyncpg and Redis client spans, the server and GraphQL spans), one without.
Pages go through httpx's ASGI transport (no uvicorn, no network) for the first
home page of one of 200 members, GraphQL (`--kind rest` for REST). The phases
alternate, off then on, ROUNDS times, so drift in the machine's load falls on
both alike; each phase's figure is this process's CPU time (every thread, the
ring's too) over its pages. asyncpg's instrumentation patches the driver for
the whole process, so it is put on for each traced phase and taken off after.

`--floor` adds a third app, phase after phase with the other two: untraced,
but with the maintained asyncpg and Redis instrumentations on, their client
spans sampled at the same ratio into a ring of their own and no span of
FeedFabric's (no server span, no GraphQL span, so each client span is a trace
of its own). What it costs over off is what those instrumentations cost
alone; what on costs over it is FeedFabric's own part.

Data (defaults, smaller than bench/home_feed.py's: the page is the same shape):
2,000 members following 50 each, 40,000 posts, 20,000 likes.

    .venv/bin/python bench/tracing_overhead.py [--rounds 8] [--pages 300] [--kind graphql] [--ratio 1.0]
                                               [--floor] [--database URL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feedfabric.app import create_app  # noqa: E402
from feedfabric.core import tracing  # noqa: E402
from feedfabric.core.auth import issue_token  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from opentelemetry.sdk.resources import SERVICE_NAME, Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased  # noqa: E402

from bench import home_feed as hf  # noqa: E402
from bench._stack import env_or, fresh_database, services  # noqa: E402

Page = Callable[[int], Awaitable[None]]


@contextlib.asynccontextmanager
async def pages(
    settings: Settings,
    traced: tracing.Tracing | None,
    viewers: list[str],
    kind: str,
    redis_spans: tracing.Tracing | None = None,
) -> AsyncIterator[Page]:
    """`redis_spans`: an untraced app whose Redis client the maintained instrumentation wraps (the floor)."""
    app = create_app(settings, traced)
    body = {"query": hf.GRAPHQL, "operationName": "Home", "variables": {"first": hf.PAGE}}
    headers = [{"Authorization": f"Bearer {issue_token(hf.SECRET, n, ttl=7200)}"} for n in viewers]
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://b") as http:
        if redis_spans is not None:
            redis_spans.instrument_redis(app.state.resources.redis)

        async def page(i: int) -> None:
            if kind == "graphql":
                response = await http.post("/graphql", json=body, headers=headers[i % len(headers)])
            else:
                response = await http.get(f"/userfeed/home?limit={hf.PAGE}", headers=headers[i % len(headers)])
            response.raise_for_status()

        yield page


async def cpu_per_page(page: Page, count: int, offset: int) -> float:
    """This process's CPU milliseconds per page over `count` pages."""
    started = time.process_time()
    for i in range(count):
        await page(offset + i)
    return (time.process_time() - started) * 1000 / count


def floor_tracing(ratio: float) -> tracing.Tracing:
    """Only the maintained instrumentations' spans: a plain parent-based sampler (a client span with no
    parent is a trace of its own) and a ring like the traced app's."""
    provider = TracerProvider(
        sampler=ParentBased(TraceIdRatioBased(ratio)), resource=Resource.create({SERVICE_NAME: "bench-floor"})
    )
    recent = tracing.RecentTraces(300, "bench-floor")
    provider.add_span_processor(recent)
    return tracing.Tracing(provider=provider, service="bench-floor", recent=recent)


@contextlib.asynccontextmanager
async def no_floor() -> AsyncIterator[None]:
    yield None


async def timed(page: Page, count: int, offset: int, asyncpg_spans: tracing.Tracing | None) -> float:
    """`cpu_per_page` with asyncpg's process-wide patch on for the phase, made by `asyncpg_spans`."""
    if asyncpg_spans is not None:
        asyncpg_spans.instrument_asyncpg()
    try:
        return await cpu_per_page(page, count, offset)
    finally:
        if asyncpg_spans is not None:
            asyncpg_spans.uninstrument_asyncpg()


async def run(database_url: str, redis_url: str, args: argparse.Namespace) -> None:
    names = await hf.member_names(database_url)
    viewers = random.Random(7).sample(names, min(200, len(names)))
    settings = Settings(
        database_url=database_url,
        redis_url=redis_url,
        feedfabric_jwt_secret=hf.SECRET,
        rate_limit_operations=10**9,
        rate_limit_cost=10**12,
        log_level="WARNING",
    )
    traced_settings = settings.model_copy(update={"tracing_sample_ratio": args.ratio, "tracing_recent_traces": 300})
    # --ratio 0: the second app is untraced too, an A/A run that shows what the order of the phases alone costs.
    traced = tracing.setup(traced_settings, "feedfabric-api", write_recent=False)
    floor = floor_tracing(args.ratio) if args.floor else None
    off_ms: list[float] = []
    on_ms: list[float] = []
    floor_ms: list[float] = []
    async with (
        pages(settings, None, viewers, args.kind) as off,
        pages(settings, traced, viewers, args.kind) as on,
        pages(settings, None, viewers, args.kind, redis_spans=floor) if floor else no_floor() as floored,
    ):
        if traced is not None:
            traced.uninstrument_asyncpg()  # create_app patched the driver: it is on only for the traced phases
        for round_ in range(-1, args.rounds):
            count, offset = (50, 0) if round_ < 0 else (args.pages, round_ * args.pages)  # round -1 warms all
            off_cpu = await timed(off, count, offset, None)
            on_cpu = await timed(on, count, offset, traced)
            floor_cpu = await timed(floored, count, offset, floor) if floored is not None else None
            if round_ >= 0:
                off_ms.append(off_cpu)
                on_ms.append(on_cpu)
                line = f"round {round_ + 1}: off {off_cpu:.2f} ms/page, on {on_cpu:.2f} ms/page"
                if floor_cpu is not None:
                    floor_ms.append(floor_cpu)
                    line += f", floor {floor_cpu:.2f} ms/page"
                print(line, flush=True)
    spans = traced.recent.spans() if traced is not None and traced.recent is not None else []
    per_trace = len(spans) / max(1, len({s["traceId"] for s in spans}))
    if traced is not None:
        traced.shutdown()
    off_median, on_median = statistics.median(off_ms), statistics.median(on_ms)
    print(
        f"{args.kind} home page, {args.rounds} alternating rounds of {args.pages} pages: API CPU off "
        f"{off_median:.2f} ms/page, on (ratio {args.ratio:g}) {on_median:.2f} ms/page, overhead "
        f"{(on_median / off_median - 1) * 100:+.1f}% (median of rounds; {per_trace:.0f} spans a traced page)"
    )
    if floor is not None:
        floor.shutdown()
        floor_median = statistics.median(floor_ms)
        print(
            f"floor (asyncpg and Redis instrumentations alone) {floor_median:.2f} ms/page, "
            f"{(floor_median / off_median - 1) * 100:+.1f}% over off; FeedFabric's own part "
            f"{(on_median - floor_median) / off_median * 100:+.1f}% of off"
        )
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--kind", choices=["graphql", "rest"], default="graphql")
    parser.add_argument("--ratio", type=float, default=1.0, help="TRACING_SAMPLE_RATIO of the traced app")
    parser.add_argument(
        "--floor", action="store_true", help="a third app with only the asyncpg and Redis instrumentations on"
    )
    parser.add_argument("--database", help="reuse a database a home-feed benchmark loaded (REDIS_URL still filled)")
    parser.add_argument("--members", type=int, default=2_000)
    parser.add_argument("--follows-each", type=int, default=50)
    parser.add_argument("--posts", type=int, default=40_000)
    parser.add_argument("--likes", type=int, default=20_000)
    args = parser.parse_args()
    with services() as env:
        redis_url = env_or(env, "REDIS_URL")
        if args.database:
            database_url = args.database
            asyncio.run(hf.mark_seen_now(database_url))
        else:
            database_url = fresh_database(env_or(env, "DATABASE_URL"))
            asyncio.run(hf.load(database_url, redis_url, args))
        asyncio.run(run(database_url, redis_url, args))


if __name__ == "__main__":
    main()
