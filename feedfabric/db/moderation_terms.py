"""Queries over moderation terms and the one version number that moves with them."""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.core.moderation import Term
from feedfabric.db.queryable import Queryable

__all__ = ["add", "count", "find", "folded_terms", "newest_first", "remove", "version"]


async def version(conn: Queryable) -> int:
    """One small row: what a write reads before it reuses the matcher compiled for this version."""
    found: int = await conn.fetchval("SELECT version FROM moderation_terms_version")
    return found


async def folded_terms(conn: Queryable) -> tuple[int, list[str]]:
    """The version and every term as matched, read in one statement so the two agree."""
    rows = await conn.fetch(
        """SELECT v.version, t.folded FROM moderation_terms_version v
           LEFT JOIN moderation_terms t ON true"""
    )
    return int(rows[0]["version"]), [r["folded"] for r in rows if r["folded"] is not None]


async def _bump(conn: asyncpg.Connection) -> None:
    """The clock in microseconds (never below the last version plus one): a process that cached a version
    of another database (a restored backup, a test's fresh copy) never takes it for this one's."""
    await conn.execute(
        """UPDATE moderation_terms_version
           SET version = GREATEST(version + 1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint)"""
    )


async def add(conn: asyncpg.Connection, term_id: uuid.UUID, phrase: str, folded: str) -> Term:
    """The term; the existing one when the same folded phrase is there already."""
    row = await conn.fetchrow(
        """INSERT INTO moderation_terms (id, phrase, folded) VALUES ($1, $2, $3)
           ON CONFLICT (folded) DO NOTHING RETURNING id, phrase, created_at""",
        term_id,
        phrase,
        folded,
    )
    if row is None:
        row = await conn.fetchrow("SELECT id, phrase, created_at FROM moderation_terms WHERE folded = $1", folded)
    else:
        await _bump(conn)
    return Term(row["id"], row["phrase"], row["created_at"])


async def count(conn: Queryable) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM moderation_terms"))


async def find(conn: Queryable, folded: str) -> Term | None:
    row = await conn.fetchrow("SELECT id, phrase, created_at FROM moderation_terms WHERE folded = $1", folded)
    return Term(row["id"], row["phrase"], row["created_at"]) if row is not None else None


async def remove(conn: asyncpg.Connection, term_id: uuid.UUID) -> bool:
    removed = await conn.fetchval("DELETE FROM moderation_terms WHERE id = $1 RETURNING true", term_id)
    if removed:
        await _bump(conn)
    return bool(removed)


async def newest_first(conn: Queryable) -> list[Term]:
    rows = await conn.fetch("SELECT id, phrase, created_at FROM moderation_terms ORDER BY created_at DESC, id DESC")
    return [Term(r["id"], r["phrase"], r["created_at"]) for r in rows]
