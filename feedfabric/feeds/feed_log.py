"""Logs served Following and favourites pages off the request path, in batches; never fails a read."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from datetime import UTC, datetime

import asyncpg

from feedfabric.core.models import Page
from feedfabric.db import feed_log as feed_log_db
from feedfabric.db.feed_log import ServedPage

log = logging.getLogger("feedfabric.feed_log")


class FeedLog:
    """A bounded queue of served pages drained by one background task; a full queue drops pages rather
    than slow a read (`dropped` counts their rows)."""

    def __init__(self, pool: asyncpg.Pool, *, max_queue: int = 2_500, batch: int = 50, interval_s: float = 0.2) -> None:
        """`max_queue` and `batch` count pages: 2,500 pages of 20 are 50,000 rows, 50 pages about 1,000."""
        self.pool = pool
        self.queue: asyncio.Queue[ServedPage] = asyncio.Queue(max_queue)
        self.batch = batch
        self.interval_s = interval_s
        self.dropped = 0
        self._task: asyncio.Task[None] | None = None

    def record(
        self,
        member_id: uuid.UUID,
        feed: str,
        page: Page,
        *,
        preset: str | None = None,
        reasons: list[str] | None = None,
        similarities: list[float] | None = None,
    ) -> None:
        """For You pages add their preset and, per post, the candidate source and similarity."""
        if not page.items:
            return
        # A repost is logged as the post it shares: that is what the reader sees and acts on.
        served = ServedPage(
            member_id,
            feed,
            tuple(post.repost_of or post.id for post in page.items),
            page.source,
            datetime.now(UTC),
            preset,
            tuple(reasons) if reasons is not None else None,
            tuple(similarities) if similarities is not None else None,
        )
        try:
            self.queue.put_nowait(served)
        except asyncio.QueueFull:
            self.dropped += len(served.post_ids)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="feed-log")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flush()

    async def flush(self) -> int:
        """Writes up to one batch of pages; returns how many pages it took."""
        pages: list[ServedPage] = []
        while not self.queue.empty() and len(pages) < self.batch:
            pages.append(self.queue.get_nowait())
        if pages:
            try:
                await feed_log_db.insert(self.pool, pages)
            except Exception:
                log.exception("feed log batch of %d rows lost", sum(len(p.post_ids) for p in pages))
        return len(pages)

    async def _run(self) -> None:
        while True:
            if await self.flush() < self.batch:
                await asyncio.sleep(self.interval_s)
