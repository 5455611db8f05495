"""post_embeddings: the stored vector of each embedded post, scanned newest first by similarPosts."""

from __future__ import annotations

import uuid

import asyncpg

__all__ = ["delete_vector", "get_vector", "newest_vectors", "upsert_vector"]


async def upsert_vector(conn: asyncpg.Connection, post_id: uuid.UUID, vector: bytes) -> None:
    await conn.execute(
        "INSERT INTO post_embeddings (post_id, vector) VALUES ($1, $2)"
        " ON CONFLICT (post_id) DO UPDATE SET vector = EXCLUDED.vector, updated_at = now()",
        post_id,
        vector,
    )


async def delete_vector(conn: asyncpg.Connection, post_id: uuid.UUID) -> None:
    await conn.execute("DELETE FROM post_embeddings WHERE post_id = $1", post_id)


async def get_vector(conn: asyncpg.Connection | asyncpg.Pool, post_id: uuid.UUID) -> bytes | None:
    found: bytes | None = await conn.fetchval("SELECT vector FROM post_embeddings WHERE post_id = $1", post_id)
    return found


async def newest_vectors(
    conn: asyncpg.Connection | asyncpg.Pool, limit: int, exclude: uuid.UUID | None = None
) -> list[tuple[uuid.UUID, bytes]]:
    """Up to `limit` vectors of the newest embedded posts (UUIDv7 order is creation order)."""
    rows = await conn.fetch(
        "SELECT post_id, vector FROM post_embeddings WHERE post_id IS DISTINCT FROM $2 ORDER BY post_id DESC LIMIT $1",
        limit,
        exclude,
    )
    return [(r["post_id"], r["vector"]) for r in rows]
