"""Per-reader effects (migration 277): each reader's leaning to an author and to a tag, refitted with
the ranker (feeds.reader_effects) and read as two ranking signals.

For You's candidates statement reads them through these fragments and the feed log's writer the same
way in Python (feeds.served_signals), so a learned weight means the same thing in training and in
ranking. A pair without a row is 0.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

import asyncpg

from feedfabric.db.queryable import Queryable

__all__ = [
    "declare",
    "declared_tags",
    "declared_tags_of",
    "joined_since",
    "last_fit",
    "reader_cells",
    "replace",
    "replace_reader",
]


def author_effect(member: str, author: str) -> str:
    """The reader's effect for the author; `member` and `author` are SQL expressions."""
    return f"""COALESCE((SELECT ra.effect FROM reader_author_effects ra
                         WHERE ra.member_id = {member} AND ra.author_id = {author}), 0)"""


def topic_effect(member: str, post: str) -> str:
    """The best of the reader's effects for the post's tags (a tag without one counts 0), 0 untagged."""
    return f"""COALESCE((SELECT max(COALESCE(rt.effect, 0)) FROM post_tags pt
                         LEFT JOIN reader_topic_effects rt ON rt.member_id = {member} AND rt.tag = pt.tag
                         WHERE pt.post_id = {post}), 0)"""


async def replace(
    conn: asyncpg.Connection,
    *,
    authors: Iterable[tuple[uuid.UUID, uuid.UUID, float]],
    topics: Iterable[tuple[uuid.UUID, str, float]],
    log_until: datetime,
    rows: int,
    counts: tuple[int, int],
    timeout: float,
) -> None:
    """The refit's effects in place of the last ones (call inside a transaction that lifted
    statement_timeout: readers see either); `counts`: how many authors' and topics' rows the iterables
    yield. Each statement gets `timeout` (millions of effects take longer than the pool's command
    timeout, a request's). DELETE, not TRUNCATE, so For You pages ranking meanwhile read the old
    effects instead of waiting."""
    await conn.execute("DELETE FROM reader_author_effects", timeout=timeout)
    await conn.execute("DELETE FROM reader_topic_effects", timeout=timeout)
    await conn.copy_records_to_table(
        "reader_author_effects", records=authors, columns=["member_id", "author_id", "effect"], timeout=timeout
    )
    await conn.copy_records_to_table(
        "reader_topic_effects", records=topics, columns=["member_id", "tag", "effect"], timeout=timeout
    )
    await conn.execute(
        "INSERT INTO reader_effect_fits (log_until, rows, authors, topics) VALUES ($1, $2, $3, $4)",
        log_until,
        rows,
        *counts,
    )


async def last_fit(conn: Queryable) -> datetime | None:
    """The end of the log the last refit read (its rows were served before it)."""
    found: datetime | None = await conn.fetchval("SELECT max(log_until) FROM reader_effect_fits")
    return found


async def declared_tags(conn: Queryable) -> list[tuple[uuid.UUID, str]]:
    """Every (member, tag) follow: a member's declared interests, the prior of their topic effects."""
    rows = await conn.fetch("SELECT follower_id, target_id FROM follows WHERE target_type = 'tag'")
    return [(r["follower_id"], r["target_id"]) for r in rows]


async def declared_tags_of(conn: Queryable, member_id: uuid.UUID) -> list[str]:
    rows = await conn.fetch(
        "SELECT target_id FROM follows WHERE follower_id = $1 AND target_type = 'tag' ORDER BY target_id", member_id
    )
    return [r["target_id"] for r in rows]


async def reader_cells(
    conn: Queryable, member_id: uuid.UUID, until: datetime, rows: int
) -> list[tuple[uuid.UUID, list[str], int, int]]:
    """One reader's newest `rows` first servings before `until`, counted per author and tag set:
    (author, tags, served, engaged), engaged meaning liked, commented on or reposted after serving
    and before `until` (within 24 hours): a day's outcomes so far, for a refit within the day. Read
    through feed_log_member_idx, so the work is bounded by `rows` however long the reader's log."""
    found = await conn.fetch(
        """WITH recent AS (
               SELECT f.post_id, min(f.served_at) AS served_at FROM (
                   SELECT post_id, served_at FROM feed_log WHERE member_id = $1 AND served_at < $2
                   ORDER BY served_at DESC LIMIT $3) f
               GROUP BY f.post_id
           ), firsts AS (
               SELECT r.post_id, r.served_at FROM recent r
               WHERE NOT EXISTS (SELECT 1 FROM likes l WHERE l.post_id = r.post_id AND l.member_id = $1
                                                       AND l.created_at < r.served_at)
                 AND NOT EXISTS (SELECT 1 FROM comments c WHERE c.author_id = $1 AND c.post_id = r.post_id
                                                          AND c.created_at < r.served_at)
           ), outcomes AS (
               SELECT f.post_id, p.author_id,
                      COALESCE((SELECT array_agg(pt.tag ORDER BY pt.tag) FROM post_tags pt WHERE pt.post_id = p.id),
                               '{}'::text[]) AS tags,
                      (EXISTS (SELECT 1 FROM likes l WHERE l.post_id = f.post_id AND l.member_id = $1
                                 AND l.created_at >= f.served_at AND l.created_at < LEAST($2, f.served_at + interval '24 hours'))
                       OR EXISTS (SELECT 1 FROM comments c WHERE c.author_id = $1 AND c.post_id = f.post_id
                                 AND c.created_at >= f.served_at AND c.created_at < LEAST($2, f.served_at + interval '24 hours'))
                       OR EXISTS (SELECT 1 FROM posts r WHERE r.author_id = $1 AND r.repost_of = f.post_id
                                 AND r.created_at >= f.served_at AND r.created_at < LEAST($2, f.served_at + interval '24 hours'))
                      ) AS engaged
               FROM firsts f JOIN posts p ON p.id = f.post_id
           )
           SELECT author_id, tags, count(*) AS served, count(*) FILTER (WHERE engaged) AS engaged
           FROM outcomes GROUP BY 1, 2 ORDER BY 1, 2""",
        member_id,
        until,
        rows,
    )
    return [(r["author_id"], list(r["tags"]), r["served"], r["engaged"]) for r in found]


async def replace_reader(
    conn: asyncpg.Connection,
    member_id: uuid.UUID,
    authors: Iterable[tuple[uuid.UUID, float]],
    topics: Iterable[tuple[str, float]],
) -> None:
    """One reader's effects in place of theirs (call inside a transaction), and their signal version
    bumped (migration 350), so a feed-log writer that keeps their signals reads them again."""
    await conn.execute("DELETE FROM reader_author_effects WHERE member_id = $1", member_id)
    await conn.execute("DELETE FROM reader_topic_effects WHERE member_id = $1", member_id)
    await conn.executemany(
        "INSERT INTO reader_author_effects (member_id, author_id, effect) VALUES ($1, $2, $3)",
        [(member_id, a, e) for a, e in authors],
    )
    await conn.executemany(
        "INSERT INTO reader_topic_effects (member_id, tag, effect) VALUES ($1, $2, $3)",
        [(member_id, t, e) for t, e in topics],
    )
    await bump_version(conn, member_id)


async def declare(conn: asyncpg.Connection, member_id: uuid.UUID, tag: str, effect: float) -> bool:
    """The declared prior as the reader's effect for a tag they have none for yet; True when added."""
    done = await conn.execute(
        "INSERT INTO reader_topic_effects (member_id, tag, effect) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        member_id,
        tag,
        effect,
    )
    if done.endswith(" 1"):
        await bump_version(conn, member_id)
        return True
    return False


async def bump_version(conn: Queryable, member_id: uuid.UUID) -> None:
    await conn.execute(
        "INSERT INTO member_signal_versions AS v (member_id, version) VALUES ($1, 1)"
        " ON CONFLICT (member_id) DO UPDATE SET version = v.version + 1",
        member_id,
    )


async def joined_since(conn: Queryable, member_id: uuid.UUID, since: datetime) -> bool:
    return bool(await conn.fetchval("SELECT created_at > $2 FROM members WHERE id = $1", member_id, since))
