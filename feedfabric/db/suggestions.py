"""Who to follow and topics worth following (feeds.suggestions): the candidates of each reason with a
score, read from the follow table, the likes and the tags in one statement each; and dismissals
(migration 340).

Every fan-in is sampled through an index with a LIMIT, so a member who follows 10,000 members costs
what one who follows FOLLOWEES_READ does: the most recent follows (follows_follower_recent_idx),
each one's most recent follows, the member's most recent likes (likes_member_recent_idx), a post's
first likers (the likes primary key), a tag's newest posts of the week (post_tags_recent_idx), the
members with most followers (member_stats_followers_idx). Nothing is paged by OFFSET.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from feedfabric.db.queryable import Queryable

__all__ = [
    "BOUNDS",
    "FOLLOWED_BY_FOLLOWED",
    "Found",
    "dismiss",
    "followed_tags_among",
    "forget_dismissals",
    "member_candidates",
    "recent_post_counts",
    "still_suggestable",
    "topic_candidates",
]

# Reason numbers, strongest first (feeds.suggestions.REASONS names them); ENGAGED (the authors whose
# posts the viewer engages with) is shown as SIMILAR_ENGAGEMENT's reason, scaled on its own.
FOLLOWED_BY_FOLLOWED, SIMILAR_ENGAGEMENT, POPULAR_IN_TOPICS, POPULAR, ENGAGED = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class Bounds:
    """How far each fan-in reads; the statement's work is bounded by their products, not by the member."""

    followees: int = 100  # the member's most recent follows read (of members, and of tags)
    per_followee: int = 25  # each one's most recent follows
    likes: int = 50  # the member's most recent likes
    co_likers_per_post: int = 20  # likers read per liked post
    co_likers: int = 100  # distinct co-likers kept
    co_liker_likes: int = 10  # each co-liker's most recent likes
    topics: int = 10  # the member's followed tags and strongest interests, each
    posts_per_topic: int = 50  # a topic's newest posts of the window
    popular: int = 200  # members with most followers
    fresh_posts: int = 2_000  # the window's newest posts, for the fresh topics
    per_reason: int = 200  # candidates returned per reason
    # Each reason's strongest candidates checked (one index probe each) against the viewer's follows,
    # dismissals and suspensions: most of a large circle's friends of friends are friends already.
    probed: int = 300


BOUNDS = Bounds()


@dataclass(frozen=True)
class Found:
    """A candidate (a member's ID, or a tag) under one reason, with that reason's score."""

    key: str
    reason: int
    score: float


async def member_candidates(
    conn: Queryable,
    member_id: uuid.UUID,
    *,
    since: datetime,
    dismissed_since: datetime,
    new_member_follows: int,
    comment_weight: float,
    bounds: Bounds = BOUNDS,
) -> list[Found]:
    """Members to suggest, per reason: followed by the members the viewer follows (how many of them),
    liked by the members who like what the viewer likes (how many of them), engaged with by the viewer
    (their affinity per post served), posting in the viewer's
    topics since `since` (posts plus their engagement), and, for a member following fewer than
    `new_member_follows`, the most followed. Never the viewer, a member they follow, a suspended
    member, or one they dismissed since `dismissed_since`."""
    b = bounds
    rows = await conn.fetch(
        """WITH followees AS (
               SELECT target_id::uuid AS id FROM follows
               WHERE follower_id = $1 AND target_type = 'member'
               ORDER BY created_at DESC, target_id DESC LIMIT $2
           ), fof AS (
               SELECT x.target_id::uuid AS id, 0 AS reason, count(*)::float8 AS score
               FROM followees f CROSS JOIN LATERAL (
                   SELECT target_id FROM follows WHERE follower_id = f.id AND target_type = 'member'
                   ORDER BY created_at DESC, target_id DESC LIMIT $3) x
               GROUP BY 1 ORDER BY 3 DESC, 1 LIMIT $15
           ), my_likes AS (
               SELECT post_id FROM likes WHERE member_id = $1 ORDER BY created_at DESC LIMIT $4
           ), co_likers AS (
               SELECT DISTINCT l.member_id AS id
               FROM my_likes m CROSS JOIN LATERAL (
                   SELECT member_id FROM likes WHERE post_id = m.post_id AND member_id <> $1 LIMIT $5) l
               LIMIT $6
           ), alike AS (
               SELECT p.author_id AS id, 1 AS reason, count(DISTINCT c.id)::float8 AS score
               FROM co_likers c CROSS JOIN LATERAL (
                   SELECT post_id FROM likes WHERE member_id = c.id ORDER BY created_at DESC LIMIT $7) l
               JOIN posts p ON p.id = l.post_id
               GROUP BY 1 ORDER BY 3 DESC, 1 LIMIT $15
           ), engaged AS (
               -- The authors the viewer engages with most for how often they were shown them (affinity
               -- per post served, the affinity_rate signal): one row per author they engaged with.
               SELECT a.author_id AS id, 4 AS reason, (a.score / (1 + COALESCE(e.served, 0)))::float8 AS score
               FROM author_affinity a
               LEFT JOIN author_exposure e ON e.member_id = a.member_id AND e.author_id = a.author_id
               WHERE a.member_id = $1 AND a.score > 0
               ORDER BY 3 DESC, 1 LIMIT $15
           ), topics AS (
               (SELECT target_id AS tag FROM follows WHERE follower_id = $1 AND target_type = 'tag'
                ORDER BY created_at DESC, target_id DESC LIMIT $8)
               UNION
               (SELECT tag FROM topic_interest WHERE member_id = $1 AND score > 0 ORDER BY score DESC, tag LIMIT $8)
           ), in_topics AS (
               SELECT p.author_id AS id, 2 AS reason,
                      sum(1 + COALESCE(s.likes + $10 * s.comments, 0))::float8 AS score
               FROM topics t CROSS JOIN LATERAL (
                   SELECT post_id FROM post_tags WHERE tag = t.tag AND created_at > $9
                   ORDER BY created_at DESC LIMIT $11) pt
               JOIN posts p ON p.id = pt.post_id AND p.status = 'live'
               LEFT JOIN post_stats s ON s.post_id = p.id
               GROUP BY 1 ORDER BY 3 DESC, 1 LIMIT $15
           ), newcomer AS (
               SELECT count(*) < $12 AS yes FROM (
                   SELECT 1 FROM follows WHERE follower_id = $1 AND target_type = 'member' LIMIT $12) n
           ), popular AS (
               SELECT s.member_id AS id, 3 AS reason, s.followers::float8 AS score FROM member_stats s
               WHERE (SELECT yes FROM newcomer) AND s.followers > 0
               ORDER BY s.followers DESC LIMIT $13
           ), found AS (
               SELECT * FROM fof UNION ALL SELECT * FROM alike UNION ALL SELECT * FROM in_topics
               UNION ALL SELECT * FROM popular UNION ALL SELECT * FROM engaged
           ), kept AS (
               -- One index probe per candidate for each check (scalar subqueries, never a join the
               -- planner could turn into a scan of every member or of every follow of the viewer).
               SELECT f.id, f.reason, f.score,
                      row_number() OVER (PARTITION BY f.reason ORDER BY f.score DESC, f.id) AS n
               FROM found f
               WHERE f.id <> $1
                 AND (SELECT m.status FROM members m WHERE m.id = f.id) = 'active'
                 AND (SELECT 1 FROM follows x WHERE x.follower_id = $1 AND x.target_type = 'member'
                                                AND x.target_id = f.id::text) IS NULL
                 AND (SELECT 1 FROM suggestion_dismissals d WHERE d.member_id = $1
                                 AND d.dismissed_id = f.id AND d.dismissed_at > $14) IS NULL
           )
           SELECT id::text AS key, reason, score FROM kept WHERE n <= $16""",
        member_id,
        b.followees,
        b.per_followee,
        b.likes,
        b.co_likers_per_post,
        b.co_likers,
        b.co_liker_likes,
        b.topics,
        since,
        comment_weight,
        b.posts_per_topic,
        new_member_follows,
        b.popular,
        dismissed_since,
        b.probed,
        b.per_reason,
    )
    return [Found(r["key"], r["reason"], r["score"]) for r in rows]


async def still_suggestable(
    conn: Queryable, member_id: uuid.UUID, candidates: Sequence[uuid.UUID], dismissed_since: datetime
) -> set[uuid.UUID]:
    """Which of these (kept) suggestions may still be shown: active, not followed, not dismissed since."""
    rows = await conn.fetch(
        """SELECT m.id FROM members m
           WHERE m.id = ANY($2::uuid[]) AND m.status = 'active' AND m.id <> $1
             AND NOT EXISTS (SELECT 1 FROM follows x WHERE x.follower_id = $1 AND x.target_type = 'member'
                                                      AND x.target_id = m.id::text)
             AND NOT EXISTS (SELECT 1 FROM suggestion_dismissals d WHERE d.member_id = $1
                             AND d.dismissed_id = m.id AND d.dismissed_at > $3)""",
        member_id,
        list(candidates),
        dismissed_since,
    )
    return {r["id"] for r in rows}


async def topic_candidates(
    conn: Queryable, member_id: uuid.UUID, *, since: datetime, comment_weight: float, bounds: Bounds = BOUNDS
) -> list[Found]:
    """Tags to suggest, per reason: followed by the members the viewer follows (how many of them), the
    viewer's own engaged topics (topic interest), tags that share the window's posts with the viewer's
    topics (how many posts), and the popular fresh tags of the window's newest posts (posts plus their
    engagement). Never a tag the viewer follows."""
    b = bounds
    rows = await conn.fetch(
        """WITH followees AS (
               SELECT target_id::uuid AS id FROM follows
               WHERE follower_id = $1 AND target_type = 'member'
               ORDER BY created_at DESC, target_id DESC LIMIT $2
           ), fof AS (
               SELECT x.target_id AS tag, 0 AS reason, count(*)::float8 AS score
               FROM followees f CROSS JOIN LATERAL (
                   SELECT target_id FROM follows WHERE follower_id = f.id AND target_type = 'tag'
                   ORDER BY created_at DESC, target_id DESC LIMIT $3) x
               GROUP BY 1
           ), engaged AS (
               SELECT tag, 1 AS reason, score FROM topic_interest WHERE member_id = $1 AND score > 0
               ORDER BY score DESC, tag LIMIT $9
           ), topics AS (
               (SELECT target_id AS tag FROM follows WHERE follower_id = $1 AND target_type = 'tag'
                ORDER BY created_at DESC, target_id DESC LIMIT $4)
               UNION
               (SELECT tag FROM topic_interest WHERE member_id = $1 AND score > 0 ORDER BY score DESC, tag LIMIT $4)
           ), near AS (
               SELECT o.tag, 2 AS reason, count(*)::float8 AS score
               FROM topics t CROSS JOIN LATERAL (
                   SELECT post_id FROM post_tags WHERE tag = t.tag AND created_at > $5
                   ORDER BY created_at DESC LIMIT $6) pt
               JOIN post_tags o ON o.post_id = pt.post_id AND o.tag <> t.tag
               GROUP BY 1
           ), fresh AS (
               SELECT pt.tag, 3 AS reason, sum(1 + COALESCE(s.likes + $7 * s.comments, 0))::float8 AS score
               FROM (SELECT id FROM posts WHERE created_at > $5 AND status = 'live'
                     ORDER BY created_at DESC LIMIT $8) p
               JOIN post_tags pt ON pt.post_id = p.id
               LEFT JOIN post_stats s ON s.post_id = p.id
               GROUP BY 1
           ), found AS (
               SELECT * FROM fof UNION ALL SELECT * FROM engaged UNION ALL SELECT * FROM near
               UNION ALL SELECT * FROM fresh
           ), kept AS (
               SELECT f.tag, f.reason, f.score,
                      row_number() OVER (PARTITION BY f.reason ORDER BY f.score DESC, f.tag) AS n
               FROM found f
               WHERE NOT EXISTS (SELECT 1 FROM follows x WHERE x.follower_id = $1 AND x.target_type = 'tag'
                                                         AND x.target_id = f.tag)
           )
           SELECT tag AS key, reason, score FROM kept WHERE n <= $9""",
        member_id,
        b.followees,
        b.per_followee,
        b.topics,
        since,
        b.posts_per_topic,
        comment_weight,
        b.fresh_posts,
        b.per_reason,
    )
    return [Found(r["key"], r["reason"], r["score"]) for r in rows]


async def recent_post_counts(conn: Queryable, tags: Sequence[str], since: datetime) -> dict[str, int]:
    """Live posts carrying each tag created since `since` (one range of post_tags_recent_idx per tag)."""
    rows = await conn.fetch(
        """SELECT t.tag, (SELECT count(*) FROM post_tags pt JOIN posts p ON p.id = pt.post_id AND p.status = 'live'
                          WHERE pt.tag = t.tag AND pt.created_at > $2) AS n
           FROM unnest($1::text[]) AS t (tag)""",
        list(tags),
        since,
    )
    return {r["tag"]: r["n"] for r in rows}


async def followed_tags_among(conn: Queryable, member_id: uuid.UUID, tags: Sequence[str]) -> set[str]:
    rows = await conn.fetch(
        "SELECT target_id FROM follows WHERE follower_id = $1 AND target_type = 'tag' AND target_id = ANY($2::text[])",
        member_id,
        list(tags),
    )
    return {r["target_id"] for r in rows}


async def dismiss(conn: Queryable, member_id: uuid.UUID, dismissed_id: uuid.UUID) -> None:
    """Dismisses (again: the time is renewed) a suggested member for the viewer."""
    await conn.execute(
        "INSERT INTO suggestion_dismissals (member_id, dismissed_id) VALUES ($1, $2)"
        " ON CONFLICT (member_id, dismissed_id) DO UPDATE SET dismissed_at = now()",
        member_id,
        dismissed_id,
    )


async def forget_dismissals(conn: Queryable, before: datetime, limit: int) -> int:
    """Deletes up to `limit` dismissals made before `before` (they no longer keep anyone away)."""
    done = await conn.execute(
        "DELETE FROM suggestion_dismissals WHERE ctid IN (SELECT ctid FROM suggestion_dismissals"
        " WHERE dismissed_at < $1 ORDER BY dismissed_at LIMIT $2)",
        before,
        limit,
    )
    return int(done.split()[-1])
