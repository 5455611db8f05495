"""worker-engagement: likers, affinity and interest sums after likes, unlikes, comments and redelivery."""

from __future__ import annotations

import uuid

import pytest
from feedfabric.feeds import engagement
from feedfabric.workers import engagement as worker
from feedfabric.workers.base import WorkerContext

from tests import db_reads as affinity
from tests import factories_ml as f


@pytest.fixture
def ctx(settings, pool, redis) -> WorkerContext:
    return WorkerContext(settings=settings, pool=pool, redis=redis)


async def _scores(pool, member_id: uuid.UUID) -> tuple[dict, dict]:
    async with pool.acquire() as conn:
        aff = {
            r["author_id"]: r["score"]
            for r in await conn.fetch("SELECT author_id, score FROM author_affinity WHERE member_id = $1", member_id)
        }
        intr = {
            r["tag"]: r["score"]
            for r in await conn.fetch(
                "SELECT tag, score FROM topic_interest WHERE member_id = $1 AND score <> 0", member_id
            )
        }
    return aff, intr


def like(post_id, member_id, author_id):
    return f.event("PostLiked", post_id, {"postId": post_id, "memberId": member_id, "authorId": author_id})


def unlike(post_id, member_id, author_id):
    return f.event("PostUnliked", post_id, {"postId": post_id, "memberId": member_id, "authorId": author_id})


def comment(post_id, member_id, author_id):
    return f.event(
        "CommentCreated",
        post_id,
        {"commentId": uuid.uuid4(), "postId": post_id, "memberId": member_id, "authorId": author_id},
    )


async def test_likes_unlikes_comments_and_redelivery(ctx, pool, redis, settings):
    author, bob, cat = [await f.member(pool, n) for n in ("ann", "bob", "cat")]
    run = await f.post(pool, author, "10k along the river #running", hashtags=["running"])
    cook = await f.post(pool, author, "pasta night #cooking #travel", hashtags=["cooking", "travel"])

    events = [like(run, bob, author), like(cook, bob, author), comment(run, cat, author)]
    assert await f.deliver(ctx, worker.GROUP, events) == 3

    assert await _scores(pool, bob) == (
        {author: 2 * settings.like_weight},
        {"running": 1.0, "cooking": 1.0, "travel": 1.0},
    )
    assert await _scores(pool, cat) == ({author: settings.comment_weight}, {"running": settings.comment_weight})
    assert settings.comment_weight > settings.like_weight
    assert await engagement.likers(redis, run) == {bob}

    # The post gains an inferred topic between the like and the unlike: the unlike takes back only what was given.
    await pool.execute("INSERT INTO post_tags (post_id, tag, source) VALUES ($1, 'fitness', 'inferred')", run)
    events.append(unlike(run, bob, author))
    assert await f.deliver(ctx, worker.GROUP, events[-1:]) == 1
    assert await _scores(pool, bob) == ({author: 1.0}, {"cooking": 1.0, "travel": 1.0})
    assert await engagement.likers(redis, run) == set()

    # Redelivery of everything: processed_events stops each one, nothing moves.
    assert await f.deliver(ctx, worker.GROUP, events) == 0
    assert await _scores(pool, bob) == ({author: 1.0}, {"cooking": 1.0, "travel": 1.0})
    assert await _scores(pool, cat) == ({author: 3.0}, {"running": 3.0})
    assert await engagement.likers(redis, run) == set()
    assert await engagement.likers(redis, cook) == {bob}


async def test_a_repeated_like_counts_once_and_a_stray_unlike_takes_nothing(ctx, pool):
    author, bob = await f.member(pool), await f.member(pool)
    post = await f.post(pool, author, "#running", hashtags=["running"])
    # Two distinct events for one like (e.g. a replayed outbox): the like grant absorbs the second.
    await f.deliver(ctx, worker.GROUP, [like(post, bob, author), like(post, bob, author)])
    assert await _scores(pool, bob) == ({author: 1.0}, {"running": 1.0})
    await f.deliver(ctx, worker.GROUP, [unlike(post, bob, author), unlike(post, bob, author)])
    assert await _scores(pool, bob) == ({author: 0.0}, {})
    # Like again after the unlike: it counts again.
    await f.deliver(ctx, worker.GROUP, [like(post, bob, author)])
    assert await _scores(pool, bob) == ({author: 1.0}, {"running": 1.0})


async def test_own_posts_move_no_affinity(ctx, pool):
    author = await f.member(pool)
    post = await f.post(pool, author, "#running", hashtags=["running"])
    await f.deliver(ctx, worker.GROUP, [like(post, author, author), comment(post, author, author)])
    assert await _scores(pool, author) == ({}, {"running": 4.0})


async def test_reads_for_the_feed_ranker(ctx, pool):
    author, other, bob = await f.member(pool), await f.member(pool), await f.member(pool)
    post = await f.post(pool, author, "#football", hashtags=["football"])
    await f.deliver(ctx, worker.GROUP, [like(post, bob, author), comment(post, bob, author)])
    async with pool.acquire() as conn:
        assert await affinity.affinity_for(conn, bob, [author, other]) == {author: 4.0}
        assert await affinity.interest_for(conn, bob, ["football", "music"]) == {"football": 4.0}
        assert await affinity.top_interests(conn, bob) == [("football", 4.0)]
        assert await affinity.top_authors(conn, bob) == [(author, 4.0)]


async def test_bad_payload_is_permanent(ctx, pool):
    from feedfabric.workers.base import PermanentError

    bad = f.event("PostLiked", "x", {"postId": "not-a-uuid"})
    async with pool.acquire() as conn:
        with pytest.raises(PermanentError):
            await worker.handle(ctx, conn, bad)
