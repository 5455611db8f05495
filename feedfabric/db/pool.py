"""The asyncpg pool and the transaction boundary used by requests and tasks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import asyncpg

Connection = asyncpg.Connection
Pool = asyncpg.Pool


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def create_pool(
    dsn: str,
    *,
    min_size: int = 2,
    max_size: int = 10,
    on_connect: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
) -> asyncpg.Pool:
    async def init(conn: asyncpg.Connection) -> None:
        await _init_connection(conn)
        if on_connect is not None:
            await on_connect(conn)

    pool = await asyncpg.create_pool(dsn, min_size=min_size, max_size=max_size, init=init, command_timeout=30)
    assert pool is not None
    return pool


@asynccontextmanager
async def transaction(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """The one place a unit of work commits: services take the connection and never commit."""
    async with pool.acquire() as conn, conn.transaction():
        yield conn
