"""Open WebSockets held to their rights for their whole life (docs/api.md, "Authentication").

A socket is authenticated once, at `connection_init`; its token may expire and
its member may be suspended while it stays open. Every signed-in socket is
registered here with its member and its token's expiry, and one task per API
process sweeps them every RIGHTS_CHECK_SECONDS: a socket whose token expired,
or whose member is suspended (one statement for all connected members, so
another API process's `suspendMember` is seen too), is closed with 4403. Its
subscriptions end with it: the socket's protocol (feedfabric.adapter.websocket) cancels them when it
goes.

The same registry holds each member to WS_MAX_SOCKETS_PER_MEMBER open sockets
(`admit`): the process's own count first, which needs nothing but memory,
then the member's leases in Redis across every instance
(feedfabric.realtime.socket_leases), renewed by the same task. Without Redis,
or while it fails, the cap holds per process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg
import redis.asyncio as aioredis

from feedfabric.core.background import Background
from feedfabric.db import members as members_db
from feedfabric.db.redisclient import REDIS_FAILURES
from feedfabric.realtime import socket_leases

__all__ = ["Close", "Sessions"]

log = logging.getLogger(__name__)

FORBIDDEN = 4403

Close = Callable[[int, str], Awaitable[None]]


@dataclass(eq=False, slots=True)
class Session:
    member_id: uuid.UUID | None  # None: a token whose member has no profile yet (only its expiry applies)
    expires_at: float
    close: Close
    lease: str | None = None  # its place among the member's leases in Redis, when it got one


@dataclass
class Sessions:
    """The signed-in sockets of this process; `sweep` closes the ones that lost their rights."""

    interval_s: float = 2.0
    max_per_member: int = 20
    redis: aioredis.Redis | None = None
    _open: dict[object, Session] = field(default_factory=dict)
    _per_member: Counter[uuid.UUID] = field(default_factory=Counter)
    _renewed_at: float = 0.0
    _task: Background = field(default_factory=lambda: Background("websocket-rights"))

    async def admit(self, key: object, member_id: uuid.UUID | None, expires_at: float, close: Close) -> bool:
        """Registers the socket `key`, or refuses it (False, nothing registered) when its member already
        holds `max_per_member` open sockets. A socket admitted before (the legacy protocol authenticates
        twice) keeps its place."""
        known = self._open.get(key)
        if known is not None and known.member_id == member_id:
            known.expires_at, known.close = expires_at, close
            return True
        await self.forget(key)
        lease: str | None = None
        if member_id is not None:
            if self._per_member[member_id] >= self.max_per_member:
                return False
            if self.redis is not None:
                lease = uuid.uuid4().hex
                try:
                    if not await socket_leases.claim(self.redis, member_id, lease, self.max_per_member):
                        return False
                except REDIS_FAILURES:
                    log.warning("websocket leases: Redis unavailable, the per-member cap holds per process")
                    lease = None
            self._per_member[member_id] += 1
        self._open[key] = Session(member_id, expires_at, close, lease)
        return True

    async def forget(self, key: object) -> None:
        """The socket closed: it no longer counts against its member."""
        session = self._drop(key)
        if session is None or session.lease is None or session.member_id is None or self.redis is None:
            return
        with contextlib.suppress(*REDIS_FAILURES):  # an unreturned lease ends by itself
            await socket_leases.release(self.redis, session.member_id, session.lease)

    def _drop(self, key: object) -> Session | None:
        session = self._open.pop(key, None)
        if session is not None and session.member_id is not None:
            self._per_member[session.member_id] -= 1
            if self._per_member[session.member_id] <= 0:
                del self._per_member[session.member_id]
        return session

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
            await self.forget(key)
            with contextlib.suppress(Exception):  # a socket already gone has nothing left to close
                await session.close(FORBIDDEN, f"Forbidden: {reason}")
        return len(ended)

    async def close_member(self, member_id: uuid.UUID, reason: str) -> int:
        """Closes this process's sockets of the member at once (a suspension answered here: nothing more
        reaches them from this process); other processes' sweeps find the suspension within their
        interval. Returns how many."""
        ended = [(key, s) for key, s in list(self._open.items()) if s.member_id == member_id]
        for key, session in ended:
            await self.forget(key)
            with contextlib.suppress(Exception):  # a socket already gone has nothing left to close
                await session.close(FORBIDDEN, f"Forbidden: {reason}")
        return len(ended)

    async def renew_leases(self, now: float | None = None) -> None:
        """Extends the Redis leases of this process's open sockets, a third of a lease after the last time."""
        now = time.time() if now is None else now
        if self.redis is None or now - self._renewed_at < socket_leases.LEASE_SECONDS / 3:
            return
        leases = [(s.member_id, s.lease) for s in self._open.values() if s.member_id is not None and s.lease]
        if leases:
            await socket_leases.renew(self.redis, leases, now)
        self._renewed_at = now

    def start(self, pool: asyncpg.Pool) -> None:
        """Sweeps (and renews the leases) every `interval_s` until `stop`."""
        self._task.start(lambda: self._run(pool))

    async def stop(self) -> None:
        await self._task.stop()

    async def _run(self, pool: asyncpg.Pool) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.sweep(pool)
            except Exception:  # noqa: BLE001 - the next sweep retries; sockets keep their rights meanwhile
                log.warning("websocket rights sweep failed", exc_info=True)
            try:
                await self.renew_leases()
            except REDIS_FAILURES:  # retried next sweep; a lease that ends meanwhile is added back then
                log.warning("websocket leases: renewal failed", exc_info=True)
