"""Queries over likes."""

from __future__ import annotations

import uuid

import asyncpg

__all__ = ["add", "remove"]


async def add(conn: asyncpg.Connection, post_id: uuid.UUID, member_id: uuid.UUID) -> bool:
    status = await conn.execute(
        "INSERT INTO likes (post_id, member_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", post_id, member_id
    )
    return bool(status.endswith(" 1"))


async def remove(conn: asyncpg.Connection, post_id: uuid.UUID, member_id: uuid.UUID) -> bool:
    status = await conn.execute("DELETE FROM likes WHERE post_id = $1 AND member_id = $2", post_id, member_id)
    return bool(status.endswith(" 1"))
