"""The API's pool skips asyncpg's per-release reset, so no session state may outlive a request.

The only session state the API takes is the advisory lock of `timelines.settle`;
its connection is marked, and the pool's release clears it even when the
request is cancelled in between.
"""

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.db import timeline_queries as q
from feedfabric.db.pool import create_pool, hold_session_state
from feedfabric.feeds import timelines

ADVISORY = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"


@pytest.fixture
async def lean_pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, min_size=1, max_size=1, lean_reset=True)
    yield pool
    await pool.close()


class Statements:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, record: asyncpg.connection.LoggedQuery) -> None:
        self.seen.append(record.query)


async def test_a_plain_release_sends_no_reset(database_url: str) -> None:
    log = Statements()

    async def attach(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(log)

    pool = await create_pool(database_url, min_size=1, max_size=1, lean_reset=True, on_connect=attach)
    try:
        async with pool.acquire() as conn:
            await conn.fetchval("SELECT 1")
        async with pool.acquire() as conn:
            await conn.fetchval("SELECT 2")
        assert not [s for s in log.seen if "RESET ALL" in s or "advisory" in s]
    finally:
        await pool.close()


async def test_a_marked_connection_loses_its_advisory_lock_on_release(
    lean_pool: asyncpg.Pool, pool: asyncpg.Pool
) -> None:
    async with lean_pool.acquire() as conn:
        await q.lock_epoch(conn)  # never unlocked here
        assert await pool.fetchval(ADVISORY) == 1
    assert await pool.fetchval(ADVISORY) == 0
    async with lean_pool.acquire() as conn:  # the same (only) connection, clean and unmarked again
        assert not conn.holds_session_state  # the pool proxy forwards to the connection


async def test_a_settle_cancelled_while_locked_leaves_no_lock(
    lean_pool: asyncpg.Pool, pool: asyncpg.Pool, redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    stuck = asyncio.Event()

    async def hang(conn: asyncpg.Connection) -> None:
        stuck.set()
        await asyncio.sleep(3600)

    async def skip(conn: asyncpg.Connection) -> None:
        return None

    monkeypatch.setattr(q, "epoch", hang)
    monkeypatch.setattr(q, "unlock_epoch", skip)  # as if the explicit unlock never got to run
    task = asyncio.ensure_future(timelines.serving_floor(lean_pool, redis))
    await stuck.wait()
    assert await pool.fetchval(ADVISORY) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.05)
    assert await pool.fetchval(ADVISORY) == 0


async def test_settle_through_the_lean_pool_releases_its_lock(
    lean_pool: asyncpg.Pool, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    assert await timelines.serving_floor(lean_pool, redis) is None
    assert await pool.fetchval(ADVISORY) == 0


async def test_generic_plans_survive_the_full_reset_of_a_marked_connection(database_url: str) -> None:
    """The API plans its statements once per connection (create_pool(generic_plans=True)); a connection
    that took session state is reset with RESET ALL, which must not bring back re-planning."""
    pool = await create_pool(database_url, min_size=1, max_size=1, lean_reset=True, generic_plans=True)
    try:
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
            await conn.execute("SET plan_cache_mode = auto")
            hold_session_state(conn)
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
    finally:
        await pool.close()
