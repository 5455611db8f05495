"""Migrations apply once, and two runs at once (two hosts) are safe."""

import asyncio

import asyncpg
from feedfabric.db.migrate import migrate, migration_files

from tests.conftest import _server_url


async def test_two_concurrent_migrations_apply_each_file_once(stack) -> None:  # type: ignore[no-untyped-def]
    admin = await asyncpg.connect(_server_url(stack.postgres.url, "postgres"))
    try:
        await admin.execute("DROP DATABASE IF EXISTS migrate_race WITH (FORCE)")
        await admin.execute("CREATE DATABASE migrate_race")
    finally:
        await admin.close()
    url = _server_url(stack.postgres.url, "migrate_race")
    first, second = await asyncio.gather(migrate(url), migrate(url))
    names = [name for _, name, _ in migration_files()]
    assert sorted(first + second) == sorted(names)
    assert await migrate(url) == []
