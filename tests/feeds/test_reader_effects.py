"""Per-reader effects: refitted from the feed log alone, a reader's leaning to an author and to a tag,
logged with every served post as two ranking signals."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np
import pytest
from feedfabric.db import feed_log as feed_log_db
from feedfabric.db.feed_log import ServedPage
from feedfabric.feeds import feed_log as feed_log_svc
from feedfabric.feeds import reader_effects

from tests import db_reads, factories

NOW = datetime.now(UTC)


async def _served(pool: asyncpg.Pool, reader: uuid.UUID, author: uuid.UUID, tag: str, at: datetime) -> uuid.UUID:
    post_id = uuid.uuid4()
    await pool.execute(
        "INSERT INTO posts (id, author_id, content, created_at) VALUES ($1, $2, 'p', $3)",
        post_id,
        author,
        at - timedelta(hours=1),
    )
    await pool.execute("INSERT INTO post_tags (post_id, tag, source) VALUES ($1, $2, 'hashtag')", post_id, tag)
    await feed_log_svc.log_pages(pool, [ServedPage(reader, "for_you", (post_id,), "redis", at, "balanced")])
    return post_id


async def _log(pool: asyncpg.Pool, reader: uuid.UUID, chance: dict[uuid.UUID, float], tag: str, count: int) -> None:
    """`count` posts by each author of `chance`, all carrying `tag`, served to `reader` over the ten days
    before yesterday; the reader likes each with the author's chance."""
    rng = random.Random(11)
    await feed_log_db.ensure_partitions(pool, {(NOW - timedelta(days=d)).date() for d in range(13)})
    for n in range(count):
        for author, p in chance.items():
            at = NOW - timedelta(days=11) + timedelta(seconds=n * 9 * 86_400 / count)
            post_id = await _served(pool, reader, author, tag, at)
            if rng.random() < p:
                await pool.execute(
                    "INSERT INTO likes (post_id, member_id, created_at) VALUES ($1, $2, $3)",
                    post_id,
                    reader,
                    at + timedelta(minutes=5),
                )


async def test_a_readers_hidden_favourite_author_gets_a_higher_effect_than_an_author_they_ignore(
    pool: asyncpg.Pool,
) -> None:
    """Both authors write about jazz and are served alike; the reader likes one's posts half the time
    and the other's almost never. Nothing in the log names the favourite: the fit finds it."""
    reader, favourite, ignored = [await factories.member(pool) for _ in range(3)]
    await _log(pool, reader, {favourite: 0.5, ignored: 0.03}, "jazz", 40)
    await reader_effects.refit(pool, since=None, until=NOW - timedelta(days=1))
    authors, topics = await db_reads.reader_effects(pool, reader)
    assert authors[favourite] > 0.5
    assert authors.get(ignored, 0.0) < 0
    assert set(topics) == {"jazz"}


async def test_the_effects_are_logged_with_each_served_post_as_of_serving(pool: asyncpg.Pool) -> None:
    reader, favourite, ignored = [await factories.member(pool) for _ in range(3)]
    await _log(pool, reader, {favourite: 0.5, ignored: 0.03}, "jazz", 40)
    await reader_effects.refit(pool, since=None, until=NOW - timedelta(days=1))
    authors, topics = await db_reads.reader_effects(pool, reader)
    post_id = await _served(pool, reader, favourite, "jazz", NOW)
    row = await pool.fetchrow(
        "SELECT author_effect, topic_effect FROM feed_log WHERE post_id = $1 AND member_id = $2", post_id, reader
    )
    assert row["author_effect"] == pytest.approx(authors[favourite])
    assert row["topic_effect"] == pytest.approx(topics["jazz"])


async def test_a_refit_of_the_same_log_stores_the_same_effects(pool: asyncpg.Pool) -> None:
    reader, favourite, ignored = [await factories.member(pool) for _ in range(3)]
    await _log(pool, reader, {favourite: 0.5, ignored: 0.1}, "chess", 30)
    until = NOW - timedelta(days=1)
    first = await reader_effects.refit(pool, since=None, until=until)
    effects = await db_reads.reader_effects(pool, reader)
    again = await reader_effects.refit(pool, since=None, until=until)
    assert again == first
    assert await db_reads.reader_effects(pool, reader) == effects
    assert await pool.fetchval("SELECT count(*) FROM reader_author_effects") == first.authors


async def test_a_new_reader_has_no_effects_and_is_served_with_zero_effects(pool: asyncpg.Pool) -> None:
    """Another reader's effects for the same author and tag are theirs alone."""
    reader, favourite, ignored, newcomer = [await factories.member(pool) for _ in range(4)]
    await _log(pool, reader, {favourite: 0.5, ignored: 0.03}, "jazz", 40)
    await reader_effects.refit(pool, since=None, until=NOW - timedelta(days=1))
    assert await db_reads.reader_effects(pool, newcomer) == ({}, {})
    post_id = await _served(pool, newcomer, favourite, "jazz", NOW)
    row = await pool.fetchrow(
        "SELECT author_effect, topic_effect FROM feed_log WHERE post_id = $1 AND member_id = $2", post_id, newcomer
    )
    assert (row["author_effect"], row["topic_effect"]) == (0.0, 0.0)


def test_a_topic_liked_across_authors_is_credited_to_the_topic_not_to_each_author() -> None:
    """One reader, four authors: two write running, two cooking; every running post is liked half the
    time, every cooking post rarely. The topic carries the difference; the authors within a topic are alike."""
    running, cooking = 0, 1
    cells = reader_effects.Cells(
        reader=np.zeros(4, dtype=np.int64),
        author=np.arange(4, dtype=np.int64),
        tagset=np.array([0, 0, 1, 1]),
        served=np.full(4, 60),
        engaged=np.array([30, 30, 3, 3]),
        tagsets=[(running,), (cooking,)],
    )
    fitted = reader_effects.fit(cells)
    topic = dict(zip(map(tuple, fitted.topic_pairs.tolist()), fitted.topic_effects.tolist(), strict=True))
    author = fitted.author_effects
    assert topic[(0, running)] - topic[(0, cooking)] > 1.0
    assert author[0] == pytest.approx(author[1]) and author[2] == pytest.approx(author[3])
