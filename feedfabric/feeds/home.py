"""The Following feed."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import asyncpg

from feedfabric.db import posts as posts_db
from feedfabric.feeds.lists import cut
from feedfabric.feeds.viewer import Viewer
from feedfabric.models import Member, Page

if TYPE_CHECKING:
    from feedfabric.context import Resources


async def postgres_page(
    conn: asyncpg.Connection | asyncpg.Pool, viewer_id: uuid.UUID, before: uuid.UUID | None, limit: int
) -> Page:
    """Fan-out on read: own posts and those of everything followed, newest first by ID."""
    return cut(await posts_db.home_page(conn, viewer_id, before, limit + 1), limit)


async def read(resources: Resources, viewer: Viewer, member: Member, before: uuid.UUID | None, limit: int) -> Page:
    return await postgres_page(resources.pool, member.id, before, limit)
