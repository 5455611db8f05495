"""Declared interests and effects that learn within the day: a followed tag is the prior of the
reader's topic effect (For You ranks with it from the first page, and it fades as the reader's own
engagement speaks), and a new member's effects are refitted on each engagement."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np
import pytest
from feedfabric.db import feed_log as feed_log_db
from feedfabric.db.feed_log import ServedPage
from feedfabric.feeds import feed_log as feed_log_svc
from feedfabric.feeds import ranking, reader_effects

from tests import db_reads, factories
from tests.support import Api

NOW = datetime.now(UTC)
FOR_YOU = "{ forYouFeed(first: 6) { edges { reason node { id } } } }"


def _two_tags(served: int, engaged: tuple[int, int]) -> reader_effects.Cells:
    """One reader, two authors: the first writes about tag 0 (the declared one), the second about tag 1."""
    return reader_effects.Cells(
        reader=np.zeros(2, dtype=np.int64),
        author=np.arange(2, dtype=np.int64),
        tagset=np.arange(2, dtype=np.int64),
        served=np.full(2, served),
        engaged=np.array(engaged),
        tagsets=[(0,), (1,)],
    )


def test_a_declared_topic_starts_at_its_prior_and_fades_as_the_reader_does_not_engage() -> None:
    declared = frozenset({(0, 0)})
    few = reader_effects.fit(_two_tags(2, (0, 0)), declared=declared)
    many = reader_effects.fit(_two_tags(200, (2, 60)), declared=declared)
    undeclared = reader_effects.fit(_two_tags(2, (0, 0)))
    assert few.topic_effects[0] - few.topic_effects[1] == pytest.approx(reader_effects.DECLARED_PRIOR, abs=0.3)
    assert undeclared.topic_effects[0] == pytest.approx(undeclared.topic_effects[1], abs=0.01)
    # Ignored for 200 posts while the other topic is liked: the prior gives way to the reader's own signal.
    assert many.topic_effects[0] < 0.0 < many.topic_effects[1] - 0.5


async def test_following_a_tag_puts_its_posts_first_on_the_next_learned_page(api: Api, pool: asyncpg.Pool) -> None:
    reader = await api.member("reader")
    jazz, chess = [], []
    for n in range(3):  # one post per writer, so the author-spread rule moves nothing
        jazz.append(await api.post(await api.member(f"jazzman{n}"), f"jazz {n} #jazz"))
    for n in range(3):
        chess.append(await api.post(await api.member(f"chessman{n}"), f"chess {n} #chess"))
    fan = await factories.member(pool)
    await pool.execute(  # liked, so POPULAR brings them in beside the jazz posts TAGS brings
        "INSERT INTO likes (post_id, member_id) SELECT p::uuid, $2 FROM unnest($1::text[]) AS p", chess, fan
    )
    await api.gql("mutation { updateFeedProfile(input: {preset: LEARNED}) { preset } }", token=reader)
    await pool.execute(
        "INSERT INTO ranker_models (training_rows, auc, baseline_auc, signals, weights, intercept, active)"
        " VALUES (1000, 0.8, 0.7, $1, $2, 0, true)",
        list(ranking.SIGNALS),
        [{"topic_effect": 2.0, "recency": 1.0}.get(s, 0.0) for s in ranking.SIGNALS],
    )
    await api.gql('mutation { followTag(tag: "jazz") }', token=reader)
    me = await pool.fetchval("SELECT id FROM members WHERE external_id = 'reader'")
    assert (await db_reads.reader_effects(pool, me))[1] == {"jazz": reader_effects.DECLARED_PRIOR}
    edges = (await api.gql(FOR_YOU, token=reader))["forYouFeed"]["edges"]
    # The newer chess posts come after every jazz post: the declared topic outweighs their recency.
    assert [e["node"]["id"] for e in edges[:3]] == list(reversed(jazz))
    assert {e["node"]["id"] for e in edges[3:]} == set(chess)
    assert edges[0]["reason"] == "TAGS"


async def _served_today(pool: asyncpg.Pool, reader: uuid.UUID, author: uuid.UUID, tag: str, at: datetime) -> uuid.UUID:
    post_id = uuid.uuid4()
    await pool.execute(
        "INSERT INTO posts (id, author_id, content, created_at) VALUES ($1, $2, 'p', $3)",
        post_id,
        author,
        at - timedelta(minutes=30),
    )
    await pool.execute("INSERT INTO post_tags (post_id, tag, source) VALUES ($1, $2, 'hashtag')", post_id, tag)
    await feed_log_svc.log_pages(pool, [ServedPage(reader, "for_you", (post_id,), "redis", at, "balanced")])
    return post_id


async def test_a_new_members_effects_learn_from_todays_engagement_at_once(pool: asyncpg.Pool) -> None:
    """Served this morning, liked within minutes: no nightly refit has seen any of it (its outcomes are
    not 24 hours old), yet the new member's own refit finds the author they like and the declared topic
    they ignore."""
    reader, liked, ignored = [await factories.member(pool) for _ in range(3)]
    await factories.follow(pool, reader, "cinema", "tag")
    start = NOW - timedelta(hours=6)
    await feed_log_db.ensure_partitions(pool, {start.date(), NOW.date()})
    for n in range(20):
        at = start + timedelta(minutes=10 * n)
        post_id = await _served_today(pool, reader, liked, "sailing", at)
        await _served_today(pool, reader, ignored, "cinema", at)
        if n % 2 == 0:
            await pool.execute(
                "INSERT INTO likes (post_id, member_id, created_at) VALUES ($1, $2, $3)",
                post_id,
                reader,
                at + timedelta(minutes=3),
            )
    async with pool.acquire() as conn, conn.transaction():
        assert await reader_effects.on_engagement(conn, reader, NOW)
    authors, topics = await db_reads.reader_effects(pool, reader)
    assert authors[liked] > 0.3 > -0.3 > authors[ignored]
    assert topics["cinema"] < reader_effects.DECLARED_PRIOR - 0.5
    version = await pool.fetchval("SELECT version FROM member_signal_versions WHERE member_id = $1", reader)
    # A member who joined long ago waits for the nightly refit.
    await pool.execute("UPDATE members SET created_at = now() - interval '30 days' WHERE id = $1", reader)
    async with pool.acquire() as conn, conn.transaction():
        assert not await reader_effects.on_engagement(conn, reader, NOW)
    assert await pool.fetchval("SELECT version FROM member_signal_versions WHERE member_id = $1", reader) == version


async def test_the_nightly_refit_keeps_the_prior_of_a_followed_tag_never_served(pool: asyncpg.Pool) -> None:
    reader, author = await factories.member(pool), await factories.member(pool)
    await factories.follow(pool, reader, "gardening", "tag")
    await feed_log_db.ensure_partitions(pool, {(NOW - timedelta(days=2)).date()})
    await _served_today(pool, reader, author, "physics", NOW - timedelta(days=2))
    fitted = await reader_effects.refit(pool, since=None, until=NOW - timedelta(days=1))
    _, topics = await db_reads.reader_effects(pool, reader)
    assert topics["gardening"] == reader_effects.DECLARED_PRIOR
    assert fitted.topics == await pool.fetchval("SELECT count(*) FROM reader_topic_effects")
