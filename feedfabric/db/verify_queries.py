"""SQL behind `feedfabric verify`: what Postgres says each Redis timeline must and may hold.

The rules are in `feedfabric.feeds.verify`; these queries take a batch of members at
once (arrays, one round trip per batch) and are bounded by each member's
lower bound, so memory follows the batch, not the data.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

__all__ = [
    "MemberRow",
    "member_by_external_id",
    "members_page",
    "pending_fanouts",
    "pending_rebuilds",
    "required",
    "unexplained",
]


@dataclass(frozen=True)
class MemberRow:
    id: uuid.UUID
    external_id: str
    active: bool


async def members_page(
    conn: asyncpg.Connection, after: uuid.UUID, limit: int, inactive_after_days: int
) -> list[MemberRow]:
    rows = await conn.fetch(
        "SELECT id, external_id, last_seen_at >= now() - make_interval(days => $3) AS active"
        " FROM members WHERE id > $1 ORDER BY id LIMIT $2",
        after,
        limit,
        inactive_after_days,
    )
    return [MemberRow(r["id"], r["external_id"], r["active"]) for r in rows]


async def member_by_external_id(
    conn: asyncpg.Connection, external_id: str, inactive_after_days: int
) -> MemberRow | None:
    row = await conn.fetchrow(
        "SELECT id, external_id, last_seen_at >= now() - make_interval(days => $2) AS active"
        " FROM members WHERE external_id = $1",
        external_id,
        inactive_after_days,
    )
    return None if row is None else MemberRow(row["id"], row["external_id"], row["active"])


async def pending_fanouts(conn: asyncpg.Connection) -> set[str]:
    """Posts whose PostCreated worker-events has not finished: in flight, or parked as a dead letter (which also
    marks it processed)."""
    rows = await conn.fetch(
        "SELECT o.key FROM outbox o WHERE o.event_type = 'PostCreated' AND (NOT EXISTS ("
        " SELECT 1 FROM processed_events pe WHERE pe.group_name = 'worker-events' AND pe.event_id = o.id)"
        " OR EXISTS (SELECT 1 FROM dead_letters d WHERE d.group_name = 'worker-events' AND d.key = o.key))"
    )
    return {r[0] for r in rows}


async def pending_rebuilds(conn: asyncpg.Connection) -> set[str]:
    """Members with a MemberReturned rebuild not yet done by worker-events."""
    rows = await conn.fetch(
        "SELECT o.payload->>'memberId' FROM outbox o WHERE o.event_type = 'MemberReturned' AND (NOT EXISTS ("
        " SELECT 1 FROM processed_events pe WHERE pe.group_name = 'worker-events' AND pe.event_id = o.id)"
        " OR EXISTS (SELECT 1 FROM dead_letters d WHERE d.group_name = 'worker-events' AND d.key = o.key))"
    )
    return {r[0] for r in rows if r[0]}


# What fan-out must have pushed above each member's lower bound: their own
# posts, and posts of followed non-celebrity members and of followed tags
# whose follow is older than the post (what a follow merges is not required). Deleted posts
# are not required (fan-out may or may not have pushed them). Celebrity counts
# follows through is_celebrity, exactly as fan-out does.
_REQUIRED = """
WITH m AS (SELECT * FROM unnest($1::uuid[], $2::uuid[]) AS t(member_id, lower))
SELECT m.member_id, r.id::text AS post_id
FROM m CROSS JOIN LATERAL (
    SELECT p.id FROM posts p
    WHERE p.author_id = m.member_id AND p.id > m.lower AND p.status <> 'deleted'
    UNION
    SELECT p.id FROM follows f JOIN posts p ON p.author_id = f.target_id::uuid
    WHERE f.follower_id = m.member_id AND f.target_type = 'member'
      AND p.id > m.lower AND p.status <> 'deleted' AND p.created_at > f.created_at
      AND NOT is_celebrity(f.target_id::uuid, $3)
    UNION
    SELECT p.id FROM follows f JOIN post_tags pt ON pt.tag = f.target_id JOIN posts p ON p.id = pt.post_id
    WHERE f.follower_id = m.member_id AND f.target_type = 'tag'
      AND pt.post_id > m.lower AND p.status <> 'deleted' AND p.created_at > f.created_at
) r
"""


async def required(
    conn: asyncpg.Connection, lowers: dict[uuid.UUID, uuid.UUID], celebrity_threshold: int
) -> dict[uuid.UUID, set[str]]:
    """Per member, the post IDs (text) fan-out must have pushed with IDs above the member's lower bound."""
    if not lowers:
        return {}
    members = list(lowers)
    rows = await conn.fetch(_REQUIRED, members, [lowers[m] for m in members], celebrity_threshold)
    out: dict[uuid.UUID, set[str]] = {m: set() for m in members}
    for r in rows:
        out[r["member_id"]].add(r["post_id"])
    return out


# An entry is explained when the post exists and is the member's own, or its
# author is or was followed (a past follow is known by its follow
# notification, or, once an unfollow took that back, by past_follows), or it
# carries a tag the member follows.
_UNEXPLAINED = """
SELECT e.member_id, e.post_id::text AS post_id
FROM unnest($1::uuid[], $2::uuid[]) AS e(member_id, post_id)
LEFT JOIN posts p ON p.id = e.post_id
WHERE p.id IS NULL OR NOT (
    p.author_id = e.member_id
    OR EXISTS (SELECT 1 FROM follows f WHERE f.follower_id = e.member_id
               AND f.target_type = 'member' AND f.target_id = p.author_id::text)
    OR EXISTS (SELECT 1 FROM notifications n WHERE n.recipient_id = p.author_id
               AND n.actor_id = e.member_id AND n.kind = 'follow')
    OR EXISTS (SELECT 1 FROM past_follows pf WHERE pf.follower_id = e.member_id AND pf.member_id = p.author_id)
    OR EXISTS (SELECT 1 FROM post_tags pt JOIN follows f ON f.follower_id = e.member_id
               AND f.target_type = 'tag' AND f.target_id = pt.tag WHERE pt.post_id = p.id)
)
"""


async def unexplained(
    conn: asyncpg.Connection, entries: list[tuple[uuid.UUID, uuid.UUID]]
) -> dict[uuid.UUID, set[str]]:
    """Of (member, post) timeline entries, those no timeline rule could have written."""
    if not entries:
        return {}
    rows = await conn.fetch(_UNEXPLAINED, [m for m, _ in entries], [p for _, p in entries])
    out: dict[uuid.UUID, set[str]] = {}
    for r in rows:
        out.setdefault(r["member_id"], set()).add(r["post_id"])
    return out
