"""Reads from a streaming replica (DATABASE_READ_URL), and which reads may go there.

A replica lags the primary, so three rules decide, per request:

- A member who wrote reads from the primary until the replica has replayed
  the primary's WAL position taken just after that write (its LSN), and at
  most READ_YOUR_WRITES_SECONDS: they always see their own post, follow and
  like. The mark is kept in Redis, so the other API instances honour it, and
  in this process; when Redis cannot answer, the read goes to the primary.
- The replica is read only while it answers and lags by no more than
  READ_REPLICA_MAX_LAG_MS. A monitor task measures both a few times a second:
  lag is how long the primary has been ahead of the position the replica has
  replayed (0 when it has caught up), so an idle primary never looks lagged
  and a paused or stuck replay does.
- Everything else that reads (feed pages, hydration, lists) reads the replica.

Writes, authentication and subscriptions always use the primary. A read
already sent to a replica that dies fails; the monitor notices within one
poll (POLL_S) and the following requests read the primary.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from dataclasses import dataclass, field

import asyncpg
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from feedfabric.core import metrics
from feedfabric.core.background import Background

__all__ = ["ReadRouting", "replayed_position", "wal_position"]

log = logging.getLogger("feedfabric.replica")

POLL_S = 0.1
# Keyed by the token's subject (the member's external ID): a member's first write creates the member.
_MARK = "ryw:{}"
# Per-process marks kept at most this many (the oldest go first; Redis still holds them).
_LOCAL_MARKS = 100_000


async def wal_position(conn: asyncpg.Connection | asyncpg.Pool) -> int:
    """The primary's WAL insert position as a byte offset: after a commit, at or past its commit record."""
    return int(await conn.fetchval("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn"))


async def replayed_position(conn: asyncpg.Connection | asyncpg.Pool) -> int:
    """How far a standby has replayed, as a byte offset (0 when it is not a standby)."""
    return int(await conn.fetchval("SELECT coalesce(pg_last_wal_replay_lsn() - '0/0'::pg_lsn, 0)"))


@dataclass
class ReadRouting:
    """Chooses the pool for a request's reads; `replica` None: every read goes to the primary."""

    primary: asyncpg.Pool
    replica: asyncpg.Pool | None
    redis: aioredis.Redis | None
    max_lag_s: float
    marked_for_s: float
    replayed: int = 0
    lag_s: float = 0.0
    answering: bool = False
    _marks: collections.OrderedDict[str, tuple[int, float]] = field(default_factory=collections.OrderedDict)
    _ahead_since: collections.deque[tuple[float, int]] = field(default_factory=collections.deque)
    _task: Background = field(default_factory=lambda: Background("replica-monitor"))

    @property
    def replica_usable(self) -> bool:
        return self.replica is not None and self.answering and self.lag_s <= self.max_lag_s

    def start(self) -> None:
        if self.replica is not None:
            self._task.start(self._monitor)

    async def stop(self) -> None:
        await self._task.stop()

    async def pool_for(self, member_id: str | None) -> asyncpg.Pool:
        """The replica, unless it is unusable or `member_id` wrote something it has not replayed yet."""
        if self.replica is None or not self.replica_usable:
            return self.primary
        if member_id is None:
            return self.replica
        mark = await self._mark_of(member_id)
        if mark is None or mark <= self.replayed:
            return self.replica
        return self.primary

    async def wrote(self, member_id: str | None) -> None:
        """Called after a member's write committed: their reads go to the primary until the replica has it."""
        if self.replica is None or member_id is None:
            return
        position = await wal_position(self.primary)
        self._marks[member_id] = (position, time.monotonic() + self.marked_for_s)
        self._marks.move_to_end(member_id)
        while len(self._marks) > _LOCAL_MARKS:
            self._marks.popitem(last=False)
        if self.redis is not None:
            try:
                await self.redis.set(_MARK.format(member_id), position, px=max(1, int(self.marked_for_s * 1000)))
            except (RedisError, OSError) as error:
                log.warning("replica: could not share a write mark (%s); other instances may read stale", error)

    async def _mark_of(self, member_id: str) -> int | None:
        """The member's write position still to be honoured; a huge one when Redis cannot tell."""
        local = self._marks.get(member_id)
        if local is not None:
            position, until = local
            if time.monotonic() < until:
                return position
            del self._marks[member_id]
        if self.redis is None:
            return None
        try:
            shared = await self.redis.get(_MARK.format(member_id))
        except (RedisError, OSError):
            return 1 << 62  # unknown: the primary is always right
        return int(shared) if shared is not None else None

    async def _monitor(self) -> None:
        assert self.replica is not None
        while True:
            try:
                await self.measure()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - a replica down is a state, not a failure
                if self.answering:
                    log.warning("replica: not answering (%s); reads go to the primary", type(error).__name__)
                    # Its pooled connections died with it: none is handed out again once it is back.
                    await self.replica.expire_connections()
                self.answering = False
                if self._ahead_since:  # the lag keeps growing while the replica cannot be asked
                    self.lag_s = time.monotonic() - self._ahead_since[0][0]
            metrics.REPLICA_LAG.set(self.lag_s)
            metrics.REPLICA_USABLE.set(1 if self.replica_usable else 0)
            await asyncio.sleep(POLL_S)

    async def measure(self) -> None:
        """One look at both servers: the replica's replayed position, and how long the primary has been past it."""
        assert self.replica is not None
        ahead = await wal_position(self.primary)
        now = time.monotonic()
        # Noted before the replica is asked: one that does not answer is behind everything written since.
        if not self._ahead_since or self._ahead_since[-1][1] < ahead:
            self._ahead_since.append((now, ahead))
        async with asyncio.timeout(1.0):
            replayed = await replayed_position(self.replica)
        while self._ahead_since and self._ahead_since[0][1] <= replayed:
            self._ahead_since.popleft()
        self.replayed = replayed
        self.lag_s = now - self._ahead_since[0][0] if self._ahead_since else 0.0
        if not self.answering:
            log.info("replica: answering, %.0f ms behind", self.lag_s * 1000)
        self.answering = True
