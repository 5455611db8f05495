"""The pipeline's subcommands of `feedfabric`: relay, worker and replay."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import re
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from feedfabric.core.settings import Settings, load_settings

if TYPE_CHECKING:
    from feedfabric.core.tracing import Tracing


__all__ = ["add_commands"]

_RELATIVE = re.compile(r"^(\d+)\s*([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(value: str, now: dt.datetime | None = None) -> dt.datetime:
    """An ISO 8601 time (naive means UTC) or an age such as 90m, 2h, 3d."""
    now = now or dt.datetime.now(dt.UTC)
    match = _RELATIVE.match(value.strip())
    if match:
        return now - dt.timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {value!r} (ISO 8601, or an age like 2h)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _settings(*needed: str) -> Settings:
    settings = load_settings()
    missing = [n.upper() for n in needed if not getattr(settings, n)]
    if missing:
        sys.exit(f"feedfabric: set {', '.join(missing)} (or use `feedfabric dev`)")
    return settings


def _run_until_signal(main: Callable[[asyncio.Event], Awaitable[None]], traced: Tracing | None = None) -> None:
    from feedfabric.core import metrics
    from feedfabric.core.logging import configure_logging

    settings = load_settings()
    configure_logging(settings)  # JSON lines, as the API writes them
    metrics.serve(settings)  # Prometheus on METRICS_PORT (0: off)

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    if traced is not None:
        traced.instrument_asyncpg()
    try:
        asyncio.run(runner())
    finally:
        if traced is not None:
            traced.shutdown()


def cmd_relay(args: argparse.Namespace) -> None:
    from feedfabric.core import tracing
    from feedfabric.workers.relay import Relay

    settings = _settings("database_url", "kafka_bootstrap_servers")
    traced = tracing.setup(settings, "feedfabric-relay")
    _run_until_signal(Relay(settings, tracer=tracing.tracer_of(traced)).run, traced)


def cmd_worker(args: argparse.Namespace) -> None:
    from feedfabric.core import tracing
    from feedfabric.workers.groups import all_groups
    from feedfabric.workers.runner import run_groups

    settings = _settings("database_url", "redis_url", "kafka_bootstrap_servers")
    groups = all_groups()
    names = args.group or list(groups)
    unknown = [n for n in names if n not in groups]
    if unknown:
        sys.exit(f"feedfabric: unknown group {', '.join(unknown)}; known: {', '.join(groups)}")
    traced = tracing.setup(settings, "feedfabric-worker")
    _run_until_signal(lambda stop: run_groups(settings, [groups[n] for n in names], stop, traced), traced)


def cmd_replay(args: argparse.Namespace) -> None:
    from feedfabric.workers.relay import replay_since

    settings = _settings("database_url")
    count = asyncio.run(replay_since(settings, args.since))
    print(f"{count} events since {args.since.isoformat()} will be published again")


def cmd_maintain(args: argparse.Namespace) -> None:
    from feedfabric.core.logging import configure_logging
    from feedfabric.db.pool import create_pool
    from feedfabric.feeds.maintenance import maintain

    settings = _settings("database_url")
    configure_logging(settings)

    async def run() -> dict[str, int]:
        pool = await create_pool(settings.database_url or "", min_size=1, max_size=2)
        try:
            return await maintain(pool, settings)
        finally:
            await pool.close()

    for step, removed in asyncio.run(run()).items():
        print(f"{step}: {removed} removed")


def cmd_verify(args: argparse.Namespace) -> None:
    from feedfabric.feeds.verify import main

    sys.exit(main(_settings("database_url", "redis_url"), fix=args.repair, external_id=args.member))


def add_commands(sub: Any) -> None:
    """`sub`: the CLI's subparsers (what ArgumentParser.add_subparsers returned)."""
    sub.add_parser("relay", help="the outbox relay (several may run at once)").set_defaults(func=cmd_relay)

    worker = sub.add_parser("worker", help="consumer groups (default: all)")
    worker.add_argument("--group", action="append", metavar="NAME", help="a group to run; repeatable")
    worker.set_defaults(func=cmd_worker)

    replay = sub.add_parser("replay", help="republish events stamped since a time (consumers are idempotent)")
    replay.add_argument("--since", required=True, type=parse_since, help="ISO 8601 time, or an age such as 2h")
    replay.set_defaults(func=cmd_replay)

    sub.add_parser("maintain", help="one pass of retention over the bookkeeping tables").set_defaults(func=cmd_maintain)

    verify = sub.add_parser("verify", help="check every Redis timeline against Postgres (exit 1 if any is wrong)")
    verify.add_argument("--repair", action="store_true", help="rebuild the timelines found wrong")
    verify.add_argument("--member", metavar="EXTERNAL_ID", help="check this member only")
    verify.set_defaults(func=cmd_verify)
