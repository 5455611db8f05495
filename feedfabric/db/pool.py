"""The asyncpg pool and the transaction boundary used by requests and tasks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from feedfabric.core import jsonwire

Connection = asyncpg.Connection
Pool = asyncpg.Pool


async def init_connection(conn: asyncpg.Connection) -> None:
    """The JSON codecs every connection of ours uses: the pools' and the relay's own, so a jsonb column
    reads back as the value that was written."""
    await conn.set_type_codec("jsonb", encoder=jsonwire.dumps_text, decoder=jsonwire.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=jsonwire.dumps_text, decoder=jsonwire.loads, schema="pg_catalog")


class LeanConnection(asyncpg.Connection):
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
        dsn, min_size=min_size, max_size=max_size, init=init, command_timeout=30, server_settings=settings, **lean
    )
    assert pool is not None
    return pool


@asynccontextmanager
async def transaction(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """The one place a unit of work commits: services take the connection and never commit."""
    async with pool.acquire() as conn, conn.transaction():
        yield conn
