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

from feedfabric.db.executor import Executor


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


async def last_fit(conn: Executor) -> datetime | None:
    """The end of the log the last refit read (its rows were served before it)."""
    found: datetime | None = await conn.fetchval("SELECT max(log_until) FROM reader_effect_fits")
    return found


async def of_member(conn: Executor, member_id: uuid.UUID) -> tuple[dict[uuid.UUID, float], dict[str, float]]:
    """A reader's stored effects: by author, by tag."""
    authors = await conn.fetch("SELECT author_id, effect FROM reader_author_effects WHERE member_id = $1", member_id)
    topics = await conn.fetch("SELECT tag, effect FROM reader_topic_effects WHERE member_id = $1", member_id)
    return {r["author_id"]: r["effect"] for r in authors}, {r["tag"]: r["effect"] for r in topics}
