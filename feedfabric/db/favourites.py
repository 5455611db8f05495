"""Queries over favourites: up to a limit of members a member never wants to miss."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from feedfabric.core.models import Member
from feedfabric.db.members import _COLUMNS

__all__ = ["add", "count_active", "exists", "listed", "remove"]


async def count_active(conn: asyncpg.Connection, member_id: uuid.UUID) -> int:
    """The favourites the member sees listed: the limit counts these, so a favourite suspended later
    does not hold a slot the member cannot see (they may hold one more than the limit if it returns)."""
    return int(
        await conn.fetchval(
            """SELECT count(*) FROM favourites f JOIN members m ON m.id = f.favourite_id AND m.status = 'active'
               WHERE f.member_id = $1""",
            member_id,
        )
    )


async def exists(conn: asyncpg.Connection, member_id: uuid.UUID, favourite_id: uuid.UUID) -> bool:
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM favourites WHERE member_id = $1 AND favourite_id = $2)",
            member_id,
            favourite_id,
        )
    )


async def add(conn: asyncpg.Connection, member_id: uuid.UUID, favourite_id: uuid.UUID) -> None:
    await conn.execute(
        "INSERT INTO favourites (member_id, favourite_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        member_id,
        favourite_id,
    )


async def remove(conn: asyncpg.Connection, member_id: uuid.UUID, favourite_id: uuid.UUID) -> None:
    await conn.execute("DELETE FROM favourites WHERE member_id = $1 AND favourite_id = $2", member_id, favourite_id)


async def listed(conn: asyncpg.Connection | asyncpg.Pool, member_id: uuid.UUID) -> list[Member]:
    """Active favourites, most recently added first: a suspended one is left out, as the follow lists
    leave out suspended members (db/follows.py), and shows again if unsuspended."""
    cols = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
    rows = await conn.fetch(
        f"""SELECT {cols} FROM favourites f JOIN members m ON m.id = f.favourite_id AND m.status = 'active'
            WHERE f.member_id = $1 ORDER BY f.created_at DESC, f.favourite_id""",
        member_id,
    )
    return [Member.of(r) for r in rows]


async def among(
    conn: asyncpg.Connection | asyncpg.Pool, member_id: uuid.UUID, candidate_ids: Sequence[uuid.UUID]
) -> set[uuid.UUID]:
    rows = await conn.fetch(
        "SELECT favourite_id FROM favourites WHERE member_id = $1 AND favourite_id = ANY($2::uuid[])",
        member_id,
        list(candidate_ids),
    )
    return {r["favourite_id"] for r in rows}
