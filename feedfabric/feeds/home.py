"""The Following feed."""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.db import posts as posts_db
from feedfabric.feeds.lists import cut
from feedfabric.models import Page


async def postgres_page(conn: asyncpg.Connection | asyncpg.Pool, viewer_id: uuid.UUID, before: uuid.UUID | None, limit: int) -> Page:
    """Fan-out on read: own posts and those of everything followed, newest first by ID."""
    return cut(await posts_db.home_page(conn, viewer_id, before, limit + 1), limit)
