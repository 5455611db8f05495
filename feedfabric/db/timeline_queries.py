"""Post-level SQL behind the Redis timelines: fan-out audiences and timeline rebuilds.

The rules (who gets a post, what a rebuilt timeline holds) live in
`feedfabric.feeds.timelines`; these are only the queries, each keyset-paged or
bounded, never OFFSET.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from feedfabric.core.models import PageExtras, Post
from feedfabric.db import post_extras
from feedfabric.db.pool import hold_session_state

__all__ = [
    "ID_TEXT_LENGTH",
    "AudiencePage",
    "FirstRound",
    "GapFill",
    "audience_page",
    "drop_home_owed",
    "epoch",
    "fanout_post",
    "first_round",
    "followed_posts_above",
    "gap_page",
    "has_more_followers_than",
    "lock_epoch",
    "newest_post_id",
    "no_longer_followed",
    "raise_home_owed",
    "rebuild_post_ids",
    "record_epoch",
    "unlock_epoch",
]


@dataclass(frozen=True)
class FanoutPost:
    id: uuid.UUID
    author_id: uuid.UUID
    status: str
    tags: tuple[str, ...]


@dataclass(frozen=True)
class AudiencePage:
    """One keyset page of a post's audience: the active followers, and where the next page starts.

    `active` is their IDs' canonical text (36 characters each) back to back: Postgres
    concatenates them, so a page of a thousand followers reaches the worker as one string and goes
    on to Redis as one argument, instead of a thousand strings decoded and encoded again.
    """

    active: str
    last: uuid.UUID | None
    scanned: int


ID_TEXT_LENGTH = 36  # a UUID's canonical text, the unit of `AudiencePage.active`


async def fanout_post(conn: asyncpg.Connection, post_id: uuid.UUID) -> FanoutPost | None:
    row = await conn.fetchrow(
        "SELECT p.id, p.author_id, p.status,"
        " COALESCE(ARRAY(SELECT t.tag FROM post_tags t WHERE t.post_id = p.id ORDER BY t.tag), '{}') AS tags"
        " FROM posts p WHERE p.id = $1",
        post_id,
    )
    if row is None:
        return None
    return FanoutPost(row["id"], row["author_id"], row["status"], tuple(row["tags"]))


async def has_more_followers_than(conn: asyncpg.Connection, member_id: uuid.UUID, threshold: int) -> bool:
    """The celebrity rule (SQL function is_celebrity over the trigger-kept follower count)."""
    return bool(await conn.fetchval("SELECT is_celebrity($1, $2)", member_id, threshold))


# A page's activity: its IDs, sorted, probe `members` as one index scan
# (`id = ANY`), which walks the primary key's leaves from one ID to the next
# instead of descending from the root once per follower (a correlated EXISTS
# per row cost twice as much). The author (`$6`, who may follow the post's
# tags) is never in the audience.
_ACTIVE_OF_PAGE = """,
ids AS (SELECT array_agg(follower_id ORDER BY follower_id) AS a FROM page)
SELECT
    COALESCE((SELECT string_agg(m.id::text, '') FROM members m
        WHERE m.id = ANY (ids.a) AND m.id <> $6
          AND m.last_seen_at >= now() - make_interval(days => $5)), '') AS active,
    ids.a[cardinality(ids.a)] AS last,
    COALESCE(cardinality(ids.a), 0) AS scanned
FROM ids
"""

# Each target's followers come from its own bounded index range (target_type,
# target_id, follower_id), then the smallest `limit` distinct IDs of them all
# form the page: a member who follows the author and a tag appears once.
# Activity is judged after the limit so the keyset always advances over raw
# follows, however many followers are inactive.
_AUDIENCE_PAGE = (
    """
WITH targets AS (
    SELECT 'member'::text AS target_type, $1::text AS target_id WHERE $1::text IS NOT NULL
    UNION ALL
    SELECT 'tag', t FROM unnest($2::text[]) AS t
),
page AS (
    SELECT DISTINCT f.follower_id
    FROM targets tg
    CROSS JOIN LATERAL (
        SELECT follower_id FROM follows
        WHERE target_type = tg.target_type AND target_id = tg.target_id AND follower_id > $3
        ORDER BY follower_id LIMIT $4
    ) f
    ORDER BY f.follower_id
    LIMIT $4
)"""
    + _ACTIVE_OF_PAGE
)

# The usual case, one target (an author, or one tag): its index range is the
# page, with nothing to merge or deduplicate (a third of the page's cost).
_SINGLE_TARGET_PAGE = (
    """
WITH page AS (
    SELECT follower_id FROM follows
    WHERE target_type = $1 AND target_id = $2 AND follower_id > $3
    ORDER BY follower_id LIMIT $4
)"""
    + _ACTIVE_OF_PAGE
)


async def audience_page(
    conn: asyncpg.Connection,
    author_id: uuid.UUID | None,
    tags: tuple[str, ...],
    after: uuid.UUID,
    limit: int,
    inactive_after_days: int,
    exclude: uuid.UUID,
) -> AudiencePage:
    """Followers of the author (if given) or of any of the tags, with IDs above `after`, `limit` at most;
    `exclude` (the post's author, who may follow its tags) is scanned but never active."""
    if (author_id is None) != (len(tags) == 0) and len(tags) <= 1:
        target = ("member", str(author_id)) if author_id is not None else ("tag", tags[0])
        row = await conn.fetchrow(_SINGLE_TARGET_PAGE, *target, after, limit, inactive_after_days, exclude)
        assert row is not None
        return AudiencePage(row["active"], row["last"], int(row["scanned"]))
    row = await conn.fetchrow(
        _AUDIENCE_PAGE,
        None if author_id is None else str(author_id),
        list(tags),
        after,
        limit,
        inactive_after_days,
        exclude,
    )
    assert row is not None
    return AudiencePage(row["active"], row["last"], int(row["scanned"]))


# Newest posts for a rebuilt timeline: the member's own, those of followed
# members who are not celebrities (their posts are pulled at read time), and
# those carrying followed tags, whoever wrote them (tag followers get a
# celebrity's tagged posts pushed: they do not follow the author). Each source is bounded
# by the timeline length; deleted posts are left out, held ones kept (reads
# filter them, as they do for fanned-out entries).
_REBUILD = """
WITH followed AS (
    SELECT f.target_id::uuid AS author_id FROM follows f
    WHERE f.follower_id = $1 AND f.target_type = 'member'
),
authors AS (
    SELECT $1::uuid AS author_id
    UNION
    SELECT fo.author_id FROM followed fo
    WHERE NOT is_celebrity(fo.author_id, $3)
),
by_author AS (
    SELECT p.id FROM authors a
    CROSS JOIN LATERAL (
        SELECT id FROM posts WHERE author_id = a.author_id AND status <> 'deleted'
        ORDER BY id DESC LIMIT $2
    ) p
),
by_tag AS (
    SELECT p.id FROM follows ft
    CROSS JOIN LATERAL (
        SELECT pt.post_id AS id FROM post_tags pt JOIN posts po ON po.id = pt.post_id
        WHERE pt.tag = ft.target_id AND po.status <> 'deleted'
        ORDER BY pt.post_id DESC LIMIT $2
    ) p
    WHERE ft.follower_id = $1 AND ft.target_type = 'tag'
)
SELECT id::text FROM (SELECT id FROM by_author UNION SELECT id FROM by_tag) u
ORDER BY id DESC LIMIT $2
"""


async def followed_posts_above(
    conn: asyncpg.Connection, follower_id: uuid.UUID, author_id: uuid.UUID, floor: str, limit: int
) -> list[str]:
    """The author's newest posts above `floor` (text IDs, newest first), while the follower follows them:
    what fan-out would have pushed to a timeline reaching down to `floor` (posts_author_idx)."""
    rows = await conn.fetch(
        """SELECT p.id::text FROM posts p
           WHERE p.author_id = $2 AND p.id > $3::uuid AND p.status <> 'deleted'
             AND EXISTS (SELECT 1 FROM follows f
                         WHERE f.follower_id = $1 AND f.target_type = 'member' AND f.target_id = $2::text)
           ORDER BY p.id DESC LIMIT $4""",
        follower_id,
        author_id,
        floor,
        limit,
    )
    return [r[0] for r in rows]


async def no_longer_followed(conn: asyncpg.Connection, member_id: uuid.UUID, post_ids: Sequence[str]) -> list[str]:
    """Of a timeline's post IDs, those no rule would push to it now: not the member's own, by an author
    the member does not follow, carrying no tag the member follows (the sources of fan-out and rebuild)."""
    rows = await conn.fetch(
        """SELECT p.id::text FROM posts p
           WHERE p.id = ANY($2::uuid[]) AND p.author_id <> $1
             AND NOT EXISTS (SELECT 1 FROM follows f
                             WHERE f.follower_id = $1 AND f.target_type = 'member' AND f.target_id = p.author_id::text)
             AND NOT EXISTS (SELECT 1 FROM post_tags pt
                             JOIN follows f ON f.follower_id = $1 AND f.target_type = 'tag' AND f.target_id = pt.tag
                             WHERE pt.post_id = p.id)""",
        member_id,
        list(post_ids),
    )
    return [r[0] for r in rows]


async def rebuild_post_ids(
    conn: asyncpg.Connection, member_id: uuid.UUID, limit: int, celebrity_threshold: int
) -> list[str]:
    """Post IDs (text, newest first) a member's timeline holds when rebuilt from Postgres."""
    rows = await conn.fetch(_REBUILD, member_id, limit, celebrity_threshold)
    return [r[0] for r in rows]


# Candidates: the visible posts among the batch's IDs, and the newest $4 visible posts before $3 of
# the followed authors above the threshold ($5), never pushed, and of the viewer (read your writes:
# on the page whatever fan-out's lag), the viewer's only down to $6 when given. Their extras come with
# them. The viewer is one more author of the pulled branch, not a branch of its own: a third branch
# changed the statement's row estimates and its generic plan (hash joins over all members), 4-7x
# slower.
_FIRST_ROUND = (
    """
WITH found AS (
    SELECT id, author_id, content, repost_of, status, created_at, updated_at, false AS pulled
    FROM feed_posts($2) WHERE id = ANY($1::uuid[])
    UNION ALL
    (SELECT p.id, p.author_id, p.content, p.repost_of, p.status, p.created_at, p.updated_at, true
     FROM (SELECT s.member_id AS author_id FROM follows f JOIN member_stats s ON s.member_id = f.target_id::uuid
           WHERE f.follower_id = $2 AND f.target_type = 'member' AND s.followers > $5
           UNION ALL
           SELECT $2::uuid) a
     CROSS JOIN LATERAL (
         SELECT * FROM feed_posts($2) p
         WHERE p.author_id = a.author_id AND ($3::uuid IS NULL OR p.id < $3)
           AND (a.author_id <> $2 OR $6::uuid IS NULL OR p.id >= $6)
         ORDER BY p.id DESC LIMIT $4) p
     ORDER BY p.id DESC LIMIT $4)
), page AS (
    SELECT DISTINCT id, author_id, repost_of FROM found
),"""
    + post_extras.EXTRAS_CTES
    + """
SELECT x.*, c.pulled, c.content AS candidate_content, c.repost_of AS candidate_repost_of,
       c.status AS candidate_status, c.created_at AS candidate_created_at, c.updated_at AS candidate_updated_at
FROM ("""
    + post_extras.EXTRAS_SELECT
    + """) x
LEFT JOIN found c ON c.id = x.id
"""
)


@dataclass(frozen=True)
class FirstRound:
    """A home-feed page's first round: candidates from the timeline batch, pulled ones, and all their extras."""

    found: list[Post]
    pulled: list[Post]
    extras: PageExtras


async def first_round(
    conn: asyncpg.Connection | asyncpg.Pool,
    ids: list[uuid.UUID],
    viewer_id: uuid.UUID,
    before: uuid.UUID | None,
    limit: int,
    celebrity_threshold: int,
    own_floor: uuid.UUID | None = None,
) -> FirstRound:
    """A home-feed page's first round in one statement: the visible posts among a batch of timeline IDs,
    the newest `limit` visible posts before `before` of the followed celebrities (never pushed) and of the
    viewer (whose own posts a lagging fan-out has not pushed yet), and the extras of all (db.post_extras),
    so a page filled by its first round costs one SQL round trip, where hydration, the celebrity list,
    their posts and the extras would take four: each round trip costs the API and Postgres more than the
    statement's own work. Each row is one subject of the extras; `c.pulled` is NULL for an original that
    is not itself a candidate.
    """
    rows = await conn.fetch(_FIRST_ROUND, ids, viewer_id, before, limit, celebrity_threshold, own_floor)
    found: list[Post] = []
    pulled: list[Post] = []
    for r in rows:
        if r["pulled"] is not None:
            post = Post(
                r["id"],
                r["author_id"],
                r["candidate_content"],
                r["candidate_repost_of"],
                r["candidate_status"],
                r["candidate_created_at"],
                r["candidate_updated_at"],
            )
            (pulled if r["pulled"] else found).append(post)
    return FirstRound(found, pulled, post_extras.extras_of(rows))


# The home feed's sources (as posts.home_page: own posts, followed members', followed tags') with IDs
# in ($1, $3], newest $4, and their extras: each source one index range bounded by the gap.
_GAP = (
    """
WITH authors AS (
    SELECT $2::uuid AS author_id
    UNION
    SELECT target_id::uuid FROM follows WHERE follower_id = $2 AND target_type = 'member'
), candidates AS (
    SELECT p.id FROM authors a CROSS JOIN LATERAL (
        SELECT p.id FROM feed_posts($2) p
        WHERE p.author_id = a.author_id AND p.id > $1::uuid AND p.id <= $3::uuid
        ORDER BY p.id DESC LIMIT $4) p
    UNION
    SELECT t.post_id FROM follows f CROSS JOIN LATERAL (
        SELECT pt.post_id FROM post_tags pt JOIN feed_posts($2) p ON p.id = pt.post_id
        WHERE pt.tag = f.target_id AND pt.post_id > $1::uuid AND pt.post_id <= $3::uuid
        ORDER BY pt.post_id DESC LIMIT $4) t
    WHERE f.follower_id = $2 AND f.target_type = 'tag'
), found AS (
    SELECT p.id, p.author_id, p.content, p.repost_of, p.status, p.created_at, p.updated_at
    FROM candidates c JOIN posts p ON p.id = c.id
    ORDER BY p.id DESC LIMIT $4
), page AS (
    SELECT id, author_id, repost_of FROM found
),"""
    + post_extras.EXTRAS_CTES
    + """
SELECT x.*, c.id IS NOT NULL AS candidate, c.content AS candidate_content, c.repost_of AS candidate_repost_of,
       c.status AS candidate_status, c.created_at AS candidate_created_at, c.updated_at AS candidate_updated_at
FROM ("""
    + post_extras.EXTRAS_SELECT
    + """) x
LEFT JOIN found c ON c.id = x.id
"""
)


@dataclass(frozen=True)
class GapFill:
    """The posts of a gap, newest first, and their extras."""

    posts: list[Post]
    extras: PageExtras


async def gap_page(
    conn: asyncpg.Connection | asyncpg.Pool, viewer_id: uuid.UUID, after: uuid.UUID, through: uuid.UUID, limit: int
) -> GapFill:
    """The newest `limit` visible home-feed posts with IDs in (`after`, `through`], with their extras."""
    rows = await conn.fetch(_GAP, after, viewer_id, through, limit)
    posts = [
        Post(
            r["id"],
            r["author_id"],
            r["candidate_content"],
            r["candidate_repost_of"],
            r["candidate_status"],
            r["candidate_created_at"],
            r["candidate_updated_at"],
        )
        for r in rows
        if r["candidate"]
    ]
    posts.sort(key=lambda p: p.id, reverse=True)
    return GapFill(posts, post_extras.extras_of(rows))


async def raise_home_owed(conn: asyncpg.Connection | asyncpg.Pool, member_id: uuid.UUID, post_id: uuid.UUID) -> None:
    """Raises the owed mark kept in Postgres (`members.home_owed`, for when Redis cannot take it) to `post_id`;
    writes nothing when it is already there or above."""
    await conn.execute(
        "UPDATE members SET home_owed = $2 WHERE id = $1 AND (home_owed IS NULL OR home_owed < $2)",
        member_id,
        post_id,
    )


async def drop_home_owed(conn: asyncpg.Connection | asyncpg.Pool, member_id: uuid.UUID, post_id: uuid.UUID) -> None:
    """Clears the Postgres owed mark read as `post_id` (a concurrent page's higher mark stays)."""
    await conn.execute("UPDATE members SET home_owed = NULL WHERE id = $1 AND home_owed = $2", member_id, post_id)


async def epoch(conn: asyncpg.Connection) -> tuple[str, uuid.UUID | None] | None:
    """The Redis run (and its floor) timelines were last settled against; None before the first."""
    row = await conn.fetchrow("SELECT run_id, floor FROM timeline_epoch")
    return None if row is None else (row["run_id"], row["floor"])


async def newest_post_id(conn: asyncpg.Connection) -> uuid.UUID | None:
    """Every post committed so far has an ID at or below this one (the primary key's tail)."""
    found: uuid.UUID | None = await conn.fetchval("SELECT id FROM posts ORDER BY id DESC LIMIT 1")
    return found


async def record_epoch(conn: asyncpg.Connection, run_id: str, floor: uuid.UUID | None) -> uuid.UUID | None:
    """Upserts the run; the floor only rises. Returns the floor now recorded."""
    found: uuid.UUID | None = await conn.fetchval(
        "INSERT INTO timeline_epoch (run_id, floor) VALUES ($1, $2)"
        " ON CONFLICT (singleton) DO UPDATE SET run_id = $1, settled_at = now(),"
        " floor = CASE WHEN timeline_epoch.floor IS NULL THEN $2"
        "              WHEN $2::uuid IS NULL THEN timeline_epoch.floor"
        "              ELSE greatest(timeline_epoch.floor, $2) END"
        " RETURNING floor",
        run_id,
        floor,
    )
    return found


_EPOCH_LOCK = 0x0FEED0E0


async def lock_epoch(conn: asyncpg.Connection) -> None:
    """A session lock (held across the Redis write that follows the transaction).

    The connection is marked first, so whatever happens before `unlock_epoch`
    (a cancelled request) the pool's release clears the lock (db.pool.LeanConnection).
    """
    hold_session_state(conn)
    await conn.execute("SELECT pg_advisory_lock($1)", _EPOCH_LOCK)


async def unlock_epoch(conn: asyncpg.Connection) -> None:
    await conn.execute("SELECT pg_advisory_unlock($1)", _EPOCH_LOCK)
