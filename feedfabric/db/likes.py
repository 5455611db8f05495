"""Queries over likes."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from feedfabric.db.executor import Executor


async def add(conn: asyncpg.Connection, post_id: uuid.UUID, member_id: uuid.UUID) -> bool:
    status = await conn.execute(
        "INSERT INTO likes (post_id, member_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", post_id, member_id
    )
    return bool(status.endswith(" 1"))


async def remove(conn: asyncpg.Connection, post_id: uuid.UUID, member_id: uuid.UUID) -> bool:
    status = await conn.execute("DELETE FROM likes WHERE post_id = $1 AND member_id = $2", post_id, member_id)
    return bool(status.endswith(" 1"))


async def counts(conn: Executor, post_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, int]:
    """From the trigger-kept post_stats (migration 110): reading a post never scans its likes."""
    rows = await conn.fetch(
        "SELECT post_id, likes AS n FROM post_stats WHERE post_id = ANY($1::uuid[]) AND likes > 0",
        list(post_ids),
    )
    return {r["post_id"]: r["n"] for r in rows}


async def liked_among(conn: Executor, member_id: uuid.UUID, post_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    rows = await conn.fetch(
        "SELECT post_id FROM likes WHERE member_id = $1 AND post_id = ANY($2::uuid[])", member_id, list(post_ids)
    )
    return {r["post_id"] for r in rows}
