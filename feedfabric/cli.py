"""The `feedfabric` command: dev, migrate, api, relay, worker, token, export-schema."""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from feedfabric.core.settings import Settings, load_settings

__all__ = ["build_parser", "main"]


def _require(settings: Settings, *names: str) -> None:
    missing = [n.upper() for n in names if not getattr(settings, n)]
    if missing:
        sys.exit(f"feedfabric: set {', '.join(missing)} (or use `feedfabric dev`)")


def cmd_train_ranker(args: argparse.Namespace) -> None:
    from datetime import datetime

    from feedfabric.db.pool import create_pool
    from feedfabric.feeds import ranker_training as ranker

    settings = load_settings()
    _require(settings, "database_url")
    since = datetime.fromisoformat(args.since) if args.since else None

    async def run() -> None:
        pool = await create_pool(settings.database_url or "", min_size=1, max_size=2)
        try:
            trained = await ranker.train(pool, since=since)
        except ranker.NotEnoughData as reason:
            print(f"not trained: {reason}", file=sys.stderr)
            raise SystemExit(1) from None
        finally:
            await pool.close()
        weights = ", ".join(f"{k} {v:+.3f}" for k, v in trained.weights.items())
        print(
            f"model {trained.model_id}: {trained.rows} rows, auc {trained.auc:.4f} vs balanced "
            f"{trained.baseline_auc:.4f}, {'active' if trained.active else 'not active'}; weights: {weights}; "
            + ", ".join(f"{step} {seconds:.1f} s" for step, seconds in trained.seconds.items())
        )

    asyncio.run(run())


def cmd_migrate(args: argparse.Namespace) -> None:
    from feedfabric.db.migrate import migrate

    settings = load_settings()
    _require(settings, "database_url")
    applied = asyncio.run(migrate(settings.database_url or ""))
    print("applied: " + (", ".join(applied) if applied else "nothing pending"))


def cmd_api(args: argparse.Namespace) -> None:
    import uvicorn

    from feedfabric.adapter.serving import serve_options

    settings = load_settings()
    _require(settings, "database_url", "feedfabric_jwt_secret")
    _tune_gc(args.workers)
    uvicorn.run(
        "feedfabric.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level="warning",
        lifespan="on",
        forwarded_allow_ips=settings.forwarded_allow_ips,
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds),
        **serve_options(),  # permessage-deflate off (feedfabric.adapter.serving)
    )


def _tune_gc(workers: int | None = None) -> None:
    """With the app imported (so its modules and schema are frozen with the rest); one worker: uvicorn
    serves in this process. More workers are spawned fresh and keep Python's defaults."""
    if workers not in (None, 1):
        return
    import feedfabric.app  # noqa: F401
    from feedfabric.ops.gctune import tune_for_serving

    tune_for_serving()


def cmd_token(args: argparse.Namespace) -> None:
    from feedfabric.core.auth import issue_token

    settings = load_settings()
    _require(settings, "feedfabric_jwt_secret")
    print(issue_token(settings.jwt_secret, args.external_id, admin=args.admin, ttl=args.ttl))


def cmd_export_schema(args: argparse.Namespace) -> None:
    from feedfabric.app import schema

    print(schema.as_str())


# Background processes `feedfabric dev` runs beside the API: (name, argv after `feedfabric`).
DEV_CHILDREN: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("relay", ("relay",)),
    ("worker", ("worker",)),
)


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def cmd_dev(args: argparse.Namespace) -> None:
    from feedfabric.core.auth import issue_token
    from feedfabric.db.migrate import migrate
    from feedfabric.ops import devstack

    # Any signal that can be caught ends `dev` through the `finally` below, which stops every child;
    # one that cannot (SIGKILL) still takes them along: each dies with its parent (PR_SET_PDEATHSIG).
    # uvicorn handles SIGINT and SIGTERM while it serves and re-raises them after shutting down.
    for caught in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(caught, _exit_on_signal)
    data_dir = Path(args.data_dir)
    stack = devstack.start(data_dir)
    env = {**os.environ, **stack.env}
    env.setdefault("FEEDFABRIC_JWT_SECRET", secrets.token_urlsafe(32))
    env.setdefault("FEEDFABRIC_DEV_SECRET", secrets.token_urlsafe(24))  # the playground's admin sign-in
    env["FEEDFABRIC_DATA_DIR"] = str(data_dir.resolve())
    env["FEEDFABRIC_DEV_MODE"] = "1"
    if args.demo:
        from feedfabric.ops.demo import CELEBRITY_FOLLOWER_THRESHOLD

        env.setdefault("CELEBRITY_FOLLOWER_THRESHOLD", str(CELEBRITY_FOLLOWER_THRESHOLD))
    os.environ.update(env)
    children: list[subprocess.Popen[bytes]] = []
    try:
        asyncio.run(migrate(stack.postgres.url))
        if args.demo:
            from feedfabric.ops.demo import load_demo

            asyncio.run(load_demo(load_settings()))
        for _name, argv in DEV_CHILDREN:
            children.append(
                subprocess.Popen(
                    [sys.executable, "-m", "feedfabric", *argv],
                    env=env,
                    # Killed outright, as in a crash, which they are built to survive: a graceful stop
                    # can take long, and with the parent gone nothing would escalate it.
                    preexec_fn=devstack.die_with_parent(signal.SIGKILL),
                )
            )
        base = f"http://127.0.0.1:{args.port}"
        token = issue_token(env["FEEDFABRIC_JWT_SECRET"], args.token_for, ttl=7 * 86400)
        print(
            f"\nFeedFabric is running.\n  GraphiQL:   {base}/graphql\n"
            f"  Playground: {base}/playground/#dev-secret={env['FEEDFABRIC_DEV_SECRET']}\n"
            f"  REST:       {base}/userfeed/home\n  Postgres:   {stack.postgres.url}\n"
            f"  Redis:      {stack.redis.url}\n  Kafka:      {stack.kafka.url}\n"
            f"  Dev token for '{args.token_for}' (header: Authorization: Bearer <token>):\n    {token}\n"
            "  Ctrl-C stops everything.\n",
            flush=True,
        )
        import uvicorn

        from feedfabric.adapter.serving import serve_options

        _tune_gc()
        uvicorn.run(
            "feedfabric.app:create_app",
            factory=True,
            host="127.0.0.1",
            port=args.port,
            log_level="warning",
            **serve_options(),
        )  # as cmd_api
    finally:
        for caught in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(caught, signal.SIG_IGN)  # a second signal must not cut the cleanup short
        for child in children:
            child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
        stack.stop()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="feedfabric", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="the whole system on embedded services")
    dev.add_argument("--port", type=int, default=8000)
    dev.add_argument("--data-dir", default=".feedfabric")
    dev.add_argument("--demo", action="store_true", help="load demo members and posts")
    dev.add_argument("--token-for", default="demo-maya", help="external ID the printed dev token is for")
    dev.set_defaults(func=cmd_dev)

    sub.add_parser("migrate", help="apply pending SQL migrations").set_defaults(func=cmd_migrate)

    api = sub.add_parser("api", help="the ASGI app under uvicorn")
    api.add_argument("--host", default="127.0.0.1")
    api.add_argument("--port", type=int, default=8000)
    api.add_argument("--workers", type=int, default=1)
    api.set_defaults(func=cmd_api)

    token = sub.add_parser("token", help="print a signed bearer token")
    token.add_argument("external_id")
    token.add_argument("--admin", action="store_true")
    token.add_argument("--ttl", type=int, default=3600)
    token.set_defaults(func=cmd_token)

    train = sub.add_parser("train-ranker", help="train the For You ranker from the feed log")
    train.add_argument("--since", help="only rows served from this ISO time on")
    train.set_defaults(func=cmd_train_ranker)
    sub.add_parser("export-schema", help="print the served schema as SDL").set_defaults(func=cmd_export_schema)

    from feedfabric.workers.commands import add_commands as add_pipeline_commands

    add_pipeline_commands(sub)

    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.func(args)
