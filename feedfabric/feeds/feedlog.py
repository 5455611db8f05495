"""Logs served Following and favourites pages off the request path, in batches; never fails a read."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from datetime import UTC, datetime

import asyncpg

from feedfabric.db import feed_log as feed_log_db
from feedfabric.db.feed_log import Served
from feedfabric.models import Page

log = logging.getLogger("feedfabric.feedlog")


class FeedLog:
    """A bounded queue drained by one background task; a full queue drops rows rather than slow a read."""

    def __init__(self, pool: asyncpg.Pool, *, max_queue: int = 50_000, batch: int = 1000,
                 interval_s: float = 0.2) -> None:
        self.pool = pool
        self.queue: asyncio.Queue[Served] = asyncio.Queue(max_queue)
        self.batch = batch
        self.interval_s = interval_s
        self.dropped = 0
        self._task: asyncio.Task[None] | None = None

    def record(self, member_id: uuid.UUID, feed: str, page: Page) -> None:
        now = datetime.now(UTC)
        for position, post in enumerate(page.items):
            # A repost is logged as the post it shares: that is what the reader sees and acts on.
            row = Served(member_id, feed, post.repost_of or post.id, position, page.source, now)
            try:
                self.queue.put_nowait(row)
            except asyncio.QueueFull:
                self.dropped += 1

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="feed-log")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flush()

    async def flush(self) -> int:
        rows: list[Served] = []
        while not self.queue.empty() and len(rows) < self.batch:
            rows.append(self.queue.get_nowait())
        if rows:
            try:
                await feed_log_db.insert(self.pool, rows)
            except Exception:
                log.exception("feed log batch of %d rows lost", len(rows))
        return len(rows)

    async def _run(self) -> None:
        while True:
            if await self.flush() < self.batch:
                await asyncio.sleep(self.interval_s)
