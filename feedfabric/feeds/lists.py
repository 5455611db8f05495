"""The newest-first lists served from Postgres: favourites, tags, mentions, a member's posts, notifications.

Each asks for one row more than the page so `next_cursor` is None exactly when
nothing older exists.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from feedfabric.core.models import Page
from feedfabric.db import notifications as notifications_db
from feedfabric.db import posts as posts_db
from feedfabric.db.queryable import Queryable
from feedfabric.feeds import text

__all__ = ["cut", "favourites", "member_posts", "mentions", "notifications", "tag"]


def cut(rows: list[Any], limit: int, key: str = "id") -> Page:
    """Trims the look-ahead row and names the cursor of the next page."""
    items = rows[:limit]
    more = len(rows) > limit
    last = items[-1] if items else None
    cursor = None
    if more and last is not None:
        cursor = str(last[key] if isinstance(last, asyncpg.Record) else getattr(last, key))
    return Page(items, cursor, "postgres")


async def favourites(conn: Queryable, viewer_id: uuid.UUID, before: uuid.UUID | None, limit: int) -> Page:
    return cut(await posts_db.favourites_page(conn, viewer_id, before, limit + 1), limit)


async def tag(
    conn: Queryable, tag_name: str, viewer_id: uuid.UUID | None, before: uuid.UUID | None, limit: int
) -> Page:
    normalised = text.normalise_tag(tag_name)
    return cut(await posts_db.tag_page(conn, normalised, viewer_id, before, limit + 1), limit)


async def mentions(conn: Queryable, viewer_id: uuid.UUID, before: uuid.UUID | None, limit: int) -> Page:
    return cut(await posts_db.mention_page(conn, viewer_id, before, limit + 1), limit, key="item_id")


async def member_posts(
    conn: Queryable,
    author_id: uuid.UUID,
    viewer_id: uuid.UUID | None,
    *,
    newest_first: bool,
    after: uuid.UUID | None,
    gt: uuid.UUID | None,
    gte: uuid.UUID | None,
    lt: uuid.UUID | None,
    lte: uuid.UUID | None,
    limit: int,
) -> Page:
    """A member's own posts; the cursor narrows the bounds in the direction of the order."""
    if after is not None:
        if newest_first:
            lt = after if lt is None or after < lt else lt
        else:
            gt = after if gt is None or after > gt else gt
    rows = await posts_db.author_page(
        conn, author_id, viewer_id, newest_first=newest_first, gt=gt, gte=gte, lt=lt, lte=lte, limit=limit + 1
    )
    return cut(rows, limit)


async def notifications(conn: Queryable, recipient_id: uuid.UUID, before: uuid.UUID | None, limit: int) -> Page:
    return cut(await notifications_db.page(conn, recipient_id, before, limit + 1), limit)
