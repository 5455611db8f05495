"""For You's tables and reads: feed profiles, candidates with their signals, and ranker models."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

import asyncpg

from feedfabric.db import exposure, reader_effects
from feedfabric.db.queryable import Queryable

__all__ = [
    "CHAIN_RETENTION",
    "Candidate",
    "Model",
    "Profile",
    "active_model",
    "candidates",
    "forget_pages",
    "model",
    "models",
    "popular",
    "profile",
    "record_page",
    "save_profile",
    "served_path",
    "store_model",
    "taste_vectors",
    "window_vectors",
]

# How long For You's page records are kept (`feedfabric maintain`): a cursor older than this whose
# list Redis no longer holds cannot be continued exactly, and is refused.
CHAIN_RETENTION = timedelta(hours=24)


@dataclass(frozen=True)
class Profile:
    preset: str
    sources: tuple[str, ...]
    lookback_hours: int


class Candidate(NamedTuple):
    """A candidate and its signals; the post itself is read only when served (a first page hydrates
    its own posts), so ranking hundreds of candidates does not read and decode their content. A tuple:
    a first page makes hundreds."""

    post_id: uuid.UUID
    author_id: uuid.UUID
    created: float  # POSIX seconds
    source: int  # index into feeds.ranking.SOURCES
    affinity: float
    interest: float
    favourite: bool
    followed: bool
    popularity: float
    vector: bytes | None
    # Engagement per post served from the author / the best of the post's tags (db.exposure).
    affinity_rate: float = 0.0
    interest_rate: float = 0.0
    # The reader's per-reader effects for the author and the post's best tag (db.reader_effects).
    author_effect: float = 0.0
    topic_effect: float = 0.0


@dataclass(frozen=True)
class Model:
    id: int
    trained_at: datetime
    training_rows: int
    auc: float
    baseline_auc: float
    signals: list[str]
    weights: list[float]
    intercept: float
    active: bool


async def profile(conn: Queryable, member_id: uuid.UUID) -> Profile | None:
    row = await conn.fetchrow(
        "SELECT preset, sources, lookback_hours FROM feed_profiles WHERE member_id = $1", member_id
    )
    return Profile(row["preset"], tuple(row["sources"]), row["lookback_hours"]) if row else None


async def save_profile(conn: Queryable, member_id: uuid.UUID, value: Profile) -> None:
    await conn.execute(
        "INSERT INTO feed_profiles (member_id, preset, sources, lookback_hours) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (member_id) DO UPDATE SET preset = EXCLUDED.preset, sources = EXCLUDED.sources,"
        " lookback_hours = EXCLUDED.lookback_hours, updated_at = now()",
        member_id,
        value.preset,
        list(value.sources),
        value.lookback_hours,
    )


async def taste_vectors(
    conn: Queryable, member_id: uuid.UUID, as_of: datetime, limit: int = 20
) -> list[tuple[uuid.UUID, bytes]]:
    """Vectors of the posts the member most recently liked or commented on (up to `as_of`)."""
    rows = await conn.fetch(
        """SELECT e.post_id, e.vector FROM (
               (SELECT post_id, created_at FROM likes WHERE member_id = $1 AND created_at <= $2
                ORDER BY created_at DESC LIMIT $3)
               UNION ALL
               (SELECT post_id, created_at FROM comments WHERE author_id = $1 AND created_at <= $2
                ORDER BY created_at DESC LIMIT $3)
           ) t
           JOIN posts p ON p.id = t.post_id
           JOIN post_embeddings e ON e.post_id = COALESCE(p.repost_of, p.id)
           ORDER BY t.created_at DESC LIMIT $3""",
        member_id,
        as_of,
        limit,
    )
    return [(r["post_id"], r["vector"]) for r in rows]


async def window_vectors(
    conn: Queryable, member_id: uuid.UUID, since: datetime, as_of: datetime, limit: int
) -> list[tuple[uuid.UUID, bytes]]:
    """The newest embedded posts of the window (not the member's own), for the SIMILAR scan."""
    rows = await conn.fetch(
        """SELECT p.id, e.vector FROM posts p JOIN post_embeddings e ON e.post_id = p.id
           WHERE p.created_at > $2 AND p.created_at <= $3 AND p.author_id <> $1 AND p.status = 'live'
           ORDER BY p.created_at DESC LIMIT $4""",
        member_id,
        since,
        as_of,
        limit,
    )
    return [(r["id"], r["vector"]) for r in rows]


async def candidates(
    conn: Queryable,
    member_id: uuid.UUID,
    *,
    as_of: datetime,
    since: datetime,
    favourites_since: datetime,
    sources: Sequence[str],
    similar_ids: Sequence[uuid.UUID],
    popular_ids: Sequence[uuid.UUID],
    per_source: int,
    total: int,
    comment_weight: float,
    with_vectors: bool = True,
) -> list[Candidate]:
    """Every source's candidates and their signals in one statement; a repost counts as its original,
    each post keeps its strongest source (lowest number), the visibility rule decides what is shown.
    Posts the member already liked or commented on (by `as_of`) are not offered again. SIMILAR and
    POPULAR come as lists of IDs (`popular`: one list shared by every member, see feeds.foryou).
    Vectors (1.5 kB each) are read only `with_vectors`: without a taste to compare them with, the
    similarity is 0 for all."""
    rows = await conn.fetch(
        f"""WITH fav AS (
               SELECT COALESCE(p.repost_of, p.id) AS post_id, 0 AS src
               FROM favourites f CROSS JOIN LATERAL (
                   SELECT p.id, p.repost_of, p.created_at FROM posts p
                   WHERE p.author_id = f.favourite_id AND p.created_at > $4 AND p.created_at <= $2
                     AND p.status = 'live'
                   ORDER BY p.created_at DESC LIMIT 100) p
               WHERE f.member_id = $1
               ORDER BY p.created_at DESC LIMIT 100
           ), followed_all AS (
               SELECT target_id::uuid AS author_id FROM follows WHERE follower_id = $1 AND target_type = 'member'
           ), favourite_authors AS (
               SELECT favourite_id AS author_id FROM favourites WHERE member_id = $1
           ), followed AS (
               SELECT author_id FROM followed_all WHERE 'following' = ANY($5::text[])
           ), fol AS (
               SELECT COALESCE(p.repost_of, p.id) AS post_id, 1 AS src
               FROM followed a CROSS JOIN LATERAL (
                   SELECT p.id, p.repost_of, p.created_at FROM posts p
                   WHERE p.author_id = a.author_id AND p.created_at > $3 AND p.created_at <= $2
                     AND p.status = 'live'
                   ORDER BY p.created_at DESC LIMIT $7) p
               ORDER BY p.created_at DESC LIMIT $7
           ), interests AS (
               SELECT target_id AS tag FROM follows WHERE follower_id = $1 AND target_type = 'tag'
               UNION
               (SELECT tag FROM topic_interest WHERE member_id = $1 AND score > 0 ORDER BY score DESC LIMIT 20)
           ), tagged AS (
               SELECT COALESCE(p.repost_of, p.id) AS post_id, 2 AS src
               FROM interests i CROSS JOIN LATERAL (
                   SELECT pt.post_id, pt.created_at FROM post_tags pt
                   WHERE pt.tag = i.tag AND pt.created_at > $3 AND pt.created_at <= $2
                   ORDER BY pt.created_at DESC LIMIT $7) t
               JOIN posts p ON p.id = t.post_id AND p.status = 'live'
               WHERE 'tags' = ANY($5::text[])
               ORDER BY t.created_at DESC LIMIT $7
           ), sim AS (
               SELECT s AS post_id, 3 AS src FROM unnest($6::uuid[]) AS s
           ), pop AS (
               SELECT s AS post_id, 4 AS src FROM unnest($10::uuid[]) AS s
           ), best AS (
               SELECT post_id, min(src) AS src
               FROM (SELECT * FROM fav UNION ALL SELECT * FROM fol UNION ALL SELECT * FROM tagged
                     UNION ALL SELECT * FROM sim UNION ALL SELECT * FROM pop) c
               GROUP BY post_id
           )
           SELECT v.id, v.author_id, extract(epoch FROM v.created_at)::float8, b.src,
                  COALESCE(a.score, 0) AS affinity,
                  COALESCE(t.interest, 0) AS interest,
                  fa.author_id IS NOT NULL AS favourite,
                  fo.author_id IS NOT NULL AS followed,
                  COALESCE(s.likes + $9 * s.comments, 0) AS popularity,
                  e.vector,
                  {exposure.affinity_rate("a", "ae")} AS affinity_rate,
                  COALESCE(t.interest_rate, 0) AS interest_rate,
                  {reader_effects.author_effect("$1", "v.author_id")} AS author_effect,
                  {reader_effects.topic_effect("$1", "v.id")} AS topic_effect
           FROM best b
           -- One probe of feed_posts per candidate: joined whole, its relation rule (migrations 320-321)
           -- made the planner read every visible post (a parallel scan of posts, 190+ ms a page on
           -- bench/home_feed's data) and hash the candidates against it. OFFSET 0 keeps the
           -- subquery from being pulled up into that join.
           CROSS JOIN LATERAL (SELECT * FROM feed_posts($1) fp WHERE fp.id = b.post_id OFFSET 0) v
           LEFT JOIN author_affinity a ON a.member_id = $1 AND a.author_id = v.author_id
           LEFT JOIN author_exposure ae ON ae.member_id = $1 AND ae.author_id = v.author_id
           LEFT JOIN favourite_authors fa ON fa.author_id = v.author_id
           LEFT JOIN followed_all fo ON fo.author_id = v.author_id
           LEFT JOIN post_stats s ON s.post_id = v.id
           LEFT JOIN post_embeddings e ON e.post_id = v.id AND $11
           {exposure.topic_signals("$1", "v.id", "t")}
           WHERE v.author_id <> $1 AND v.created_at <= $2 AND (b.src <> 4 OR v.created_at > $3)
             AND NOT EXISTS (SELECT 1 FROM likes l WHERE l.post_id = v.id AND l.member_id = $1 AND l.created_at <= $2)
             AND NOT EXISTS (SELECT 1 FROM comments c WHERE c.author_id = $1 AND c.post_id = v.id
                                                     AND c.created_at <= $2)
           ORDER BY b.src, v.created_at DESC, v.id DESC
           LIMIT $8""",
        member_id,
        as_of,
        since,
        favourites_since,
        list(sources),
        list(similar_ids),
        per_source,
        total,
        comment_weight,
        list(popular_ids),
        with_vectors,
    )
    # The columns are selected in Candidate's field order.
    return [Candidate(*r) for r in rows]


async def popular(
    conn: Queryable, *, since: datetime, as_of: datetime, limit: int, comment_weight: float
) -> list[uuid.UUID]:
    """The window's most engaged live original posts, most engaged first (For You's POPULAR source)."""
    rows = await conn.fetch(
        """SELECT p.id FROM posts p JOIN post_stats s ON s.post_id = p.id
           WHERE p.created_at > $1 AND p.created_at <= $2 AND p.repost_of IS NULL AND p.status = 'live'
             AND s.likes + s.comments > 0
           ORDER BY s.likes + $4 * s.comments DESC, p.id DESC LIMIT $3""",
        since,
        as_of,
        limit,
        comment_weight,
    )
    return [r["id"] for r in rows]


def _model(row: asyncpg.Record) -> Model:
    return Model(
        id=row["id"],
        trained_at=row["trained_at"],
        training_rows=row["training_rows"],
        auc=row["auc"],
        baseline_auc=row["baseline_auc"],
        signals=list(row["signals"]),
        weights=list(row["weights"]),
        intercept=row["intercept"],
        active=row["active"],
    )


async def active_model(conn: Queryable) -> Model | None:
    row = await conn.fetchrow("SELECT * FROM ranker_models WHERE active")
    return _model(row) if row else None


async def model(conn: Queryable, model_id: int) -> Model | None:
    row = await conn.fetchrow("SELECT * FROM ranker_models WHERE id = $1", model_id)
    return _model(row) if row else None


async def models(conn: Queryable, limit: int) -> list[Model]:
    rows = await conn.fetch("SELECT * FROM ranker_models ORDER BY id DESC LIMIT $1", limit)
    return [_model(r) for r in rows]


async def store_model(
    conn: asyncpg.Connection,
    *,
    training_rows: int,
    auc: float,
    baseline_auc: float,
    signals: Sequence[str],
    weights: Sequence[float],
    intercept: float,
    activate: bool,
) -> int:
    """Stores a model; activating it deactivates the previous one (call inside a transaction)."""
    if activate:
        await conn.execute("UPDATE ranker_models SET active = false WHERE active")
    return int(
        await conn.fetchval(
            "INSERT INTO ranker_models (training_rows, auc, baseline_auc, signals, weights, intercept, active)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
            training_rows,
            auc,
            baseline_auc,
            list(signals),
            list(weights),
            intercept,
            activate,
        )
    )


async def record_page(
    conn: Queryable,
    page_id: uuid.UUID,
    member_id: uuid.UUID,
    ranked_at: datetime,
    parent_id: uuid.UUID | None,
    parent_count: int,
    posts: bytes,
) -> None:
    """Records the posts (16-byte IDs, in order) a For You page served after the first `parent_count`
    of its parent page's: the path a cursor names is what its chain served, however long. A record
    already there (the same page served again: its ID is derived from its content) is left as it is."""
    await conn.execute(
        "INSERT INTO foryou_pages (id, member_id, ranked_at, parent_id, parent_count, posts)"
        " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
        page_id,
        member_id,
        ranked_at,
        parent_id,
        parent_count,
        posts,
    )


async def served_path(conn: Queryable, page_id: uuid.UUID, member_id: uuid.UUID, taken: int) -> bytes | None:
    """The IDs of every post served on the path ending with the first `taken` posts of `page_id`
    (concatenated, in no order); None when part of the path is gone (past its retention). The LIMIT 1
    keeps each step a primary-key probe: flattened into a join, a table not yet analyzed was scanned
    whole at every step (68 ms against 0.7 ms for a path of 400 pages)."""
    row = await conn.fetchrow(
        """WITH RECURSIVE path (parent_id, parent_count, posts) AS (
               SELECT parent_id, parent_count, substring(posts FROM 1 FOR $3::int * 16)
               FROM foryou_pages WHERE id = $1 AND member_id = $2
               UNION ALL
               SELECT p.parent_id, p.parent_count, substring(p.posts FROM 1 FOR path.parent_count * 16)
               FROM path CROSS JOIN LATERAL (
                   SELECT parent_id, parent_count, posts FROM foryou_pages
                   WHERE id = path.parent_id AND member_id = $2 LIMIT 1) p
           )
           SELECT string_agg(posts, ''::bytea) AS posts, bool_or(parent_id IS NULL) AS whole FROM path""",
        page_id,
        member_id,
        taken,
    )
    return bytes(row["posts"]) if row is not None and row["whole"] else None


async def forget_pages(conn: Queryable, before: datetime, limit: int) -> int:
    """Deletes up to `limit` page records of chains ranked before `before`; returns how many."""
    done = await conn.execute(
        "DELETE FROM foryou_pages WHERE id IN (SELECT id FROM foryou_pages WHERE ranked_at < $1"
        " ORDER BY ranked_at LIMIT $2)",
        before,
        limit,
    )
    return int(done.split()[-1])
