"""The feed log: what was served, where, and the ranking signals it had then.

The table is partitioned by UTC day (migration 201): a day's partition is made when the first row of
that day arrives (or ahead of time by `ensure_partitions`), and retention drops whole days.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import asyncpg

from feedfabric.db import exposure, reader_effects

_PARTITION = re.compile(r"^feed_log_(\d{8})$")


@dataclass(frozen=True, slots=True)
class ServedPage:
    """One served page: its posts in position order (a repost as the post it shares).

    For You pages also carry their preset, and per post the candidate source that brought it and its
    similarity to the reader's recent likes; the other feeds log NULL and 0 for those.
    """

    member_id: uuid.UUID
    feed: str
    post_ids: tuple[uuid.UUID, ...]
    source: str
    served_at: datetime
    preset: str | None = None
    reasons: tuple[str, ...] | None = None
    similarities: tuple[float, ...] | None = None


async def insert(
    conn: asyncpg.Connection | asyncpg.Pool, pages: Sequence[ServedPage], *, comment_weight: float = 3.0
) -> None:
    """One statement per batch (two when a day's partition must be made first), planned for its own
    arguments every time: the generic plan Postgres caches for a prepared statement after five runs
    probed the exposure counts by scanning them, 2.1 ms a logged page against 0.6 (bench/feed_log_cost.py)."""
    if isinstance(conn, asyncpg.Pool):
        async with conn.acquire() as acquired:
            await insert(acquired, pages, comment_weight=comment_weight)
        return
    for attempt in (1, 2):
        try:
            async with conn.transaction():
                await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
                await _insert(conn, pages, comment_weight)
            return
        except asyncpg.CheckViolationError as error:
            if attempt == 2 or "no partition" not in str(error):
                raise
            await ensure_partitions(conn, {p.served_at.astimezone(UTC).date() for p in pages})


async def _insert(conn: asyncpg.Connection | asyncpg.Pool, pages: Sequence[ServedPage], comment_weight: float) -> None:
    """A row per post; the signals are read in the same statement, as of serving.

    What is the same for a whole page (member, feed, source, time, preset) is sent once per page; each
    post carries only its page's number, its position and the For You extras. The posts drive the
    join (unnest), so Postgres looks each one up by key.
    """
    post_ids: list[uuid.UUID] = []
    page_numbers: list[int] = []
    positions: list[int] = []
    reasons: list[str | None] = []
    similarities: list[float] = []
    for number, page in enumerate(pages, start=1):  # Postgres arrays count from 1
        count = len(page.post_ids)
        post_ids.extend(page.post_ids)
        page_numbers.extend([number] * count)
        positions.extend(range(count))
        reasons.extend(page.reasons if page.reasons is not None else [None] * count)
        similarities.extend(page.similarities if page.similarities is not None else [0.0] * count)
    await conn.execute(
        f"""WITH served AS (
               SELECT e.post_id, e.page, e.position, e.reason, e.similarity,
                      ($1::uuid[])[e.page] AS member_id, ($2::text[])[e.page] AS feed,
                      ($3::text[])[e.page] AS source, ($4::timestamptz[])[e.page] AS served_at,
                      ($5::text[])[e.page] AS preset
               FROM unnest($6::uuid[], $7::int[], $8::int[], $9::text[], $10::float8[])
                    AS e(post_id, page, position, reason, similarity)
           ), {exposure.count_served("served")}
           INSERT INTO feed_log (member_id, feed, post_id, position, source,
                                 affinity, interest, favourite, age_seconds, served_at,
                                 preset, reason, similarity, popularity,
                                 affinity_rate, interest_rate, author_effect, topic_effect)
           SELECT e.member_id, e.feed, e.post_id, e.position, e.source,
                  COALESCE(a.score, 0),
                  COALESCE(t.interest, 0),
                  EXISTS (SELECT 1 FROM favourites f
                          WHERE f.member_id = e.member_id AND f.favourite_id = p.author_id),
                  GREATEST(extract(epoch FROM e.served_at - p.created_at), 0),
                  e.served_at, e.preset, e.reason, e.similarity,
                  COALESCE(s.likes + $11 * s.comments, 0),
                  {exposure.affinity_rate("a", "ae")},
                  COALESCE(t.interest_rate, 0),
                  {reader_effects.author_effect("e.member_id", "p.author_id")},
                  {reader_effects.topic_effect("e.member_id", "e.post_id")}
           FROM served e
           JOIN posts p ON p.id = e.post_id
           LEFT JOIN author_affinity a ON a.member_id = e.member_id AND a.author_id = p.author_id
           LEFT JOIN author_exposure ae ON ae.member_id = e.member_id AND ae.author_id = p.author_id
           LEFT JOIN post_stats s ON s.post_id = e.post_id
           {exposure.topic_signals("e.member_id", "e.post_id", "t")}""",
        [p.member_id for p in pages],
        [p.feed for p in pages],
        [p.source for p in pages],
        [p.served_at for p in pages],
        [p.preset for p in pages],
        post_ids,
        page_numbers,
        positions,
        reasons,
        similarities,
        comment_weight,
    )


async def ensure_partitions(conn: asyncpg.Connection | asyncpg.Pool, days: Sequence[date] | set[date]) -> None:
    """Makes the partitions of these UTC days; two writers making the same one at once is harmless."""
    for day in sorted(days):
        try:
            await conn.execute("SELECT feed_log_partition($1)", day)
        except asyncpg.DuplicateTableError:
            pass


async def partition_days(conn: asyncpg.Connection | asyncpg.Pool) -> list[date]:
    """The UTC days the log has partitions for, oldest first."""
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'feed_log'::regclass"
    )
    days = [datetime.strptime(m.group(1), "%Y%m%d").date() for r in rows if (m := _PARTITION.match(r["relname"]))]
    return sorted(days)


async def apply_retention(
    conn: asyncpg.Connection | asyncpg.Pool, retention_days: int, *, today: date | None = None, ahead_days: int = 2
) -> list[date]:
    """One retention pass (`feedfabric maintain`): drops the partitions of days older than
    `retention_days` before today (UTC), so today and the `retention_days` before it are kept, and
    makes the partitions of the next `ahead_days` so inserts never wait on one. Returns the days dropped."""
    if retention_days < 1:
        raise ValueError("retention_days must be at least 1")
    today = today or datetime.now(UTC).date()
    oldest_kept = today - timedelta(days=retention_days)
    dropped = []
    for day in await partition_days(conn):
        if day < oldest_kept:
            await conn.execute(f'DROP TABLE IF EXISTS "feed_log_{day:%Y%m%d}"')
            dropped.append(day)
    await ensure_partitions(conn, {today + timedelta(days=n) for n in range(ahead_days + 1)})
    return dropped
