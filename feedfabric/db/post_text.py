"""The two reads of posts the embeddings worker and similarPosts need, kept apart from post writes."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

__all__ = ["PostText", "feed_ids", "texts", "visible_ids"]


@dataclass(frozen=True)
class PostText:
    id: uuid.UUID
    content: str
    status: str
    repost_of: uuid.UUID | None


async def texts(conn: asyncpg.Connection | asyncpg.Pool, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, PostText]:
    rows = await conn.fetch(
        "SELECT id, content, status, repost_of FROM posts WHERE id = ANY($1::uuid[])",
        list(ids),
    )
    return {r["id"]: PostText(r["id"], r["content"], r["status"], r["repost_of"]) for r in rows}


async def feed_ids(
    conn: asyncpg.Connection | asyncpg.Pool, ids: Sequence[uuid.UUID], viewer_id: uuid.UUID | None
) -> set[uuid.UUID]:
    """`visible_ids` as the viewer's feeds show posts (feed_posts: less the members they mute)."""
    rows = await conn.fetch(
        "SELECT id FROM feed_posts($2) WHERE id = ANY($1::uuid[])",
        list(ids),
        viewer_id,
    )
    return {r["id"] for r in rows}


async def visible_ids(
    conn: asyncpg.Connection | asyncpg.Pool, ids: Sequence[uuid.UUID], viewer_id: uuid.UUID | None
) -> set[uuid.UUID]:
    rows = await conn.fetch(
        "SELECT id FROM visible_posts($2) WHERE id = ANY($1::uuid[])",
        list(ids),
        viewer_id,
    )
    return {r["id"] for r in rows}
