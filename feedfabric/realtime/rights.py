"""Open WebSockets held to their rights for their whole life (OPERATIONS.md, Authentication).

A socket is authenticated once, at `connection_init`; its token may expire and
its member may be suspended while it stays open. Every signed-in socket is
registered here with its member and its token's expiry, and one task per API
process sweeps them every RIGHTS_CHECK_SECONDS: a socket whose token expired,
or whose member is suspended (one statement for all connected members, so
another API process's `suspendMember` is seen too), is closed with 4403. Its
subscriptions end with it: Strawberry's handler cancels them when the socket
goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg

from feedfabric.db import members as members_db

log = logging.getLogger(__name__)

FORBIDDEN = 4403

Close = Callable[[int, str], Awaitable[None]]


@dataclass(eq=False, slots=True)
class Session:
    member_id: uuid.UUID | None  # None: a token whose member has no profile yet (only its expiry applies)
    expires_at: float
    close: Close


@dataclass
class Sessions:
    """The signed-in sockets of this process; `sweep` closes the ones that lost their rights."""

    interval_s: float = 2.0
    _open: dict[object, Session] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    def watch(self, key: object, member_id: uuid.UUID | None, expires_at: float, close: Close) -> None:
        self._open[key] = Session(member_id, expires_at, close)

    def forget(self, key: object) -> None:
        self._open.pop(key, None)

    def __len__(self) -> int:
        return len(self._open)

    async def sweep(self, pool: asyncpg.Pool, now: float | None = None) -> int:
        """Closes every session past its token's expiry or of a suspended member; returns how many."""
        if not self._open:
            return 0
        now = time.time() if now is None else now
        members = {s.member_id for s in self._open.values() if s.member_id is not None}
        suspended = await members_db.suspended_among(pool, list(members)) if members else set()
        ended = [
            (key, session, "token expired" if session.expires_at <= now else "account suspended")
            for key, session in list(self._open.items())
            if session.expires_at <= now or session.member_id in suspended
        ]
        for key, session, reason in ended:
            self._open.pop(key, None)
            with contextlib.suppress(Exception):  # a socket already gone has nothing left to close
                await session.close(FORBIDDEN, f"Forbidden: {reason}")
        return len(ended)

    def start(self, pool: asyncpg.Pool) -> None:
        self._task = asyncio.create_task(self._run(pool), name="websocket-rights")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self, pool: asyncpg.Pool) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.sweep(pool)
            except Exception:  # noqa: BLE001 - the next sweep retries; sockets keep their rights meanwhile
                log.warning("websocket rights sweep failed", exc_info=True)
