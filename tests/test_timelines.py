"""Timeline rules: pushing, trimming, reading pages by cursor, rebuilding from Postgres."""

from __future__ import annotations

import uuid

import asyncpg
import redis.asyncio as aioredis
from feedfabric.feeds import timelines
from feedfabric.ids import id_millis, new_id
from feedfabric.settings import Settings

from tests import factories as f


async def test_push_scores_by_creation_ms_and_trims_each_timeline(redis: aioredis.Redis) -> None:
    members = [str(uuid.uuid4()) for _ in range(3)]
    posts = [new_id() for _ in range(4)]
    for post in posts:
        await timelines.push(redis, members, post, 3)
    for member in members:
        assert await timelines.timeline_ids(redis, member) == [str(p) for p in reversed(posts[1:])]
        assert await redis.zscore(timelines.feed_key(member), str(posts[-1])) == id_millis(posts[-1])


async def test_read_page_follows_the_cursor_and_reports_a_missing_one(redis: aioredis.Redis) -> None:
    member = str(uuid.uuid4())
    posts = [new_id() for _ in range(5)]
    for post in posts:
        await timelines.push(redis, [member], post, 500)
    newest_first = [str(p) for p in reversed(posts)]
    first = await timelines.read_page(redis, member, None, 2)
    assert first == timelines.TimelinePage(newest_first[:2], True)
    second = await timelines.read_page(redis, member, first.ids[-1], 2)
    assert second == timelines.TimelinePage(newest_first[2:4], True)
    last = await timelines.read_page(redis, member, second.ids[-1], 2)
    assert last == timelines.TimelinePage(newest_first[4:], True)
    assert await timelines.read_page(redis, member, new_id(), 2) == timelines.TimelinePage([], False)
    assert not await timelines.has_timeline(redis, str(uuid.uuid4()))


async def test_rebuild_holds_own_followed_and_tagged_posts_but_not_celebrities(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    settings = settings.model_copy(update={"celebrity_follower_threshold": 2})
    me = await f.member(pool)
    friend = await f.member(pool)
    star = await f.member(pool)
    stranger = await f.member(pool)
    await f.follow(pool, me, friend)
    await f.followers(pool, star, [me, *await f.members(pool, 2)])
    await f.follow(pool, me, "cats", "tag")
    mine = await f.post(pool, me)
    friends = await f.post(pool, friend)
    tagged = await f.post(pool, stranger, tags=["cats"])
    await f.post(pool, star)
    await f.post(pool, stranger)
    deleted = await f.post(pool, friend)
    await pool.execute("UPDATE posts SET status = 'deleted' WHERE id = $1", deleted)
    async with pool.acquire() as conn:
        assert await timelines.rebuild(conn, redis, settings, me) == 3
        pulled = (await timelines.first_round(conn, settings, me, [], None, 20)).pulled
        # Pulled at read time: the celebrity's posts, never pushed, and the reader's own (read your writes).
        assert {p.author_id for p in pulled} == {star, me}
        assert [p.id for p in pulled if p.author_id == me] == [mine]
    assert await timelines.timeline_ids(redis, me) == [str(tagged), str(friends), str(mine)]


async def test_full_timeline_stays_a_compact_listpack(redis: aioredis.Redis) -> None:
    member = str(uuid.uuid4())
    for _ in range(520):
        await timelines.push(redis, [member], new_id(), 500)
    key = timelines.feed_key(member)
    assert await redis.zcard(key) == 500
    assert await redis.object("encoding", key) in (b"ziplist", b"listpack")
