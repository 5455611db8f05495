"""worker-events: who gets a post, and what happens on return and redelivery."""

from __future__ import annotations

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.events import Event
from feedfabric.core.settings import Settings
from feedfabric.feeds import timelines
from feedfabric.workers import events
from feedfabric.workers.base import WorkerContext
from redis.exceptions import ResponseError

from tests import factories as f
from tests.pipeline_support import all_committed, eventually, group_runner, relay, running


def _small(settings: Settings, **extra: object) -> Settings:
    return settings.model_copy(update={"fanout_batch_size": 2, **extra})


async def _handle(settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, event: Event) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await events.handle(WorkerContext(settings=settings, pool=pool, redis=redis), conn, event)


def _created(post_id: object, event_id: int = 1) -> Event:
    return Event(event_id, "PostCreated", str(post_id), 1, {"postId": str(post_id)})


@pytest.mark.redis_cluster
async def test_post_reaches_every_follower_and_not_a_non_follower(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    settings = _small(settings)
    author = await f.member(pool)
    fans = await f.members(pool, 5)
    stranger = await f.member(pool)
    await f.followers(pool, author, fans)
    runner = group_runner(settings, pool, redis, events.GROUP)
    async with running(relay(settings).run, runner.run):
        post = await f.post(pool, author, shards=settings.outbox_shards)

        async def everyone_has_it() -> bool:
            return all([str(post) in await timelines.timeline_ids(redis, m) for m in [author, *fans]])

        await eventually(everyone_has_it)
    assert await timelines.timeline_ids(redis, stranger) == []


async def test_celebrity_post_is_pushed_to_nobody_but_the_author(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    settings = _small(settings, celebrity_follower_threshold=3)
    star = await f.member(pool)
    fans = await f.members(pool, 4)
    await f.followers(pool, star, fans)
    post = await f.post(pool, star)
    await _handle(settings, pool, redis, _created(post))
    assert await timelines.timeline_ids(redis, star) == [str(post)]
    for fan in fans:
        assert not await timelines.has_timeline(redis, fan)


async def test_inactive_follower_is_skipped_then_rebuilt_on_return(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    settings = _small(settings, inactive_after_days=14)
    author = await f.member(pool)
    active = await f.member(pool)
    away = await f.member(pool, seen_days_ago=30)
    await f.followers(pool, author, [active, away])
    post = await f.post(pool, author)
    await _handle(settings, pool, redis, _created(post))
    assert await timelines.timeline_ids(redis, active) == [str(post)]
    assert not await timelines.has_timeline(redis, away)

    event_id = await f.member_returned(pool, away)
    await _handle(settings, pool, redis, Event(event_id, "MemberReturned", str(away), 1, {"memberId": str(away)}))
    assert await timelines.timeline_ids(redis, away) == [str(post)]


@pytest.mark.redis_cluster
async def test_timeline_never_exceeds_its_maximum(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    settings = _small(settings, feed_max_length=5)
    author = await f.member(pool)
    fan = await f.member(pool)
    await f.follow(pool, fan, author)
    posts = [await f.post(pool, author) for _ in range(8)]
    for i, post in enumerate(posts):
        await _handle(settings, pool, redis, _created(post, i + 1))
        assert await redis.zcard(timelines.feed_key(fan)) <= 5
    assert await timelines.timeline_ids(redis, fan) == [str(p) for p in reversed(posts[-5:])]


async def test_same_event_delivered_twice_changes_nothing(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    from aiokafka import AIOKafkaProducer
    from feedfabric.core.topics import ensure_topics

    calls: list[int] = []

    async def counting(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
        calls.append(event.event_id)
        await events.handle(ctx, conn, event)

    spec = events.GROUP.__class__(**{**events.GROUP.__dict__, "handle": counting})
    author = await f.member(pool)
    fan = await f.member(pool)
    await f.follow(pool, fan, author)
    post = await f.post(pool, author)
    await ensure_topics(settings)
    message = _created(post, 7).to_message()
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, acks="all")
    await producer.start()
    try:
        import json

        for _ in range(2):
            await producer.send_and_wait(
                settings.kafka_topic_prefix + "feedfabric.posts", json.dumps(message).encode(), key=str(post).encode()
            )
    finally:
        await producer.stop()
    runner = group_runner(settings, pool, redis, spec)
    async with running(runner.run):
        await eventually(lambda: pool.fetchval("SELECT count(*) FROM processed_events"))
        await eventually(lambda: all_committed(runner))
    assert calls == [7]
    assert await pool.fetchval("SELECT count(*) FROM processed_events WHERE event_id = 7") == 1
    assert await timelines.timeline_ids(redis, fan) == [str(post)]


async def test_post_with_a_followed_tag_reaches_tag_followers_once(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    settings = _small(settings)
    author = await f.member(pool)
    both = await f.member(pool)
    tag_only = await f.members(pool, 3)
    await f.follow(pool, both, author)
    for m in [both, *tag_only]:
        await f.follow(pool, m, "running", "tag")
    post = await f.post(pool, author, tags=["running"])
    async with pool.acquire() as conn:
        result = await timelines.fan_out(conn, redis, settings, post)
    assert result is not None and result.pushed == 5
    for m in [both, *tag_only]:
        assert await timelines.timeline_ids(redis, m) == [str(post)]


@pytest.mark.redis_cluster
async def test_an_author_following_their_own_tag_is_pushed_once(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    settings = _small(settings)
    author = await f.member(pool)
    fans = await f.members(pool, 3)
    for m in [author, *fans]:
        await f.follow(pool, m, "running", "tag")
    post = await f.post(pool, author, tags=["running"])
    async with pool.acquire() as conn:
        result = await timelines.fan_out(conn, redis, settings, post)
    assert result is not None and result.pushed == 4
    for m in [author, *fans]:
        assert await timelines.timeline_ids(redis, m) == [str(post)]


@pytest.mark.redis_cluster
async def test_a_batch_redis_refuses_fails_the_fan_out_and_leaves_the_connection_usable(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    # Batches of two, written while the next page is read: the third of five batches fails.
    settings = _small(settings)
    author = await f.member(pool)
    fans = sorted(await f.members(pool, 10), key=str)
    await f.followers(pool, author, fans)
    await redis.set(timelines.feed_key(fans[5]), "not a timeline")
    post = await f.post(pool, author)
    async with pool.acquire() as conn:
        with pytest.raises(ResponseError):
            async with conn.transaction():
                await timelines.fan_out(conn, redis, settings, post)
        assert await conn.fetchval("SELECT 1") == 1
    assert await timelines.timeline_ids(redis, fans[0]) == [str(post)]


def _unfollowed(follower: object, author: object) -> Event:
    payload = {"followerId": str(follower), "memberId": str(author)}
    return Event(2, "MemberUnfollowed", str(follower), 1, payload)


@pytest.mark.redis_cluster
async def test_an_unfollow_takes_the_authors_posts_out_of_the_timeline_but_not_a_followed_tags(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    reader, author, other = await f.member(pool), await f.member(pool), await f.member(pool)
    await f.follow(pool, reader, author)
    await f.follow(pool, reader, other)
    await f.follow(pool, reader, "running", "tag")
    plain, tagged, kept = (
        await f.post(pool, author),
        await f.post(pool, author, tags=["running"]),
        await f.post(pool, other),
    )
    for post in (plain, tagged, kept):
        await _handle(settings, pool, redis, _created(post))
    await pool.execute("DELETE FROM follows WHERE follower_id = $1 AND target_id = $2", reader, str(author))
    await _handle(settings, pool, redis, _unfollowed(reader, author))
    assert await timelines.timeline_ids(redis, reader) == [str(kept), str(tagged)]


async def test_an_unfollow_undone_before_it_is_applied_takes_nothing_out(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    reader, author = await f.member(pool), await f.member(pool)
    await f.follow(pool, reader, author)
    post = await f.post(pool, author)
    await _handle(settings, pool, redis, _created(post))
    await _handle(settings, pool, redis, _unfollowed(reader, author))  # followed again meanwhile
    assert await timelines.timeline_ids(redis, reader) == [str(post)]


async def test_a_tag_unfollow_takes_out_the_posts_only_that_tag_brought(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    reader, stranger, friend = await f.member(pool), await f.member(pool), await f.member(pool)
    await f.follow(pool, reader, friend)
    for tag in ("running", "cycling"):
        await f.follow(pool, reader, tag, "tag")
    only_tag = await f.post(pool, stranger, tags=["running"])
    other_tag = await f.post(pool, stranger, tags=["running", "cycling"])
    friends = await f.post(pool, friend, tags=["running"])
    for post in (only_tag, other_tag, friends):
        await _handle(settings, pool, redis, _created(post))
    await pool.execute("DELETE FROM follows WHERE follower_id = $1 AND target_id = 'running'", reader)
    await _handle(
        settings, pool, redis, Event(3, "TagUnfollowed", str(reader), 1, {"followerId": str(reader), "tag": "running"})
    )
    assert await timelines.timeline_ids(redis, reader) == [str(friends), str(other_tag)]


def _followed(follower: object, author: object) -> Event:
    return Event(4, "MemberFollowed", str(follower), 1, {"followerId": str(follower), "memberId": str(author)})


async def test_a_follow_merges_the_authors_posts_within_the_timelines_span_and_a_refollow_brings_them_back(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    reader, author = await f.member(pool), await f.member(pool)
    before_span = await f.post(pool, author)
    own = await f.post(pool, reader)
    await _handle(settings, pool, redis, _created(own))  # the timeline reaches down to `own`
    posts = [await f.post(pool, author) for _ in range(3)]
    await f.follow(pool, reader, author)
    await _handle(settings, pool, redis, _followed(reader, author))
    expected = [str(p) for p in reversed(posts)] + [str(own)]
    assert await timelines.timeline_ids(redis, reader) == expected
    assert str(before_span) not in expected
    await pool.execute("DELETE FROM follows WHERE follower_id = $1", reader)
    await _handle(settings, pool, redis, _unfollowed(reader, author))
    assert await timelines.timeline_ids(redis, reader) == [str(own)]
    await f.follow(pool, reader, author)
    await _handle(settings, pool, redis, _followed(reader, author))
    assert await timelines.timeline_ids(redis, reader) == expected


async def test_a_follow_merges_nothing_without_a_timeline_or_of_a_celebrity(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    settings = settings.model_copy(update={"celebrity_follower_threshold": 2})
    newcomer, reader, author, celebrity = await f.members(pool, 4)
    await f.followers(pool, celebrity, await f.members(pool, 3))
    own = await f.post(pool, reader)
    await _handle(settings, pool, redis, _created(own))
    await f.post(pool, author)
    await f.post(pool, celebrity)
    for follower, followed in ((newcomer, author), (reader, celebrity)):
        await f.follow(pool, follower, followed)
        await _handle(settings, pool, redis, _followed(follower, followed))
    assert await timelines.timeline_ids(redis, newcomer) == []  # a rebuild fills it when they read
    assert await timelines.timeline_ids(redis, reader) == [str(own)]  # pulled at read time instead
