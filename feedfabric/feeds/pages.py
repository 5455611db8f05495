"""Finished pages: a page of post rows as FeedPosts, their extras loaded once, for every feed alike.

Both APIs render the same page, so the domain finishes it and the schema and
the REST serializers only map it: one load (one statement, db.post_extras)
instead of each going through DataLoaders of their own.
"""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.core.models import FeedPage, FeedPost, Page, PageExtras
from feedfabric.db import post_extras
from feedfabric.feeds.feed_posts import feed_posts

__all__ = ["finished", "load_extras", "load_feed_posts"]


async def load_extras(reads: asyncpg.Pool, viewer_id: uuid.UUID | None, page: Page) -> PageExtras:
    """Extras of the page's posts and of their visible originals, as the viewer sees them.

    A page whose source read them with its posts (the home feed's first round) carries them; any
    other page, or one with a post they do not cover (a later round, Postgres continuing the page),
    costs one statement.
    """
    if not page.items:
        return PageExtras({}, {})
    known = page.extras
    if known is not None and all(p.id in known.extras for p in page.items):
        return known
    return await post_extras.page_extras(reads, [p.id for p in page.items], viewer_id)


async def load_feed_posts(reads: asyncpg.Pool, viewer_id: uuid.UUID | None, page: Page) -> list[FeedPost]:
    return feed_posts(page.items, await load_extras(reads, viewer_id, page))


async def finished(reads: asyncpg.Pool, viewer_id: uuid.UUID | None, page: Page) -> FeedPage:
    """A page of post rows as the finished page both APIs render."""
    return FeedPage(await load_feed_posts(reads, viewer_id, page), page.next_cursor, page.source)
