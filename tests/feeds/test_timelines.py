"""Timeline rules: pushing, trimming, reading pages by cursor, rebuilding from Postgres."""

from __future__ import annotations

import uuid

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.ids import id_millis, new_id
from feedfabric.core.settings import Settings
from feedfabric.db.redisclient import create_redis
from feedfabric.feeds import timelines
from feedfabric.ops import devstack

from tests import factories as f


async def test_push_stores_raw_id_bytes_and_trims_each_timeline(redis: aioredis.Redis) -> None:
    members = [str(uuid.uuid4()) for _ in range(3)]
    posts = [new_id() for _ in range(4)]
    for post in posts:
        await timelines.push(redis, members, post, 3)
    for member in members:
        assert await timelines.timeline_ids(redis, member) == [str(p) for p in reversed(posts[1:])]
        stored = await redis.zrevrange(timelines.feed_key(member), 0, 0, withscores=True)
        assert stored == [(posts[-1].bytes, float("inf"))]


async def _text_form(redis: aioredis.Redis, member: str, posts: list[uuid.UUID]) -> None:
    """Entries as timelines written before the raw form hold them."""
    await redis.zadd(timelines.feed_key(member), {str(p): id_millis(p) for p in posts})


@pytest.mark.redis_cluster
async def test_a_timeline_mixing_text_and_raw_entries_reads_newest_first_with_text_cursors(
    redis: aioredis.Redis,
) -> None:
    member = str(uuid.uuid4())
    posts = [new_id() for _ in range(6)]
    await _text_form(redis, member, posts[:3])
    for post in posts[3:]:
        await timelines.push(redis, [member], post, 500)
    newest_first = [str(p) for p in reversed(posts)]
    assert await timelines.timeline_ids(redis, member) == newest_first
    seen: list[str] = []
    cursor = None
    while True:
        page = await timelines.read_page(redis, member, cursor, 2)
        assert page.cursor_found
        if not page.ids:
            break
        seen += page.ids
        cursor = page.ids[-1]
    assert seen == newest_first


async def test_rebuild_turns_text_entries_into_raw_ones_without_duplicates(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    me = await f.member(pool)
    mine = [await f.post(pool, me) for _ in range(3)]
    await _text_form(redis, str(me), mine[:2])
    async with pool.acquire() as conn:
        assert await timelines.rebuild(conn, redis, settings, me) == 3
    stored = await redis.zrevrange(timelines.feed_key(me), 0, -1, withscores=True)
    assert stored == [(p.bytes, float("inf")) for p in reversed(mine)]


async def test_a_500_entry_timeline_takes_at_most_13_kb(redis: aioredis.Redis) -> None:
    member = str(uuid.uuid4())
    for _ in range(500):
        await timelines.push(redis, [member], new_id(), 500)
    assert await redis.memory_usage(timelines.feed_key(member)) <= 13_000


@pytest.mark.redis_cluster
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


@pytest.mark.redis_cluster
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


async def test_a_cluster_node_refusing_keys_it_does_not_serve_still_gets_each_timeline_written(
    redis_cluster: devstack.RedisClusterNodes,
) -> None:
    redis = create_redis(Settings(redis_url=redis_cluster.url, redis_cluster=True))
    try:
        await redis.initialize()
        members = [str(uuid.uuid4()) for _ in range(30)]
        keys = [timelines.feed_key(m) for m in members]
        wrong = next(n for n in redis.get_primaries() if n.name != redis.get_node_from_key(keys[0]).name)
        post = new_id()
        # As while slots move: the batch goes to a node that does not serve all of it.
        await timelines.push_on_node(redis, wrong, members, timelines.encode_member(post), 500)
        for member in members:
            assert await timelines.timeline_ids(redis, member) == [str(post)]
    finally:
        await redis.aclose()
