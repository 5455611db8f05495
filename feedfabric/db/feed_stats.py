"""What the feed log says about the feeds: served, engaged and the rate, computed on read.

A served post is engaged when its reader liked, commented on or reposted it within 24 hours of
serving. Each test is a key lookup (likes' primary key, comments by author, a member's repost).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from feedfabric.db.queryable import Queryable

__all__ = [
    "FEEDS",
    "TRAINING_COLUMNS",
    "DayStats",
    "by_day",
    "by_position",
    "copy_effect_cells",
    "copy_training_rows",
    "rows_since",
    "stage_training_rows",
    "training_rows",
]

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


async def by_day(conn: Queryable, days: int) -> list[DayStats]:
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


async def by_position(conn: Queryable, days: int, positions: int = 20) -> list[PositionStats]:
    rows = await conn.fetch(
        f"""SELECT f.position, count(*) AS posts, count(*) FILTER (WHERE {ENGAGED}) AS engaged
            FROM feed_log f
            WHERE f.served_at >= now() - make_interval(days => $1) AND f.position < $2
            GROUP BY 1 ORDER BY 1""",
        days,
        positions,
    )
    return [PositionStats(r["position"], r["posts"], r["engaged"]) for r in rows]


def first_servings(since: str, until: str) -> str:
    """A subquery of the feed log's rows (with `engaged`) that training learns from: the first serving
    of each post to each reader in [since, until) (`since` NULL: from the start), as SQL expressions.

    Only the first: a post served again had been passed over, so its later rows are a sample of the
    posts a reader did not want, and one engagement would mark every serving of the day before it as
    engaged. Rows of a post its reader had already liked or commented on before serving are left out
    too (it cannot be engaged with again, so its row says nothing about what the reader wants served)."""
    return f"""(SELECT f.*, {ENGAGED} AS engaged
            FROM (SELECT g.*, row_number() OVER (PARTITION BY g.member_id, g.post_id ORDER BY g.served_at, g.id) AS nth
                  FROM feed_log g WHERE g.served_at < {until}) f
            WHERE f.nth = 1 AND ({since}::timestamptz IS NULL OR f.served_at >= {since})
              AND NOT EXISTS (SELECT 1 FROM likes l WHERE l.post_id = f.post_id AND l.member_id = f.member_id
                                                      AND l.created_at < f.served_at)
              AND NOT EXISTS (SELECT 1 FROM comments c WHERE c.author_id = f.member_id AND c.post_id = f.post_id
                                                         AND c.created_at < f.served_at))"""


async def training_rows(conn: Queryable, since: datetime | None, until: datetime) -> list[asyncpg.Record]:
    """The rows training learns from (first_servings) with their feed, signals and outcome, oldest
    first, in one statement: for a look at a small log; training itself streams them (copy_training_rows)."""
    found: list[asyncpg.Record] = await conn.fetch(
        f"""SELECT r.served_at, r.affinity, r.interest, r.favourite, r.age_seconds, r.similarity, r.popularity,
                   r.affinity_rate, r.interest_rate, r.author_effect, r.topic_effect, r.engaged, r.feed
            FROM {first_servings("$1", "$2")} r
            ORDER BY r.served_at, r.id""",
        since,
        until,
    )
    return found


# The columns copy_training_rows streams, each a float8, in this order (feed: its index in FEEDS).
TRAINING_COLUMNS = (
    "served_at",
    "id",
    "affinity",
    "interest",
    "favourite",
    "age_seconds",
    "similarity",
    "popularity",
    "affinity_rate",
    "interest_rate",
    "author_effect",
    "topic_effect",
    "engaged",
    "feed",
)
FEEDS = ("following", "favourites", "for_you")


async def stage_training_rows(
    conn: asyncpg.Connection, since: datetime | None, until: datetime, timeout: float
) -> None:
    """The rows training learns from (first_servings), with what training reads of each, into the
    temporary table `training_rows`, dropped at the end of the transaction: the log is scanned and
    sorted once for both reads (copy_effect_cells, copy_training_rows). Call it in a transaction that
    lifted statement_timeout, with a `timeout` of its own: on a log of millions of rows it takes longer
    than the pool's command timeout (a request's) allows."""
    await conn.execute(
        f"""CREATE TEMPORARY TABLE training_rows ON COMMIT DROP AS
            SELECT r.member_id, r.post_id, r.served_at, r.id, r.affinity, r.interest, r.favourite, r.age_seconds,
                   r.similarity, r.popularity, r.affinity_rate, r.interest_rate, r.author_effect, r.topic_effect,
                   r.engaged, r.feed
            FROM {first_servings("$1", "$2")} r""",
        since,
        until,
        timeout=timeout,
    )


async def copy_training_rows(
    conn: asyncpg.Connection, sink: Callable[[bytes], Awaitable[None]], timeout: float
) -> None:
    """The staged rows, unordered, streamed to `sink` as binary COPY data with every column a non-null
    float8 (TRAINING_COLUMNS), so the reader parses fixed-size records and never holds the log. The
    COPY gets a `timeout` of its own (the pool's command timeout is a request's)."""
    await conn.copy_from_query(
        """SELECT extract(epoch FROM r.served_at)::float8, r.id::float8, r.affinity, r.interest,
                  r.favourite::int::float8, r.age_seconds, r.similarity, r.popularity,
                  r.affinity_rate, r.interest_rate, r.author_effect, r.topic_effect, r.engaged::int::float8,
                  (array_position($1::text[], r.feed) - 1)::float8
           FROM training_rows r""",
        list(FEEDS),
        output=sink,
        format="binary",
        timeout=timeout,
    )


async def copy_effect_cells(conn: asyncpg.Connection, sink: Callable[[bytes], Awaitable[None]], timeout: float) -> None:
    """The staged rows counted per reader, author and the post's tags: member, author, tags (each as hex
    of its UTF-8, sorted, space-separated; empty for none), served, engaged as tab-separated text lines.
    What the per-reader effects are fitted on: as many lines as cells, not rows."""
    await conn.copy_from_query(
        """WITH served AS (  -- each post's author and tag set once, not once per row that served it
               SELECT p.id, p.author_id,
                      COALESCE((SELECT string_agg(encode(convert_to(pt.tag, 'UTF8'), 'hex'), ' ' ORDER BY pt.tag)
                                FROM post_tags pt WHERE pt.post_id = p.id), '') AS tags
               FROM posts p WHERE p.id IN (SELECT DISTINCT post_id FROM training_rows))
           SELECT r.member_id, s.author_id, s.tags, count(*), count(*) FILTER (WHERE r.engaged)
           FROM training_rows r JOIN served s ON s.id = r.post_id
           GROUP BY 1, 2, 3""",
        output=sink,
        format="text",
        timeout=timeout,
    )


async def rows_since(conn: Queryable, since: datetime | None, until: datetime) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM feed_log WHERE ($1::timestamptz IS NULL OR served_at >= $1) AND served_at < $2",
            since,
            until,
        )
    )
