"""Queries over members."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

import asyncpg

from feedfabric.core.models import Member

__all__ = [
    "by_external_id",
    "by_ids",
    "by_username",
    "ids_by_usernames",
    "lock",
    "set_status",
    "suspended_among",
    "touch_seen",
    "upsert",
    "viewer_by_external_id",
]

_COLUMNS = "id, external_id, username, display_name, avatar_url, status, last_seen_at"


async def by_external_id(conn: asyncpg.Connection | asyncpg.Pool, external_id: str) -> Member | None:
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM members WHERE external_id = $1", external_id)
    return Member.of(row) if row else None


async def viewer_by_external_id(
    conn: asyncpg.Connection | asyncpg.Pool, external_id: str
) -> tuple[Member, uuid.UUID | None, int] | None:
    """The signed-in member with their home feed's owed mark kept in Postgres (`home_owed`) and the version of
    their relations (feeds.relations): columns more in the lookup every request makes, so a page learns of
    the mark, and whether the relations it holds are current, without a statement of its own."""
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS}, home_owed, relations_version FROM members WHERE external_id = $1", external_id
    )
    return (Member.of(row), row["home_owed"], int(row["relations_version"])) if row else None


async def by_username(conn: asyncpg.Connection | asyncpg.Pool, username: str) -> Member | None:
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM members WHERE lower(username) = lower($1)", username)
    return Member.of(row) if row else None


async def by_ids(conn: asyncpg.Connection | asyncpg.Pool, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Member]:
    rows = await conn.fetch(f"SELECT {_COLUMNS} FROM members WHERE id = ANY($1::uuid[])", list(ids))
    return {r["id"]: Member.of(r) for r in rows}


async def ids_by_usernames(conn: asyncpg.Connection, usernames: Sequence[str]) -> dict[str, uuid.UUID]:
    rows = await conn.fetch(
        "SELECT lower(username) AS name, id FROM members WHERE lower(username) = ANY($1::text[]) AND status = 'active'",
        [u.lower() for u in usernames],
    )
    return {r["name"]: r["id"] for r in rows}


async def upsert(
    conn: asyncpg.Connection,
    member_id: uuid.UUID,
    external_id: str,
    username: str,
    display_name: str,
    avatar_url: str | None,
) -> Member:
    row = await conn.fetchrow(
        f"""INSERT INTO members (id, external_id, username, display_name, avatar_url)
            VALUES ($1, $2, $3, $4, $5)
            ON CONFLICT (external_id) DO UPDATE
               SET username = EXCLUDED.username, display_name = EXCLUDED.display_name,
                   avatar_url = EXCLUDED.avatar_url, updated_at = now()
            RETURNING {_COLUMNS}""",
        member_id,
        external_id,
        username,
        display_name,
        avatar_url,
    )
    return Member.of(row)


async def lock(conn: asyncpg.Connection, member_id: uuid.UUID) -> None:
    """Serialises a member's own writes that check a count (favourites)."""
    await conn.execute("SELECT 1 FROM members WHERE id = $1 FOR UPDATE", member_id)


async def set_status(conn: asyncpg.Connection, member_id: uuid.UUID, status: str) -> Member:
    row = await conn.fetchrow(
        f"UPDATE members SET status = $2, updated_at = now() WHERE id = $1 RETURNING {_COLUMNS}",
        member_id,
        status,
    )
    return Member.of(row)


async def touch_seen(conn: asyncpg.Connection, member_id: uuid.UUID, granularity: timedelta) -> datetime | None:
    """Moves last-seen to now if it is older than `granularity`; returns the old value, or None if it was recent.

    The row lock makes concurrent requests agree: only one of them sees the old value.
    """
    found: datetime | None = await conn.fetchval(
        """UPDATE members m SET last_seen_at = now()
           FROM (SELECT last_seen_at AS old FROM members WHERE id = $1 FOR UPDATE) o
           WHERE m.id = $1 AND o.old < now() - $2::interval
           RETURNING o.old""",
        member_id,
        granularity,
    )
    return found


async def suspended_among(conn: asyncpg.Connection | asyncpg.Pool, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of these members are suspended now (the primary key serves it; one statement per sweep)."""
    rows = await conn.fetch("SELECT id FROM members WHERE id = ANY($1::uuid[]) AND status = 'suspended'", list(ids))
    return {r["id"] for r in rows}
