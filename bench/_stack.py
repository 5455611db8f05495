"""Shared set-up of the benchmarks: services from the environment, else a private devstack."""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
from feedfabric.db.migrate import migrate
from feedfabric.ops import devstack


@contextmanager
def services() -> Iterator[dict[str, str]]:
    """DATABASE_URL / REDIS_URL / KAFKA_BOOTSTRAP_SERVERS from the environment, the rest started here."""
    data_dir = Path(tempfile.mkdtemp(prefix="feedfabric-bench-"))
    stack = devstack.start(data_dir)
    try:
        yield stack.env
    finally:
        stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def fresh_database(url: str) -> str:
    """A new migrated database beside the configured one, so a benchmark never touches real data; dropped when
    the benchmark exits (on a server of its own the whole data folder goes with `services`)."""
    base, _, _ = url.rpartition("/")
    name = f"bench_{uuid.uuid4().hex[:12]}"

    async def create() -> None:
        admin = await asyncpg.connect(f"{base}/postgres")
        try:
            await admin.execute(f"CREATE DATABASE {name}")
        finally:
            await admin.close()
        await migrate(f"{base}/{name}")

    asyncio.run(create())
    atexit.register(drop_database, base, name)
    return f"{base}/{name}"


def drop_database(base: str, name: str) -> None:
    async def drop() -> None:
        admin = await asyncpg.connect(f"{base}/postgres", timeout=5)
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            await admin.close()

    try:
        asyncio.run(drop())
    except (OSError, asyncpg.PostgresError):
        pass  # the server went first (a private devstack, whose folder is already gone)


def redis_cli() -> str:
    found = shutil.which("redis-cli")
    if found:
        return found
    return str(Path(devstack.redis_server_binary()).with_name("redis-cli"))


def env_or(env: dict[str, str], name: str) -> str:
    return os.environ.get(name) or env[name]
