"""What the feed log says about the feeds: served, engaged and the rate, computed on read.

A served post is engaged when its reader liked, commented on or reposted it within 24 hours of
serving. Each test is a key lookup (likes' primary key, comments by author, a member's repost).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from feedfabric.db.executor import Executor

# `f` is a feed_log row.
ENGAGED = """(EXISTS (SELECT 1 FROM likes l WHERE l.post_id = f.post_id AND l.member_id = f.member_id
                      AND l.created_at >= f.served_at AND l.created_at < f.served_at + interval '24 hours')
           OR EXISTS (SELECT 1 FROM comments c WHERE c.author_id = f.member_id AND c.post_id = f.post_id
                      AND c.created_at >= f.served_at AND c.created_at < f.served_at + interval '24 hours')
           OR EXISTS (SELECT 1 FROM posts r WHERE r.author_id = f.member_id AND r.repost_of = f.post_id
                      AND r.created_at >= f.served_at AND r.created_at < f.served_at + interval '24 hours'))"""


@dataclass(frozen=True)
class DayStats:
    feed: str
    preset: str | None
    day: datetime
    pages_served: int
    posts_served: int
    posts_engaged: int

    @property
    def engagement_rate(self) -> float:
        return self.posts_engaged / self.posts_served if self.posts_served else 0.0


@dataclass(frozen=True)
class PositionStats:
    position: int
    posts_served: int
    posts_engaged: int


async def by_day(conn: Executor, days: int) -> list[DayStats]:
    """Per UTC day (today included), feed and For You preset, newest day first."""
    rows = await conn.fetch(
        f"""SELECT date_trunc('day', f.served_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS day, f.feed, f.preset,
                   count(DISTINCT (f.member_id, f.served_at)) AS pages, count(*) AS posts,
                   count(*) FILTER (WHERE {ENGAGED}) AS engaged
            FROM feed_log f
            WHERE f.served_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
                                 - make_interval(days => $1 - 1)
            GROUP BY 1, 2, 3
            ORDER BY 1 DESC, 2, 3""",
        days,
    )
    return [DayStats(r["feed"], r["preset"], r["day"], r["pages"], r["posts"], r["engaged"]) for r in rows]


async def by_position(conn: Executor, days: int, positions: int = 20) -> list[PositionStats]:
    rows = await conn.fetch(
        f"""SELECT f.position, count(*) AS posts, count(*) FILTER (WHERE {ENGAGED}) AS engaged
            FROM feed_log f
            WHERE f.served_at >= now() - make_interval(days => $1) AND f.position < $2
            GROUP BY 1 ORDER BY 1""",
        days,
        positions,
    )
    return [PositionStats(r["position"], r["posts"], r["engaged"]) for r in rows]


async def training_rows(conn: Executor, since: datetime | None, until: datetime) -> list[asyncpg.Record]:
    """The first serving of each post to each reader in [since, until), with its feed, signals and
    outcome, oldest first.

    Only the first: a post served again had been passed over, so its later rows are a sample of the
    posts a reader did not want, and one engagement would mark every serving of the day before it as
    engaged. Rows of a post its reader had already liked or commented on before serving are left out
    too (it cannot be engaged with again, so its row says nothing about what the reader wants served)."""
    found: list[asyncpg.Record] = await conn.fetch(
        f"""SELECT f.served_at, f.affinity, f.interest, f.favourite, f.age_seconds, f.similarity, f.popularity,
                   f.affinity_rate, f.interest_rate, {ENGAGED} AS engaged, f.feed
            FROM (SELECT g.*, row_number() OVER (PARTITION BY g.member_id, g.post_id ORDER BY g.served_at, g.id) AS nth
                  FROM feed_log g WHERE g.served_at < $2) f
            WHERE f.nth = 1 AND ($1::timestamptz IS NULL OR f.served_at >= $1)
              AND NOT EXISTS (SELECT 1 FROM likes l WHERE l.post_id = f.post_id AND l.member_id = f.member_id
                                                      AND l.created_at < f.served_at)
              AND NOT EXISTS (SELECT 1 FROM comments c WHERE c.author_id = f.member_id AND c.post_id = f.post_id
                                                         AND c.created_at < f.served_at)
            ORDER BY f.served_at, f.id""",
        since,
        until,
    )
    return found


async def rows_since(conn: Executor, since: datetime | None, until: datetime) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM feed_log WHERE ($1::timestamptz IS NULL OR served_at >= $1) AND served_at < $2",
            since,
            until,
        )
    )
