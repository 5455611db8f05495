"""Queries over the one follows table (target_type member, tag or playlist) and member_stats."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

__all__ = ["add", "followed_tags", "followers_page", "following_page", "member_stats", "remember_past_follow", "remove"]


async def add(conn: asyncpg.Connection, follower_id: uuid.UUID, target_type: str, target_id: str) -> bool:
    """True when the follow is new (a trigger keeps member_stats in step)."""
    status = await conn.execute(
        "INSERT INTO follows (follower_id, target_type, target_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        follower_id,
        target_type,
        target_id,
    )
    return bool(status.endswith(" 1"))


async def remove(conn: asyncpg.Connection, follower_id: uuid.UUID, target_type: str, target_id: str) -> bool:
    status = await conn.execute(
        "DELETE FROM follows WHERE follower_id = $1 AND target_type = $2 AND target_id = $3",
        follower_id,
        target_type,
        target_id,
    )
    return bool(status.endswith(" 1"))


async def remember_past_follow(conn: asyncpg.Connection, follower_id: uuid.UUID, member_id: uuid.UUID) -> None:
    """Records that the follower once followed the member: `feedfabric verify`'s evidence for the timeline
    entries an unfollow leaves, once the unfollow has taken the follow notification back."""
    await conn.execute(
        "INSERT INTO past_follows (follower_id, member_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        follower_id,
        member_id,
    )


async def member_stats(
    conn: asyncpg.Connection | asyncpg.Pool, member_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, tuple[int, int]]:
    """(followers, following) per member: followers as the trigger keeps them (migration 280), following
    counted from the member's own range of the follows primary key (index-only), in one statement."""
    rows = await conn.fetch(
        "SELECT m.id, COALESCE(s.followers, 0) AS followers,"
        " (SELECT count(*) FROM follows f WHERE f.follower_id = m.id AND f.target_type = 'member') AS following"
        " FROM unnest($1::uuid[]) AS m (id) LEFT JOIN member_stats s ON s.member_id = m.id",
        list(member_ids),
    )
    return {r["id"]: (r["followers"], r["following"]) for r in rows}


async def follower_counts(
    conn: asyncpg.Connection | asyncpg.Pool, target_type: str, target_ids: Sequence[str]
) -> dict[str, int]:
    rows = await conn.fetch(
        "SELECT target_id, count(*) AS n FROM follows"
        " WHERE target_type = $1 AND target_id = ANY($2::text[]) GROUP BY target_id",
        target_type,
        list(target_ids),
    )
    return {r["target_id"]: r["n"] for r in rows}


async def followed_among(
    conn: asyncpg.Connection | asyncpg.Pool, follower_id: uuid.UUID, target_type: str, target_ids: Sequence[str]
) -> set[str]:
    rows = await conn.fetch(
        "SELECT target_id FROM follows WHERE follower_id = $1 AND target_type = $2 AND target_id = ANY($3::text[])",
        follower_id,
        target_type,
        list(target_ids),
    )
    return {r["target_id"] for r in rows}


_M = "m.id, m.external_id, m.username, m.display_name, m.avatar_url, m.status, m.last_seen_at"
Position = tuple[datetime, str]
"""A keyset position in a follow list: (follow time, the listed member's ID as text)."""


async def followers_page(
    conn: asyncpg.Connection | asyncpg.Pool, member_id: uuid.UUID, before: Position | None, limit: int
) -> list[asyncpg.Record]:
    """Active members following `member_id`, most recent follow first, with `followed_at` (index
    follows_target_recent_idx: one range scan)."""
    after = "AND (f.created_at, f.follower_id) < ($2, $3::uuid)" if before is not None else ""
    args: list[Any] = [str(member_id), *(before or ()), limit]
    found: list[asyncpg.Record] = await conn.fetch(
        f"""SELECT {_M}, f.created_at AS followed_at FROM follows f
            JOIN members m ON m.id = f.follower_id AND m.status = 'active'
            WHERE f.target_type = 'member' AND f.target_id = $1 {after}
            ORDER BY f.created_at DESC, f.follower_id DESC LIMIT ${len(args)}""",
        *args,
    )
    return found


async def following_page(
    conn: asyncpg.Connection | asyncpg.Pool, follower_id: uuid.UUID, before: Position | None, limit: int
) -> list[asyncpg.Record]:
    """Active members `follower_id` follows, most recent follow first (index follows_follower_recent_idx)."""
    after = "AND (f.created_at, f.target_id) < ($2, $3)" if before is not None else ""
    args: list[Any] = [follower_id, *(before or ()), limit]
    found: list[asyncpg.Record] = await conn.fetch(
        f"""SELECT {_M}, f.created_at AS followed_at FROM follows f
            JOIN members m ON m.id = f.target_id::uuid AND m.status = 'active'
            WHERE f.follower_id = $1 AND f.target_type = 'member' {after}
            ORDER BY f.created_at DESC, f.target_id DESC LIMIT ${len(args)}""",
        *args,
    )
    return found


async def followed_tags(conn: asyncpg.Connection | asyncpg.Pool, follower_id: uuid.UUID) -> list[str]:
    """Alphabetical (the primary key's order)."""
    rows = await conn.fetch(
        "SELECT target_id FROM follows WHERE follower_id = $1 AND target_type = 'tag' ORDER BY target_id",
        follower_id,
    )
    return [r["target_id"] for r in rows]
