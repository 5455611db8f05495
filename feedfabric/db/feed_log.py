"""The feed log: what was served, where, and the ranking signals it had then."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg


@dataclass(frozen=True)
class Served:
    member_id: uuid.UUID
    feed: str
    post_id: uuid.UUID
    position: int
    source: str
    served_at: datetime


async def insert(conn: asyncpg.Connection | asyncpg.Pool, rows: Sequence[Served]) -> None:
    """One statement per batch; the signals are read in the same statement, as of serving."""
    await conn.execute(
        """INSERT INTO feed_log (member_id, feed, post_id, position, source,
                                 affinity, interest, favourite, age_seconds, served_at)
           SELECT e.member_id, e.feed, e.post_id, e.position, e.source,
                  COALESCE(a.score, 0),
                  COALESCE((SELECT max(ti.score) FROM post_tags pt
                            JOIN topic_interest ti ON ti.tag = pt.tag AND ti.member_id = e.member_id
                            WHERE pt.post_id = e.post_id), 0),
                  EXISTS (SELECT 1 FROM favourites f
                          WHERE f.member_id = e.member_id AND f.favourite_id = p.author_id),
                  GREATEST(extract(epoch FROM e.served_at - p.created_at), 0),
                  e.served_at
           FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::int[], $5::text[], $6::timestamptz[])
                AS e(member_id, feed, post_id, position, source, served_at)
           JOIN posts p ON p.id = e.post_id
           LEFT JOIN author_affinity a ON a.member_id = e.member_id AND a.author_id = p.author_id""",
        [r.member_id for r in rows], [r.feed for r in rows], [r.post_id for r in rows],
        [r.position for r in rows], [r.source for r in rows], [r.served_at for r in rows],
    )

