"""Queries over comments."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from feedfabric.core.models import Comment
from feedfabric.db.queryable import Queryable

__all__ = ["by_ids", "get_for_update", "insert", "mark_deleted", "page"]

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


async def by_ids(conn: Queryable, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Comment]:
    """Comments a moderator deleted are left out, as from every read."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM comments WHERE id = ANY($1::uuid[]) AND deleted_at IS NULL", list(ids)
    )
    return {r["id"]: Comment.of(r) for r in rows}


async def get_for_update(conn: asyncpg.Connection, comment_id: uuid.UUID) -> Comment | None:
    """A comment not deleted, its row locked (a moderator deleting it)."""
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM comments WHERE id = $1 AND deleted_at IS NULL FOR UPDATE", comment_id
    )
    return Comment.of(row) if row is not None else None


async def mark_deleted(conn: asyncpg.Connection, comment_id: uuid.UUID) -> None:
    """DELETE_COMMENT: the row stays for what refers to it; the trigger of migration 330 uncounts it."""
    await conn.execute("UPDATE comments SET deleted_at = now() WHERE id = $1 AND deleted_at IS NULL", comment_id)


async def page(
    conn: Queryable, post_id: uuid.UUID, after: uuid.UUID | None, limit: int, viewer_id: uuid.UUID | None = None
) -> list[Comment]:
    """Oldest first, as a conversation reads; without the comments of members the viewer blocks or is
    blocked by (member_hidden, migration 320), nor those a moderator deleted. The post's comment count
    stays as stored."""
    rows = await conn.fetch(
        """SELECT c.id, c.post_id, c.author_id, c.content, c.created_at
            FROM comments c JOIN members m ON m.id = c.author_id
            WHERE c.post_id = $1 AND ($2::uuid IS NULL OR c.id > $2) AND m.status = 'active'
              AND c.deleted_at IS NULL
              AND ($4::uuid IS NULL OR NOT member_hidden($4, c.author_id, false))
            ORDER BY c.id LIMIT $3""",
        post_id,
        after,
        limit,
        viewer_id,
    )
    return [Comment.of(r) for r in rows]
