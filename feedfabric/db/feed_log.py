"""The feed log: what was served, where, and the ranking signals it had then."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg


@dataclass(frozen=True, slots=True)
class ServedPage:
    """One served page: its posts in position order (a repost as the post it shares)."""

    member_id: uuid.UUID
    feed: str
    post_ids: tuple[uuid.UUID, ...]
    source: str
    served_at: datetime


async def insert(conn: asyncpg.Connection | asyncpg.Pool, pages: Sequence[ServedPage]) -> None:
    """One statement per batch, a row per post; the signals are read in the same statement, as of serving.

    What is the same for a whole page (member, feed, source, time) is sent once per page; each post
    carries only its page's number and its position. The posts drive the join (unnest), so Postgres
    looks each one up by key.
    """
    post_ids: list[uuid.UUID] = []
    page_numbers: list[int] = []
    positions: list[int] = []
    for number, page in enumerate(pages, start=1):  # Postgres arrays count from 1
        post_ids.extend(page.post_ids)
        page_numbers.extend([number] * len(page.post_ids))
        positions.extend(range(len(page.post_ids)))
    await conn.execute(
        """WITH served AS (
               SELECT e.post_id, e.position, ($1::uuid[])[e.page] AS member_id, ($2::text[])[e.page] AS feed,
                      ($3::text[])[e.page] AS source, ($4::timestamptz[])[e.page] AS served_at
               FROM unnest($5::uuid[], $6::int[], $7::int[]) AS e(post_id, page, position)
           )
           INSERT INTO feed_log (member_id, feed, post_id, position, source,
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
           FROM served e
           JOIN posts p ON p.id = e.post_id
           LEFT JOIN author_affinity a ON a.member_id = e.member_id AND a.author_id = p.author_id""",
        [p.member_id for p in pages],
        [p.feed for p in pages],
        [p.source for p in pages],
        [p.served_at for p in pages],
        post_ids,
        page_numbers,
        positions,
    )
