"""The Following feed: HomeFeedService over the Redis timeline, with Postgres behind it.

Redis holds post IDs only; every page is hydrated from Postgres in one query
per round, so text is never stale and the visibility rule is the same as on
the Postgres path. Postgres serves the page when Redis is down or erroring
(behind a circuit breaker), when the member has no timeline or is returning
from inactivity, and when the cursor is not in the timeline; a page that runs
past the oldest entry Redis keeps continues from Postgres. Posts of followed
celebrities, never pushed, are merged in by ID, so hybrid fan-out is
invisible to the reader. Both sources order by ID, so their cursors mix.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

import asyncpg
import redis.asyncio as aioredis

from feedfabric.breaker import CircuitBreaker
from feedfabric.db import posts as posts_db
from feedfabric.db.outbox import add_event
from feedfabric.db.pool import transaction
from feedfabric.feeds import timelines
from feedfabric.feeds.lists import cut
from feedfabric.feeds.viewer import Viewer
from feedfabric.models import Member, Page, PageExtras, Post
from feedfabric.redisclient import REDIS_ERRORS
from feedfabric.settings import Settings

log = logging.getLogger("feedfabric.home")

REDIS = "redis"
POSTGRES = "postgres"
MIXED = "redis+postgres"
# A missing timeline asks for a rebuild at most this often per member.
REBUILD_REQUEST_TTL_S = 300


async def postgres_page(
    conn: asyncpg.Connection | asyncpg.Pool, viewer_id: uuid.UUID, before: uuid.UUID | None, limit: int
) -> Page:
    """Fan-out on read: own posts and those of everything followed, newest first by ID."""
    return cut(await posts_db.home_page(conn, viewer_id, before, limit + 1), limit)


@dataclass
class HomeFeedService:
    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis | None
    breaker: CircuitBreaker
    # Pages and hydration, which may lag (a replica: feedfabric.db.replica); the timeline's bookkeeping and
    # rebuild requests use `pool`, the primary.
    read_pool: asyncpg.Pool | None = None

    @property
    def reads(self) -> asyncpg.Pool:
        return self.read_pool or self.pool

    async def read(self, viewer: Viewer, member: Member, before: uuid.UUID | None, limit: int) -> Page:
        if self.redis is None or viewer.returning:
            return await postgres_page(self.reads, member.id, before, limit)
        breaker = self.breaker.shard(timelines.shard_of(self.redis, member.id))
        if not breaker.allows:
            return await postgres_page(self.reads, member.id, before, limit)
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for runs the read in a task of its own.
            async with asyncio.timeout(self.settings.redis_timeout_ms / 1000 * 4):
                page = await self._from_redis(self.redis, member, before, limit)
        except (*REDIS_ERRORS, OSError, TimeoutError) as error:
            breaker.failed()
            log.warning("redis unavailable for the home feed, serving from postgres: %s", type(error).__name__)
            return await postgres_page(self.reads, member.id, before, limit)
        breaker.succeeded()
        return page if page is not None else await postgres_page(self.reads, member.id, before, limit)

    async def _from_redis(
        self, redis: aioredis.Redis, member: Member, before: uuid.UUID | None, limit: int
    ) -> Page | None:
        """None: Postgres must serve this page (no timeline, or the cursor is not in it)."""
        wanted = limit + 1
        batch = max(wanted, 20)
        # The stale-snapshot watermark (timelines.py), the timeline's existence and its first page, at once.
        opened = await timelines.open_timeline(self.pool, redis, member.id, before, batch)
        if opened.page is None:
            await self._request_rebuild(redis, member)
            return None
        floor, page = opened.floor, opened.page
        visible: list[Post] = []
        pulled: list[Post] = []
        extras = PageExtras({}, {})
        cursor: uuid.UUID | None = before
        exhausted = False
        rounds = 0
        while len(visible) < wanted:
            if rounds:
                batch = max(wanted - len(visible), 20)
                page = await timelines.read_page(redis, member.id, cursor, batch, floor)
            if not page.cursor_found:
                return None  # not in the timeline (or trimmed away between rounds)
            ids = [uuid.UUID(i) for i in page.ids]
            if not rounds:
                # The followed celebrities' posts, never pushed, come with the first batch, and so do the
                # extras of both: a page its first round fills needs no other statement.
                first = await timelines.first_round(self.reads, self.settings, member.id, ids, before, wanted)
                found = {p.id: p for p in first.found}
                pulled, extras = first.pulled, first.extras
            else:
                found = await posts_db.visible_by_ids(self.reads, ids, member.id) if ids else {}
            rounds += 1
            visible += [found[i] for i in ids if i in found]
            if ids:
                cursor = ids[-1]
            if len(ids) < batch:
                exhausted = True
                break
        items = _merge_pulled(visible, pulled, wanted)
        source = REDIS
        if exhausted and len(items) < wanted:
            # Past the oldest entry Redis keeps: Postgres continues the page.
            boundary = cursor
            older = await posts_db.home_page(self.reads, member.id, boundary, wanted)
            merged = {p.id: p for p in older}
            merged.update({p.id: p for p in items})
            items = sorted(merged.values(), key=lambda p: p.id, reverse=True)[:wanted]
            if boundary is None or any(p.id < boundary for p in items[:limit]):
                source = MIXED
        return _with_source(cut(items, limit), source, extras)

    async def _request_rebuild(self, redis: aioredis.Redis, member: Member) -> None:
        """A member with no timeline (new, or Redis lost its data) gets one rebuilt through the pipeline."""
        if await redis.set(f"feed:rebuild:{member.id}", 1, nx=True, ex=REBUILD_REQUEST_TTL_S):
            # Commits here (feeds/__init__.py): a read asks for the rebuild, and reads hold no transaction.
            async with transaction(self.pool) as conn:
                await add_event(
                    conn,
                    "MemberReturned",
                    str(member.id),
                    {"memberId": str(member.id), "reason": "no-timeline"},
                    shards=self.settings.outbox_shards,
                )


def _merge_pulled(visible: list[Post], pulled: list[Post], wanted: int) -> list[Post]:
    """Merges the posts of followed celebrities, which fan-out never pushed, by ID."""
    if not pulled:
        return visible[:wanted]
    merged = {p.id: p for p in visible}
    merged.update({p.id: p for p in pulled})
    return sorted(merged.values(), key=lambda p: p.id, reverse=True)[:wanted]


def _with_source(page: Page, source: str, extras: PageExtras) -> Page:
    """The page with the first round's extras, which serialising uses when they cover every item."""
    return Page(page.items, page.next_cursor, source, extras)
