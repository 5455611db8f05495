"""train-ranker on a small seeded feed log: a model is stored with its AUC and BALANCED's on the same
held-out rows, and becomes active only when it beats BALANCED."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np
import pytest
from feedfabric.db import feed_log as feed_log_db
from feedfabric.db import feed_stats
from feedfabric.feeds import ranker_training as ranker
from feedfabric.feeds import ranking

from tests import factories

NOW = datetime.now(UTC)


async def _seed(pool: asyncpg.Pool, count: int, engaged_when) -> None:  # type: ignore[no-untyped-def]
    """`count` served rows over the last ten days (one post each) with random signals; the reader
    likes the post an hour after serving when `engaged_when(signals)` says so."""
    rng = random.Random(7)
    reader = await factories.member(pool)
    author = await factories.member(pool)
    await feed_log_db.ensure_partitions(pool, {(NOW - timedelta(days=d)).date() for d in range(12)})
    rows = []
    for n in range(count):
        served_at = NOW - timedelta(days=10) + timedelta(seconds=n * 8 * 86_400 / count)
        signals = {
            "affinity": rng.uniform(0, 5),
            "interest": rng.uniform(0, 5),
            "favourite": rng.random() < 0.2,
            "age_seconds": rng.uniform(0, 48 * 3600),
            "similarity": rng.uniform(0, 1),
            "popularity": rng.uniform(0, 50),
        }
        rows.append((uuid.uuid4(), served_at, signals, engaged_when(signals, rng)))
    await pool.executemany(
        "INSERT INTO posts (id, author_id, content, created_at) VALUES ($1, $2, 'p', $3)",
        [(post_id, author, at - timedelta(seconds=s["age_seconds"])) for post_id, at, s, _ in rows],
    )
    await pool.executemany(
        "INSERT INTO feed_log (member_id, feed, post_id, position, source, affinity, interest, favourite,"
        " age_seconds, similarity, popularity, served_at) VALUES ($1, 'following', $2, 0, 'redis', $3, $4, $5, $6,"
        " $7, $8, $9)",
        [
            (
                reader,
                post_id,
                s["affinity"],
                s["interest"],
                s["favourite"],
                s["age_seconds"],
                s["similarity"],
                s["popularity"],
                at,
            )
            for post_id, at, s, _ in rows
        ],
    )
    await pool.executemany(
        "INSERT INTO likes (post_id, member_id, created_at) VALUES ($1, $2, $3)",
        [(post_id, reader, at + timedelta(hours=1)) for post_id, at, _, engaged in rows if engaged],
    )


async def test_a_model_that_beats_balanced_is_stored_and_made_active(pool: asyncpg.Pool) -> None:
    """Readers here engage with what is similar to their likes and ignore who wrote it; BALANCED weighs
    affinity as much as similarity, so a model that learns this ranks the held-out rows better."""
    await _seed(pool, 600, lambda s, rng: s["similarity"] - 0.1 * s["affinity"] + rng.gauss(0, 0.1) > 0.5)
    trained = await ranker.train(pool, now=NOW)
    assert trained.rows == 600
    assert trained.auc > trained.baseline_auc
    assert trained.active
    assert trained.weights["similarity"] > 0 > trained.weights["affinity"]
    row = await pool.fetchrow("SELECT * FROM ranker_models WHERE id = $1", trained.model_id)
    assert row["active"] and row["auc"] == pytest.approx(trained.auc)


async def test_a_model_that_does_not_beat_balanced_is_stored_but_not_active(pool: asyncpg.Pool) -> None:
    """Engagement here follows BALANCED's own score exactly, so BALANCED's AUC is 1 and no model beats it."""

    def balanced(s, rng):  # type: ignore[no-untyped-def]
        x = ranking.features(
            *(
                np.array([float(s[k])])
                for k in ("affinity", "interest", "favourite", "age_seconds", "similarity", "popularity")
            ),
            *(np.zeros(1) for _ in range(4)),
        )
        return float(ranking.scores(ranking.FIXED_PRESETS["balanced"], x)[0]) > 4.0

    await _seed(pool, 400, balanced)
    trained = await ranker.train(pool, now=NOW)
    assert trained.baseline_auc == pytest.approx(1.0)
    assert not trained.active
    assert await pool.fetchval("SELECT count(*) FROM ranker_models WHERE active") == 0
    assert await pool.fetchval("SELECT count(*) FROM ranker_models") == 1


async def test_too_little_log_trains_nothing(pool: asyncpg.Pool) -> None:
    await _seed(pool, 20, lambda s, rng: s["similarity"] > 0.5)
    with pytest.raises(ranker.NotEnoughData):
        await ranker.train(pool, now=NOW)
    assert await pool.fetchval("SELECT count(*) FROM ranker_models") == 0


async def test_the_worker_retrains_once_a_day_and_only_with_enough_new_rows(pool: asyncpg.Pool) -> None:
    from feedfabric.workers import retrain

    await _seed(pool, 300, lambda s, rng: s["similarity"] > 0.5)
    assert await retrain.retrain_once(pool, min_new_rows=301) is None  # not enough rows
    first = await retrain.retrain_once(pool, min_new_rows=300)
    assert first is not None and first.rows == 300
    assert await retrain.retrain_once(pool, min_new_rows=1) is None  # trained less than a day ago
    await pool.execute("UPDATE ranker_models SET trained_at = now() - interval '2 days'")
    # Two days later, but only the rows of the day before that model are new to it: too few.
    assert await ranker.retrain_if_due(pool, min_new_rows=300) is None


async def test_a_post_served_again_is_trained_on_once_at_its_first_serving(pool: asyncpg.Pool) -> None:
    """Served at 9:00 and again at 13:00, liked at 13:05: one row, the first serving, engaged (a like
    within 24 hours of it); the second serving is not a row of its own."""
    reader = await factories.member(pool)
    author = await factories.member(pool)
    post_id = uuid.uuid4()
    first = NOW - timedelta(days=3)
    servings = (first, first + timedelta(hours=4))  # after 20:00 UTC the second is the next day's
    await feed_log_db.ensure_partitions(pool, {at.date() for at in servings})
    await pool.execute(
        "INSERT INTO posts (id, author_id, content, created_at) VALUES ($1, $2, 'p', $3)", post_id, author, first
    )
    for at, feed in zip(servings, ("following", "for_you"), strict=True):
        await pool.execute(
            "INSERT INTO feed_log (member_id, feed, post_id, position, source, age_seconds, served_at)"
            " VALUES ($1, $2, $3, 0, 'redis', 60, $4)",
            reader,
            feed,
            post_id,
            at,
        )
    await pool.execute(
        "INSERT INTO likes (post_id, member_id, created_at) VALUES ($1, $2, $3)",
        post_id,
        reader,
        first + timedelta(hours=4, minutes=5),
    )
    rows = await feed_stats.training_rows(pool, None, NOW)
    assert [(r["served_at"], r["feed"], r["engaged"]) for r in rows] == [(first, "following", True)]


def test_a_feeds_own_engagement_rate_is_not_credited_to_the_signals_its_rows_differ_in() -> None:
    """Following rows carry no similarity and For You rows are engaged with more often, whatever their
    similarity: fitted without the feed, similarity takes the For You rows' credit; with it, it does not."""
    rng = np.random.default_rng(3)
    n = 6_000
    feeds = np.where(rng.random(n) < 0.5, "following", "for_you")
    similarity = np.where(feeds == "for_you", rng.random(n), 0.0)
    rows = ranking.features(
        rng.uniform(0, 5, n),
        rng.uniform(0, 5, n),
        rng.random(n) < 0.2,
        rng.uniform(0, 48 * 3600, n),
        similarity,
        rng.uniform(0, 50, n),
        rng.random(n),
        rng.random(n),
        np.zeros(n),
        np.zeros(n),
    )
    engaged = (rng.random(n) < np.where(feeds == "for_you", 0.6, 0.2)).astype(np.int8)
    served_at = np.arange(n, dtype=np.float64)
    similarity_weight = ranking.SIGNALS.index("similarity")
    confounded = ranker.fit(served_at, rows, engaged, np.full(n, "following"))
    assert confounded.weights[similarity_weight] > 1.0
    fitted = ranker.fit(served_at, rows, engaged, feeds)
    assert abs(fitted.weights[similarity_weight]) < 0.3


def test_a_score_that_only_tells_the_feeds_apart_earns_no_auc() -> None:
    """For You rows are engaged with more often and only they carry similarity, but within each feed
    engagement is random: BALANCED, which weighs similarity, orders no feed's posts better than chance."""
    rng = np.random.default_rng(5)
    n = 6_000
    feeds = np.where(rng.random(n) < 0.5, "following", "for_you")
    zeros = np.zeros(n)
    rows = ranking.features(
        zeros, zeros, zeros, zeros, (feeds == "for_you").astype(float), zeros, zeros, zeros, zeros, zeros
    )
    engaged = (rng.random(n) < np.where(feeds == "for_you", 0.6, 0.2)).astype(np.int8)
    fitted = ranker.fit(np.arange(n, dtype=np.float64), rows, engaged, feeds)
    assert fitted.baseline_auc == pytest.approx(0.5)
    assert fitted.auc == pytest.approx(0.5)


async def test_the_worker_refits_the_reader_effects_daily_when_the_model_is_not_due(pool: asyncpg.Pool) -> None:
    """Too few rows for a model, but a refit of the effects is due once a day of outcomes has come in."""
    await _seed(pool, 50, lambda s, rng: s["similarity"] > 0.5)
    assert await ranker.retrain_if_due(pool, min_new_rows=10_000, now=NOW) is None
    assert await pool.fetchval("SELECT count(*) FROM reader_effect_fits") == 1
    await ranker.retrain_if_due(pool, min_new_rows=10_000, now=NOW + timedelta(hours=12))
    assert await pool.fetchval("SELECT count(*) FROM reader_effect_fits") == 1
    await ranker.retrain_if_due(pool, min_new_rows=10_000, now=NOW + timedelta(days=1))
    assert await pool.fetchval("SELECT count(*) FROM reader_effect_fits") == 2


def test_the_reservoir_holds_a_uniform_sample_of_at_most_its_capacity_however_long_the_stream() -> None:
    """10,000 rows in blocks of 700 through a reservoir of 2,000: it keeps 2,000 distinct rows, early
    and late ones alike (each tenth of the stream a tenth of the sample, within sampling noise)."""
    reservoir = ranker.Reservoir(2_000, 2)
    stream = np.column_stack([np.arange(10_000, dtype=np.float64), np.zeros(10_000)])
    for start in range(0, 10_000, 700):
        reservoir.add(stream[start : start + 700])
    kept = reservoir.rows()[:, 0]
    assert reservoir.seen == 10_000 and len(kept) == 2_000 == len(set(kept.tolist()))
    per_tenth = np.bincount((kept // 1_000).astype(np.int64), minlength=10)
    assert per_tenth.min() > 140 and per_tenth.max() < 260  # 200 each expected; sd about 13


def test_a_stream_shorter_than_the_reservoir_is_kept_whole() -> None:
    reservoir = ranker.Reservoir(2_000, 1)
    for start in range(0, 1_500, 400):
        reservoir.add(np.arange(start, min(start + 400, 1_500), dtype=np.float64).reshape(-1, 1))
    assert reservoir.rows()[:, 0].tolist() == list(range(1_500))
