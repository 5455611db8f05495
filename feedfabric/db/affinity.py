"""author_affinity, topic_interest and like_grants: how engagement shapes a member's taste.

Scores are plain sums of weights, so a like and its unlike cancel exactly.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

__all__ = ["Like", "LikeGrant", "add_affinity", "add_interest", "grant_likes", "record_like_grant", "take_like_grant"]


@dataclass(frozen=True)
class LikeGrant:
    author_id: uuid.UUID
    tags: list[str]
    weight: float


async def add_affinity(conn: asyncpg.Connection, member_id: uuid.UUID, author_id: uuid.UUID, delta: float) -> None:
    await conn.execute(
        "INSERT INTO author_affinity (member_id, author_id, score) VALUES ($1, $2, $3)"
        " ON CONFLICT (member_id, author_id) DO UPDATE SET score = author_affinity.score + EXCLUDED.score",
        member_id,
        author_id,
        delta,
    )


async def add_interest(conn: asyncpg.Connection, member_id: uuid.UUID, tags: Sequence[str], delta: float) -> None:
    if not tags:
        return
    await conn.execute(
        "INSERT INTO topic_interest (member_id, tag, score)"
        " SELECT $1, t, $3 FROM unnest($2::text[]) AS t"
        " ON CONFLICT (member_id, tag) DO UPDATE SET score = topic_interest.score + EXCLUDED.score",
        member_id,
        sorted(set(tags)),
        delta,
    )


async def record_like_grant(
    conn: asyncpg.Connection, post_id: uuid.UUID, member_id: uuid.UUID, grant: LikeGrant
) -> bool:
    """Stores what a like gave; False when this like was already granted (nothing to add again)."""
    inserted = await conn.fetchval(
        "INSERT INTO like_grants (post_id, member_id, author_id, tags, weight) VALUES ($1, $2, $3, $4, $5)"
        " ON CONFLICT (post_id, member_id) DO NOTHING RETURNING true",
        post_id,
        member_id,
        grant.author_id,
        grant.tags,
        grant.weight,
    )
    return bool(inserted)


async def take_like_grant(conn: asyncpg.Connection, post_id: uuid.UUID, member_id: uuid.UUID) -> LikeGrant | None:
    """Removes and returns what a like gave; None when there is nothing to take back."""
    row = await conn.fetchrow(
        "DELETE FROM like_grants WHERE post_id = $1 AND member_id = $2 RETURNING author_id, tags, weight",
        post_id,
        member_id,
    )
    if row is None:
        return None
    return LikeGrant(author_id=row["author_id"], tags=list(row["tags"]), weight=row["weight"])


@dataclass(frozen=True)
class Like:
    post_id: uuid.UUID
    member_id: uuid.UUID
    author_id: uuid.UUID


async def grant_likes(
    conn: asyncpg.Connection, likes: Sequence[Like], weight: float, joined_after: datetime
) -> set[uuid.UUID]:
    """What record_like_grant, add_affinity and add_interest do for each like (with tags_of_post's tags),
    for many likes in one statement: a like already granted adds nothing again. The likes must be of distinct
    (post, member) pairs. Returns the likers who joined after `joined_after` (their effects are refitted).

    Each score moves by the sum of its likes' weights, as one like after another would move it; the rows
    are written in key order, so two batches touching the same rows wait rather than deadlock.
    """
    found = await conn.fetchval(
        "WITH given AS (SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[]) AS g(post_id, member_id, author_id)),"
        " granted AS (INSERT INTO like_grants (post_id, member_id, author_id, tags, weight)"
        "  SELECT g.post_id, g.member_id, g.author_id,"
        "   ARRAY(SELECT t.tag FROM post_tags t WHERE t.post_id = g.post_id ORDER BY t.tag), $4 FROM given g"
        "  ORDER BY g.post_id, g.member_id"
        "  ON CONFLICT (post_id, member_id) DO NOTHING RETURNING member_id, author_id, tags, weight),"
        " affinity AS (INSERT INTO author_affinity (member_id, author_id, score)"
        "  SELECT member_id, author_id, sum(weight) FROM granted WHERE member_id <> author_id"
        "  GROUP BY member_id, author_id ORDER BY member_id, author_id"
        "  ON CONFLICT (member_id, author_id) DO UPDATE SET score = author_affinity.score + EXCLUDED.score),"
        " interest AS (INSERT INTO topic_interest (member_id, tag, score)"
        "  SELECT member_id, tag, sum(weight) FROM granted, unnest(tags) AS tag"
        "  GROUP BY member_id, tag ORDER BY member_id, tag"
        "  ON CONFLICT (member_id, tag) DO UPDATE SET score = topic_interest.score + EXCLUDED.score)"
        " SELECT coalesce(array_agg(m.id), '{}') FROM members m"
        "  WHERE m.id IN (SELECT member_id FROM given) AND m.created_at > $5",
        [like.post_id for like in likes],
        [like.member_id for like in likes],
        [like.author_id for like in likes],
        weight,
        joined_after,
    )
    return set(found)
