"""Logs served Following, favourites and For You pages off the request path, in batches; never fails a read.

A page is recorded after it is finished, from what it read (no I/O on the request path); one
background task takes up to `batch` pages at a time, computes their rows' signals
(feeds.served_signals), COPYs the rows into the day's partition and counts the exposure they add in
memory; every `fold_every_s` it folds those counts into Postgres, one upsert per (reader, author or
tag) pair, so a reader's pages within the interval share their pairs' upserts.

What a crash loses, stated: the pages still queued (at most `max_queue`, normally the last
`interval_s` of serving) and their exposure counts, and the counts not folded yet (at most the last
`fold_every_s` of serving; their rows are logged); a batch whose COPY failed is lost whole (rows
and counts), a fold that failed keeps its counts for the next fold.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg

from feedfabric.core.background import Background
from feedfabric.core.models import FeedPage, FeedPost, Page
from feedfabric.db import feed_log as feed_log_db
from feedfabric.db.feed_log import ServedPage
from feedfabric.feeds.served_signals import Served, ServedPost, ServedRow, SignalBook

__all__ = ["FeedLog", "log_pages", "write"]

log = logging.getLogger("feedfabric.feed_log")


def served(
    member_id: uuid.UUID,
    feed: str,
    page: FeedPage,
    served_at: datetime,
    *,
    preset: str | None = None,
    reasons: Sequence[str] | None = None,
    similarities: Sequence[float] | None = None,
) -> Served:
    """A finished page as the log keeps it. A repost is logged as the post it shares (what the reader
    sees and acts on), with that post's own counts and tags; a repost whose original the reader may
    not see is not logged (nothing of the original was shown). Positions count every post served.
    (On the request path: one plain tuple a post, feeds.served_signals.ServedRow.)"""
    posts: list[ServedRow] = []
    append = posts.append
    for position, post in enumerate(page.posts):
        shown: FeedPost | None = post.original if post.row.repost_of is not None else post
        if shown is None:
            continue
        row = shown.row
        append(
            (
                row.id,
                position,
                row.author_id,
                tuple(shown.tags),
                row.created_at,
                shown.like_count,
                shown.comment_count,
                shown.viewer_liked,
                reasons[position] if reasons is not None else None,
                similarities[position] if similarities is not None else 0.0,
            )
        )
    return Served(member_id, feed, page.source, served_at, tuple(posts), preset)


async def described(conn: asyncpg.Connection, pages: Sequence[ServedPage]) -> list[Served]:
    """Pages known only by their posts' IDs, with what they showed as of their serving time."""
    seen = await feed_log_db.describe(conn, pages)
    out = []
    for n, page in enumerate(pages):
        posts = tuple(
            ServedPost.of(
                post_id,
                position,
                seen[n, post_id],
                page.reasons[position] if page.reasons is not None else None,
                page.similarities[position] if page.similarities is not None else 0.0,
            )
            for position, post_id in enumerate(page.post_ids)
            if (n, post_id) in seen
        )
        out.append(Served(page.member_id, page.feed, page.source, page.served_at, posts, page.preset))
    return out


async def write(
    conn: asyncpg.Connection,
    book: SignalBook,
    pages: Sequence[Served | ServedPage],
    comment_weight: float,
    *,
    fold: bool = True,
) -> int:
    """Writes a batch of pages' rows and, with `fold`, folds the exposure counted so far (theirs and any
    left unfolded before); how many rows."""
    by_ids = [p for p in pages if isinstance(p, ServedPage)]
    found = iter(await described(conn, by_ids)) if by_ids else iter(())
    finished = [next(found) if isinstance(p, ServedPage) else p for p in pages]
    batch = await book.batch(conn, finished, comment_weight)
    try:
        await feed_log_db.copy_rows(conn, batch.rows)
    except BaseException:
        book.forget([p.member_id for p in finished])
        raise
    book.counted(batch)
    if fold:
        await fold_kept(conn, book)
    return batch.rows.count


async def fold_kept(conn: asyncpg.Connection, book: SignalBook) -> None:
    """Folds the book's unfolded exposure; a failed fold keeps it for the next."""
    try:
        await book.fold(conn)
    except (TimeoutError, asyncpg.PostgresError, OSError) as error:
        log.warning("feed log exposure not folded (%s); kept for the next fold", type(error).__name__)


async def log_pages(
    pool: asyncpg.Pool | asyncpg.Connection, pages: Sequence[ServedPage], *, comment_weight: float = 3.0
) -> None:
    """Logs pages known by their posts' IDs now, with the signals as of each page's `served_at` (tools,
    tests, the simulation); the API's pages go through a FeedLog."""
    if isinstance(pool, asyncpg.Pool):
        async with pool.acquire() as conn:
            await write(conn, SignalBook(), pages, comment_weight)
    else:
        await write(pool, SignalBook(), pages, comment_weight)


class FeedLog:
    """A bounded queue of served pages drained by one background task; a full queue drops pages rather
    than slow a read (`dropped` counts their rows)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        max_queue: int = 2_500,
        batch: int = 50,
        interval_s: float = 0.2,
        comment_weight: float = 3.0,
        readers_kept: int = 5_000,
        fold_every_s: float = 0.0,
        max_unfolded: int = 200_000,
    ) -> None:
        """`max_queue` and `batch` count pages: 2,500 pages of 20 are 50,000 rows, 50 pages about 1,000.
        `readers_kept`: readers whose signals stay in memory (feeds.served_signals). `fold_every_s`:
        the exposure counted is folded into Postgres at most this often (0: every batch), or sooner
        once `max_unfolded` (member, author or tag) pairs wait; a reader's pages within it add to the
        same pairs, so a longer schedule upserts fewer rows (docs/foryou.md states the delay)."""
        self.pool = pool
        self.queue: asyncio.Queue[Served | ServedPage] = asyncio.Queue(max_queue)
        self.batch = batch
        self.interval_s = interval_s
        self.comment_weight = comment_weight
        self.book = SignalBook(readers_kept)
        self.fold_every_s = fold_every_s
        self.max_unfolded = max_unfolded
        self.dropped = 0
        self._folded_at = time.monotonic()
        self._task = Background("feed-log")

    def record(
        self,
        member_id: uuid.UUID,
        feed: str,
        page: FeedPage | Page,
        *,
        preset: str | None = None,
        reasons: list[str] | None = None,
        similarities: list[float] | None = None,
    ) -> None:
        """Queues a served page. A finished page (FeedPage) carries what it showed, so its row is as of
        now; a page of bare posts (tools, tests) is read as of now when its batch is written. For You
        pages add their preset and, per post, the candidate source and similarity."""
        now = datetime.now(UTC)
        item: Served | ServedPage
        if isinstance(page, FeedPage):
            if not page.posts:
                return
            item = served(member_id, feed, page, now, preset=preset, reasons=reasons, similarities=similarities)
        else:
            if not page.items:
                return
            item = ServedPage(
                member_id,
                feed,
                tuple(post.repost_of or post.id for post in page.items),
                page.source,
                now,
                preset,
                tuple(reasons) if reasons is not None else None,
                tuple(similarities) if similarities is not None else None,
            )
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += len(item.posts) if isinstance(item, Served) else len(item.post_ids)

    def start(self) -> None:
        self._task.start(self._run)

    async def stop(self) -> None:
        await self._task.stop()
        while await self.flush():
            pass
        await self.fold()

    def _fold_due(self) -> bool:
        book = self.book
        if not book.unfolded_pairs:
            return False
        return book.unfolded_pairs >= self.max_unfolded or time.monotonic() - self._folded_at >= self.fold_every_s

    async def flush(self) -> int:
        """Writes up to one batch of pages (and folds the exposure when due); returns how many pages it took."""
        pages: list[Served | ServedPage] = []
        while not self.queue.empty() and len(pages) < self.batch:
            pages.append(self.queue.get_nowait())
        if pages:
            try:
                async with self.pool.acquire() as conn:
                    await write(conn, self.book, pages, self.comment_weight, fold=False)
                    if self._fold_due():
                        self._folded_at = time.monotonic()
                        await fold_kept(conn, self.book)
            except Exception:
                log.exception("feed log batch of %d pages lost", len(pages))
        elif self._fold_due():
            await self.fold()
        return len(pages)

    async def fold(self) -> None:
        """Folds what was counted and not folded yet, now (on a schedule, and when the API stops)."""
        self._folded_at = time.monotonic()
        if self.book.unfolded_pairs:
            try:
                async with self.pool.acquire() as conn:
                    await fold_kept(conn, self.book)
            except Exception:
                log.exception("feed log exposure not folded")

    async def _run(self) -> None:
        while True:
            if await self.flush() < self.batch:
                await asyncio.sleep(self.interval_s)
