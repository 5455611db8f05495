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


async def _world(pool):
    """Three members and two tagged posts of the first."""
    author, bob, cat = [await f.member(pool) for _ in range(3)]
    run = await f.post(pool, author, "10k #running", hashtags=["running"])
    cook = await f.post(pool, author, "pasta #cooking #travel", hashtags=["cooking", "travel"])
    return {"author": author, "bob": bob, "cat": cat, "run": run, "cook": cook}


def _script(w):
    """Likes in runs, broken by an unlike, a comment and a like of a pair already in the run."""
    a = w["author"]
    return [
        like(w["run"], w["bob"], a),
        like(w["cook"], w["bob"], a),
        like(w["run"], w["cat"], a),
        like(w["run"], w["bob"], a),  # again in the same run: granted once
        unlike(w["run"], w["bob"], a),
        like(w["run"], w["bob"], a),  # a new like after the unlike: granted again
        comment(w["cook"], w["cat"], a),
        like(w["cook"], w["author"], a),  # one's own post: no affinity
        like(w["cook"], w["cat"], a),
    ]


async def _state(pool, redis, w):
    names = {v: k for k, v in w.items()}
    aff = await pool.fetch("SELECT member_id, author_id, score FROM author_affinity")
    intr = await pool.fetch("SELECT member_id, tag, score FROM topic_interest")
    grants = await pool.fetch("SELECT post_id, member_id, tags, weight FROM like_grants")
    likers = {names[p]: sorted(names[m] for m in await engagement.likers(redis, p)) for p in (w["run"], w["cook"])}
    return (
        sorted(
            (names[r["member_id"]], names[r["author_id"]], round(r["score"], 9)) for r in aff if r["member_id"] in names
        ),
        sorted((names[r["member_id"]], r["tag"], round(r["score"], 9)) for r in intr if r["member_id"] in names),
        sorted(
            (names[r["post_id"]], names[r["member_id"]], tuple(r["tags"]), r["weight"])
            for r in grants
            if r["post_id"] in names
        ),
        likers,
    )


async def test_a_batch_gives_what_its_events_give_one_at_a_time(ctx, pool, redis):
    one_by_one, batched = await _world(pool), await _world(pool)
    assert await f.deliver(ctx, worker.GROUP, _script(one_by_one)) == 9
    statements: list[str] = []

    def logged(record) -> None:
        statements.append(record.query)

    async with pool.acquire() as conn, conn.transaction():
        conn.add_query_logger(logged)
        await worker.handle_batch(ctx, conn, _script(batched))
        conn.remove_query_logger(logged)
    expected = await _state(pool, redis, one_by_one)
    assert expected[0] and expected[1] and expected[2]  # the script moved every table
    assert await _state(pool, redis, batched) == expected
    # Four runs of likes, each one statement: the first three; the pair liked again (ended by the unlike);
    # the like after the unlike (ended by the comment); the last two.
    assert sum("INSERT INTO like_grants" in s and "unnest" in s for s in statements) == 4
