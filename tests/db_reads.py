"""State the tests read back to check what the product wrote, where the product itself never reads it
that way (so these statements are no part of feedfabric.db)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg


async def affinity_for(
    conn: asyncpg.Connection, member_id: uuid.UUID, author_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, float]:
    """The member's affinity to each of these authors (absent means 0)."""
    rows = await conn.fetch(
        "SELECT author_id, score FROM author_affinity WHERE member_id = $1 AND author_id = ANY($2::uuid[])",
        member_id,
        list(author_ids),
    )
    return {r["author_id"]: r["score"] for r in rows}


async def interest_for(conn: asyncpg.Connection, member_id: uuid.UUID, tags: Sequence[str]) -> dict[str, float]:
    rows = await conn.fetch(
        "SELECT tag, score FROM topic_interest WHERE member_id = $1 AND tag = ANY($2::text[])",
        member_id,
        list(tags),
    )
    return {r["tag"]: r["score"] for r in rows}


async def top_interests(conn: asyncpg.Connection, member_id: uuid.UUID, limit: int = 10) -> list[tuple[str, float]]:
    rows = await conn.fetch(
        "SELECT tag, score FROM topic_interest WHERE member_id = $1 AND score > 0 ORDER BY score DESC, tag LIMIT $2",
        member_id,
        limit,
    )
    return [(r["tag"], r["score"]) for r in rows]


async def top_authors(conn: asyncpg.Connection, member_id: uuid.UUID, limit: int = 10) -> list[tuple[uuid.UUID, float]]:
    rows = await conn.fetch(
        "SELECT author_id, score FROM author_affinity WHERE member_id = $1 AND score > 0"
        " ORDER BY score DESC, author_id LIMIT $2",
        member_id,
        limit,
    )
    return [(r["author_id"], r["score"]) for r in rows]


async def owned_ready_media(conn: asyncpg.Connection, owner_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of these media are the member's own and READY."""
    rows = await conn.fetch(
        "SELECT id FROM media WHERE id = ANY($1::uuid[]) AND owner_id = $2 AND status = 'ready'",
        list(ids),
        owner_id,
    )
    return {r["id"] for r in rows}


async def reader_effects(
    conn: asyncpg.Connection | asyncpg.Pool, member_id: uuid.UUID
) -> tuple[dict[uuid.UUID, float], dict[str, float]]:
    """A reader's stored effects: by author, by tag."""
    authors = await conn.fetch("SELECT author_id, effect FROM reader_author_effects WHERE member_id = $1", member_id)
    topics = await conn.fetch("SELECT tag, effect FROM reader_topic_effects WHERE member_id = $1", member_id)
    return {r["author_id"]: r["effect"] for r in authors}, {r["tag"]: r["effect"] for r in topics}


async def inferred_tags(conn: asyncpg.Connection, post_id: uuid.UUID) -> list[str]:
    rows = await conn.fetch(
        "SELECT tag FROM post_tags WHERE post_id = $1 AND source = 'inferred' ORDER BY tag", post_id
    )
    return [r["tag"] for r in rows]
