"""The asyncpg pool and the transaction boundary used by requests and tasks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from feedfabric.core import jsonwire
from feedfabric.core.background import Background

__all__ = ["PrimaryWatch", "create_pool", "hold_session_state", "init_connection", "transaction"]

log = logging.getLogger("feedfabric.pool")


async def init_connection(conn: asyncpg.Connection) -> None:
    """The JSON codecs every connection of ours uses: the pools' and the relay's own, so a jsonb column
    reads back as the value that was written."""
    await conn.set_type_codec("jsonb", encoder=jsonwire.dumps_text, decoder=jsonwire.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=jsonwire.dumps_text, decoder=jsonwire.loads, schema="pg_catalog")


class LeanConnection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg ships no types: its classes are Any
    """A connection that remembers whether it took session state the pool must clear on release.

    asyncpg resets every released connection with `pg_advisory_unlock_all();
    CLOSE ALL; UNLISTEN *; RESET ALL` -- one round trip per release, about nine
    on a home-feed page, for state the API's requests never create (they use
    no cursors, LISTEN or SET; transactions are rolled back by asyncpg before
    any reset). The one exception takes a session advisory lock
    (`timelines.settle`) and marks its connection with `hold_session_state`:
    that connection alone gets the full reset when it goes back.
    """

    __slots__ = ("holds_session_state",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.holds_session_state = False

    def hold_session_state(self) -> None:
        self.holds_session_state = True


def hold_session_state(conn: asyncpg.Connection) -> None:
    """Marks a connection (or a pool's proxy of one) as holding session state: its release runs the full reset.

    Call before taking the state (a session advisory lock), so a task
    cancelled between the two still leaves the connection marked.
    """
    mark = getattr(conn, "hold_session_state", None)  # pool proxies forward to the connection
    if mark is not None:
        mark()


async def _lean_reset(conn: asyncpg.Connection) -> None:
    """The pool's `reset`: nothing unless the connection was marked (open transactions are already rolled back)."""
    if getattr(conn, "holds_session_state", False):
        await conn.execute(conn.get_reset_query())
        conn.holds_session_state = False


async def create_pool(
    dsn: str,
    *,
    command_timeout: float = 30.0,
    min_size: int = 2,
    max_size: int = 10,
    on_connect: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
    lean_reset: bool = False,
    generic_plans: bool = False,
) -> asyncpg.Pool:
    """`lean_reset`: skip asyncpg's per-release session reset except on marked connections (LeanConnection).

    Only for code that takes session state solely through `hold_session_state`
    (the API); workers hold session advisory locks of their own and keep the full reset.

    `generic_plans`: plan each prepared statement once per connection (plan_cache_mode
    force_generic_plan). The API's statements are keyset pages and lookups by key, whose generic
    plans are the custom ones; but a feed statement that reads visible_posts (migration 101) joins
    five relations, and left to choose, Postgres re-planned it on every call because its custom
    plan looked cheaper, several times the Postgres CPU of the generic plan (docs/benchmarks.md).
    """

    async def init(conn: asyncpg.Connection) -> None:
        await init_connection(conn)
        if on_connect is not None:
            await on_connect(conn)

    lean: dict[str, Any] = {"connection_class": LeanConnection, "reset": _lean_reset} if lean_reset else {}
    settings = {"plan_cache_mode": "force_generic_plan"} if generic_plans else {}
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=init,
        command_timeout=command_timeout,
        server_settings=settings,
        **lean,
    )
    assert pool is not None
    return pool


@asynccontextmanager
async def transaction(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """The one place a unit of work commits: services take the connection and never commit."""
    async with pool.acquire() as conn, conn.transaction():
        yield conn


class PrimaryWatch:
    """Keeps a pool on the server that answers as the primary after a failover or a partition.

    DATABASE_URL may name several hosts with `target_session_attrs=read-write`: every new connection finds
    the current primary. Pooled connections do not: one to a primary that was cut off (or fenced without a
    reset reaching us) hangs its next query until TCP gives up. Once a second, a probe asks the pool; when
    it fails or does not answer within `timeout_s`, every idle connection is expired (asyncpg closes it on
    its next acquire and connects afresh), so one slow probe replaces the pool instead of each request
    finding a dead connection on its own.
    """

    def __init__(self, pool: asyncpg.Pool, every_s: float = 1.0, timeout_s: float = 2.0) -> None:
        self.pool = pool
        self.every_s = every_s
        self.timeout_s = timeout_s
        self.healthy = True
        self._task = Background("primary-watch")

    def start(self) -> None:
        self._task.start(self._run)

    async def stop(self) -> None:
        await self._task.stop()

    async def probe(self) -> bool:
        try:
            async with asyncio.timeout(self.timeout_s):
                # A standby refuses writes: after a promotion elsewhere, a connection to the old primary
                # that came back as a standby is just as wrong.
                in_recovery = await self.pool.fetchval("SELECT pg_is_in_recovery()")
            return not in_recovery
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - any failure means: reconnect
            return False

    async def _run(self) -> None:
        while True:
            ok = await self.probe()
            if not ok:
                if self.healthy:
                    log.warning("primary not answering as the primary: pooled connections expired, reconnecting")
                await self.pool.expire_connections()
            elif not self.healthy:
                log.info("primary answering again")
            self.healthy = ok
            await asyncio.sleep(self.every_s)
