"""The Following feed: HomeFeedService over the Redis timeline, with Postgres behind it.

Redis holds post IDs only; every page is hydrated from Postgres in one query
per round, so text is never stale and the visibility rule is the same as on
the Postgres path. Postgres serves the page when Redis is down or erroring
(behind a circuit breaker), when the member has no timeline or is returning
from inactivity, and when the cursor is not in the timeline; a page that runs
past the oldest entry Redis keeps continues from Postgres. Posts of followed
celebrities, never pushed, are merged in by ID, so hybrid fan-out is
invisible to the reader; so are the viewer's own newest posts, so a member's
own writes are on the next page whatever fan-out's lag. A first page that
served posts the timeline lacked leaves an owed mark (feeds.timelines.owed: in Redis,
or in Postgres when Redis cannot take it), and the next first page fills the range
up to it from Postgres, so first pages never go backwards (docs/home-feed.md).
Both sources order by ID, so their cursors mix.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg
import redis.asyncio as aioredis

from feedfabric.core.models import FeedPage, Member, Page, PageExtras, Post
from feedfabric.core.settings import Settings
from feedfabric.db import post_extras
from feedfabric.db import posts as posts_db
from feedfabric.db.breaker import CircuitBreaker
from feedfabric.db.outbox import add_event
from feedfabric.db.pool import transaction
from feedfabric.db.redisclient import REDIS_FAILURES
from feedfabric.feeds import pages, timelines
from feedfabric.feeds.filtering import without_muted_words
from feedfabric.feeds.lists import cut
from feedfabric.feeds.relations import Relations
from feedfabric.feeds.viewer import Viewer

__all__ = ["HomeFeedService", "postgres_page"]

log = logging.getLogger("feedfabric.home")

REDIS = "redis"
POSTGRES = "postgres"
MIXED = "redis+postgres"
# Timeline reads one page may make before Postgres continues it (entries the visibility rule hides, a
# blocked or muted author's, stay in the timeline and are read past), and the largest batch of one.
MAX_TIMELINE_ROUNDS = 4
MAX_TIMELINE_BATCH = 500
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

    async def finished_page(
        self, viewer: Viewer, member: Member, relations: Relations, before: uuid.UUID | None, limit: int
    ) -> FeedPage:
        """The member's page as both APIs render it: read (`read`), the viewer's muted words of HOME
        applied while it is read so it stays full (feeds.filtering; blocks and mutes are in the
        statements), and finished with its posts' extras (feeds.pages), in one walk down the layers."""

        async def read(cursor: uuid.UUID | None, size: int) -> Page:
            return await self.read(viewer, member, cursor, size)

        async def extras_of(ids: Sequence[uuid.UUID]) -> PageExtras:
            return await post_extras.page_extras(self.reads, ids, member.id)

        page = await without_muted_words(read, extras_of, relations, "HOME", before, limit)
        return await pages.finished(self.reads, member.id, page)

    async def read(self, viewer: Viewer, member: Member, before: uuid.UUID | None, limit: int) -> Page:
        if self.redis is None:
            return await postgres_page(self.reads, member.id, before, limit)
        breaker = self.breaker.shard(timelines.shard_of(self.redis, member.id))
        if not breaker.allows:
            return await self._page_without_redis(member, before, limit)
        page: Page | None = None
        if not viewer.returning:
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for runs the read in a task of its own.
                async with asyncio.timeout(self._redis_timeout_s):
                    page = await self._from_redis(self.redis, member, viewer.home_owed, before, limit)
            except REDIS_FAILURES as error:
                breaker.failed()
                log.warning("redis unavailable for the home feed, serving from postgres: %s", type(error).__name__)
                return await self._page_without_redis(member, before, limit)
            breaker.succeeded()
            if page is not None:
                return page
        page = await postgres_page(self.reads, member.id, before, limit)
        owed = _newest_owed(page.items, member.id, set()) if before is None else None
        if owed is not None and not await self._raise_owed(self.redis, member, owed, breaker):
            await timelines.raise_owed_in_postgres(self.pool, member.id, owed)
        return page

    async def _page_without_redis(self, member: Member, before: uuid.UUID | None, limit: int) -> Page:
        """The Postgres page while the member's timeline is out of reach: the whole page (it leaves out
        nothing an earlier page showed, whichever timelines fan-out had reached), a first page's owed mark
        kept in Postgres (feeds.timelines.owed), where the next first page from Redis finds it."""
        page = await postgres_page(self.reads, member.id, before, limit)
        owed = _newest_owed(page.items, member.id, set()) if before is None else None
        if owed is not None:
            await timelines.raise_owed_in_postgres(self.pool, member.id, owed)
        return page

    @property
    def _redis_timeout_s(self) -> float:
        return self.settings.redis_timeout_ms / 1000 * 4

    async def _raise_owed(
        self, redis: aioredis.Redis, member: Member, owed: uuid.UUID, breaker: CircuitBreaker
    ) -> bool:
        """A first page Postgres served may hold posts the timeline lacks: the next first page must keep them.
        False when Redis failed: the caller serves a page that owes nothing instead."""
        try:
            async with asyncio.timeout(self._redis_timeout_s):
                await timelines.raise_owed(redis, member.id, owed)
        except REDIS_FAILURES as error:
            breaker.failed()
            log.warning("redis unavailable for the home feed's owed mark: %s", type(error).__name__)
            return False
        return True

    async def _from_redis(
        self,
        redis: aioredis.Redis,
        member: Member,
        owed_in_postgres: uuid.UUID | None,
        before: uuid.UUID | None,
        limit: int,
    ) -> Page | None:
        """None: Postgres must serve this page (no timeline, or the cursor is not in it). `owed_in_postgres`:
        the mark a page left in Postgres while Redis could not take it (read with the viewer)."""
        wanted = limit + 1
        batch = max(wanted, 20)
        # The stale-snapshot watermark (feeds.timelines.epochs), the timeline's existence and its first page, at once;
        # on a first page the owed mark too (what an earlier first page served that Redis may lack).
        owed: uuid.UUID | None = None
        owed_in_redis: uuid.UUID | None = None
        if before is None:
            first_page = await timelines.open_first_page(self.pool, redis, member.id, batch)
            opened, owed_in_redis = first_page.opened, first_page.owed
            owed = max((m for m in (owed_in_redis, owed_in_postgres) if m is not None), default=None)
        else:
            opened = await timelines.open_timeline(self.pool, redis, member.id, before, batch)
        if opened.page is None:
            await self._request_rebuild(redis, member)
            return None
        rounds = await self._read_rounds(redis, member, opened.page, opened.floor, before, wanted, batch)
        if rounds is None:
            return None
        items, source, extras = await self._complete(member, rounds, owed, wanted)
        result = cut(items, limit)
        supplied = rounds.from_redis | {p.id for p in rounds.pulled}
        if any(p.id not in supplied for p in result.items):
            source = MIXED
        if before is None:
            newest = _newest_owed(result.items, member.id, supplied)
            if newest != owed_in_redis:
                await timelines.record_owed(redis, member.id, owed_in_redis, newest)
            if owed_in_postgres is not None:
                # Its debt is in the Redis mark now (this page filled up to it, and the mark covers what it served).
                await timelines.drop_owed_in_postgres(self.pool, member.id, owed_in_postgres)
        return _with_source(result, source, extras)

    async def _read_rounds(
        self,
        redis: aioredis.Redis,
        member: Member,
        page: timelines.TimelinePage,
        floor: str | None,
        before: uuid.UUID | None,
        wanted: int,
        batch: int,
    ) -> _Rounds | None:
        """Timeline batches until the page has `wanted` visible posts or the timeline ends; None when the
        cursor is not in the timeline (or was trimmed away between rounds)."""
        rounds = _Rounds(cursor=before)
        own_floor: uuid.UUID | None = None
        covered = 0
        first = True
        examined = 0
        for _ in range(MAX_TIMELINE_ROUNDS):
            if len(rounds.visible) >= wanted:
                break
            if not first:
                # Sized by the share of entries the rule kept so far (muted or blocked authors' entries stay
                # in the timeline and are passed over here), so a mostly hidden timeline fills in few rounds.
                share = max(len(rounds.visible) / examined, 0.05) if examined else 1.0
                batch = min(MAX_TIMELINE_BATCH, max(math.ceil((wanted - len(rounds.visible)) / share), 20))
                page = await timelines.read_page(redis, member.id, rounds.cursor, batch, floor)
            if not page.cursor_found:
                return None
            ids = [uuid.UUID(i) for i in page.ids]
            rounds.from_redis.update(ids)
            if first:
                # The followed celebrities' posts, never pushed, come with the first batch, and so do the
                # extras of both: a page its first round fills needs no other statement.
                # The viewer's own posts come with them too (read your writes), only down to the batch's
                # wanted-th entry when it has that many: a page its first round fills ends above it.
                own_floor = ids[wanted - 1] if len(ids) >= wanted else None
                first_round = await timelines.first_round(
                    self.reads, self.settings, member.id, ids, before, wanted, own_floor
                )
                found = {p.id: p for p in first_round.found}
                rounds.pulled, rounds.extras = first_round.pulled, first_round.extras
            else:
                found = await posts_db.feed_by_ids(self.reads, ids, member.id) if ids else {}
            examined += len(ids)
            rounds.visible += [found[i] for i in ids if i in found]
            if first and own_floor is not None:
                covered = sum(p.id >= own_floor for p in rounds.visible)
            first = False
            if ids:
                rounds.cursor = ids[-1]
            if len(ids) < batch:
                rounds.exhausted = True
                break
        else:
            # Out of rounds with the page not full: Postgres continues it past the last entry read.
            rounds.exhausted = len(rounds.visible) < wanted
        if own_floor is not None and covered < wanted:
            # Entries down to the floor that are gone (deleted, held: still in the timeline) leave the page
            # ending below it, where the viewer's own posts that fan-out has not pushed yet may belong.
            rounds.pulled = rounds.pulled + await posts_db.by_authors_page(
                self.reads, [member.id], member.id, before, wanted
            )
        return rounds

    async def _complete(
        self, member: Member, rounds: _Rounds, owed: uuid.UUID | None, wanted: int
    ) -> tuple[list[Post], str, PageExtras]:
        """The page's posts from what the rounds gathered, with what only Postgres knows: the posts past
        the oldest entry Redis keeps, and the range an earlier first page served that the timeline may
        still lack (fan-out lags, and lands out of order)."""
        items = _merge_pulled(rounds.visible, rounds.pulled, wanted)
        cursor = rounds.cursor
        gap = owed is not None and cursor is not None and owed > cursor
        # Pulled posts (own, celebrities') below the last entry do not complete the page: only Postgres knows
        # what else lies past the oldest entry Redis keeps.
        past_end = len(items) < wanted or cursor is None or items[-1].id < cursor
        if rounds.exhausted and (past_end or gap):
            # Past the oldest entry Redis keeps: Postgres continues the page (from above the gap, if any).
            boundary = uuid.UUID(int=owed.int + 1) if gap and owed is not None else cursor
            older = await posts_db.home_page(self.reads, member.id, boundary, wanted)
            # No entry above the run's floor: Postgres served the page.
            return _merge_by_id(items, older, wanted), REDIS if boundary is not None else MIXED, rounds.extras
        if gap and owed is not None and cursor is not None:
            filled = await timelines.fill_gap(self.reads, member.id, cursor, owed, wanted)
            extras = PageExtras(
                {**rounds.extras.extras, **filled.extras.extras},
                {**rounds.extras.originals, **filled.extras.originals},
            )
            return _merge_by_id(items, filled.posts, wanted), REDIS, extras
        return items, REDIS, rounds.extras

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


@dataclass
class _Rounds:
    """What a page's timeline rounds gathered: its visible posts in timeline order, the posts pulled
    beside them (the viewer's own, followed celebrities'), every ID the timeline supplied, the extras
    the first round read, and where the last round stopped."""

    cursor: uuid.UUID | None
    visible: list[Post] = field(default_factory=list)
    pulled: list[Post] = field(default_factory=list)
    from_redis: set[uuid.UUID] = field(default_factory=set)
    extras: PageExtras = field(default_factory=lambda: PageExtras({}, {}))
    exhausted: bool = False


def _merge_pulled(visible: list[Post], pulled: list[Post], wanted: int) -> list[Post]:
    """Merges the posts of followed celebrities, which fan-out never pushed, by ID."""
    if not pulled:
        return visible[:wanted]
    merged = {p.id: p for p in visible}
    merged.update({p.id: p for p in pulled})
    return sorted(merged.values(), key=lambda p: p.id, reverse=True)[:wanted]


def _merge_by_id(items: list[Post], more: list[Post], wanted: int) -> list[Post]:
    merged = {p.id: p for p in more}
    merged.update({p.id: p for p in items})
    return sorted(merged.values(), key=lambda p: p.id, reverse=True)[:wanted]


def _newest_owed(items: list[Post], viewer_id: uuid.UUID, supplied: set[uuid.UUID]) -> uuid.UUID | None:
    """The newest post served that the timeline may lack: not read from it, not pulled at read time (the
    viewer's own posts and followed celebrities' are pulled by every first page)."""
    return max((p.id for p in items if p.id not in supplied and p.author_id != viewer_id), default=None)


def _with_source(page: Page, source: str, extras: PageExtras) -> Page:
    """The page with the first round's extras, which serialising uses when they cover every item."""
    return Page(page.items, page.next_cursor, source, extras)
