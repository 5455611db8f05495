"""Background rebalancing of one playlist's keys, started after the write that grew them has committed.

Why in the background: a rebalance rewrites every item of the playlist, which a
request that moved one item should not pay for, and it must not run inside
that request's transaction (the promise is that a move writes one row). Why
it is safe: it takes the playlist row lock like every writer and keeps the
(rank, id) order, so a concurrent insert or move either runs before it or
sees the new keys. A failed or skipped run is harmless: keys only get
longer, and the next write past the bound schedules another.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import asyncpg

from feedfabric.db.pool import transaction
from feedfabric.feeds import playlists

__all__ = ["Rebalances"]

log = logging.getLogger("feedfabric.playlists")


class Rebalances:
    """One pending run per playlist, per process (Resources.rebalances); strong references keep the tasks
    alive until they finish."""

    def __init__(self) -> None:
        self._running: dict[uuid.UUID, asyncio.Task[bool]] = {}

    def schedule(self, pool: asyncpg.Pool, playlist_id: uuid.UUID, bound: int | None = None) -> asyncio.Task[bool]:
        """Starts (or joins) the rebalance of one playlist; call only after the write committed."""
        running = self._running
        task = running.get(playlist_id)
        if task is not None and not task.done():
            return task
        task = asyncio.get_running_loop().create_task(_run(pool, playlist_id, bound))
        running[playlist_id] = task
        task.add_done_callback(lambda t: running.pop(playlist_id, None) if running.get(playlist_id) is t else None)
        return task

    async def wait_idle(self) -> None:
        """Waits for every scheduled rebalance: the app at shutdown, before its pools close (and tests)."""
        while pending := [t for t in self._running.values() if not t.done()]:
            await asyncio.gather(*pending, return_exceptions=True)


async def _run(pool: asyncpg.Pool, playlist_id: uuid.UUID, bound: int | None) -> bool:
    try:
        # Commits here (feeds/__init__.py): a background task, its own boundary.
        async with transaction(pool) as conn:
            done = await playlists.rebalance(conn, playlist_id, bound)
        if done:
            log.info("rebalanced playlist %s", playlist_id)
        return done
    except Exception:  # noqa: BLE001 - a background task must not die silently nor crash the loop
        log.exception("rebalancing playlist %s failed", playlist_id)
        return False
