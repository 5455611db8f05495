"""Queries over comments."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from feedfabric.core.models import Comment
from feedfabric.db.executor import Executor

_COLUMNS = "id, post_id, author_id, content, created_at"


async def insert(
    conn: asyncpg.Connection, comment_id: uuid.UUID, post_id: uuid.UUID, author_id: uuid.UUID, content: str
) -> Comment:
    row = await conn.fetchrow(
        f"INSERT INTO comments (id, post_id, author_id, content) VALUES ($1, $2, $3, $4) RETURNING {_COLUMNS}",
        comment_id,
        post_id,
        author_id,
        content,
    )
    return Comment.of(row)


async def by_ids(conn: Executor, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Comment]:
    rows = await conn.fetch(f"SELECT {_COLUMNS} FROM comments WHERE id = ANY($1::uuid[])", list(ids))
    return {r["id"]: Comment.of(r) for r in rows}


async def page(
    conn: Executor, post_id: uuid.UUID, after: uuid.UUID | None, limit: int, viewer_id: uuid.UUID | None = None
) -> list[Comment]:
    """Oldest first, as a conversation reads; without the comments of members the viewer blocks or is
    blocked by (member_hidden, migration 320). The post's comment count stays as stored."""
    rows = await conn.fetch(
        """SELECT c.id, c.post_id, c.author_id, c.content, c.created_at
            FROM comments c JOIN members m ON m.id = c.author_id
            WHERE c.post_id = $1 AND ($2::uuid IS NULL OR c.id > $2) AND m.status = 'active'
              AND ($4::uuid IS NULL OR NOT member_hidden($4, c.author_id, false))
            ORDER BY c.id LIMIT $3""",
        post_id,
        after,
        limit,
        viewer_id,
    )
    return [Comment.of(r) for r in rows]
