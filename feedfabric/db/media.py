"""media and post_media rows. Only READY media are ever listed for posts or served."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

__all__ = ["create_pending", "get_media", "get_one", "locked_usage", "mark_ready", "mark_rejected", "usage"]

_COLUMNS = "id, owner_id, status, content_type, width, height, byte_size, score, reason, created_at, updated_at"


async def create_pending(conn: asyncpg.Connection, media_id: uuid.UUID, owner_id: uuid.UUID, byte_size: int) -> None:
    await conn.execute(
        "INSERT INTO media (id, owner_id, status, byte_size) VALUES ($1, $2, 'pending', $3)",
        media_id,
        owner_id,
        byte_size,
    )


async def locked_usage(conn: asyncpg.Connection, owner_id: uuid.UUID) -> int:
    """The member's stored media bytes, their usage row locked until the transaction ends: uploads by one
    member check their quota one at a time (media_usage, kept by a trigger on media)."""
    await conn.execute("INSERT INTO media_usage (owner_id) VALUES ($1) ON CONFLICT DO NOTHING", owner_id)
    return int(await conn.fetchval("SELECT bytes FROM media_usage WHERE owner_id = $1 FOR UPDATE", owner_id))


async def usage(conn: asyncpg.Connection | asyncpg.Pool, owner_id: uuid.UUID) -> int:
    return int(await conn.fetchval("SELECT coalesce(max(bytes), 0) FROM media_usage WHERE owner_id = $1", owner_id))


async def get_one(conn: asyncpg.Connection, media_id: uuid.UUID, *, for_update: bool = False) -> asyncpg.Record | None:
    lock = " FOR UPDATE" if for_update else ""
    return await conn.fetchrow(f"SELECT {_COLUMNS} FROM media WHERE id = $1{lock}", media_id)


async def get_media(conn: asyncpg.Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, asyncpg.Record]:
    """Rows by ID in any status (callers check status and owner); missing IDs are absent."""
    rows = await conn.fetch(f"SELECT {_COLUMNS} FROM media WHERE id = ANY($1::uuid[])", list(ids))
    return {r["id"]: r for r in rows}


async def mark_ready(
    conn: asyncpg.Connection,
    media_id: uuid.UUID,
    *,
    content_type: str,
    width: int,
    height: int,
    byte_size: int,
    score: float,
) -> bool:
    """PENDING → READY; False when the row was not pending (already decided)."""
    done = await conn.fetchval(
        "UPDATE media SET status = 'ready', content_type = $2, width = $3, height = $4, byte_size = $5,"
        " score = $6, reason = NULL, updated_at = now() WHERE id = $1 AND status = 'pending' RETURNING true",
        media_id,
        content_type,
        width,
        height,
        byte_size,
        score,
    )
    return bool(done)


async def mark_rejected(conn: asyncpg.Connection, media_id: uuid.UUID, reason: str) -> bool:
    """PENDING → REJECTED with the reason code shown to the uploader."""
    done = await conn.fetchval(
        "UPDATE media SET status = 'rejected', reason = $2, updated_at = now()"
        " WHERE id = $1 AND status = 'pending' RETURNING true",
        media_id,
        reason,
    )
    return bool(done)
