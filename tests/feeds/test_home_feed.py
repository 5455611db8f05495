"""The Following feed's read path: Redis first, Postgres whenever it must, and no visible difference but `source`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.settings import Settings
from feedfabric.db import members as members_db
from feedfabric.db.breaker import CircuitBreaker
from feedfabric.db.pool import transaction
from feedfabric.db.redisclient import create_redis
from feedfabric.feeds import timelines
from feedfabric.feeds.home import HomeFeedService
from feedfabric.feeds.timelines.encoding import shard_of
from feedfabric.feeds.viewer import Viewer
from feedfabric.ops import devstack
from redis.asyncio.cluster import RedisCluster

from tests.support import HOME, Api, breaker_allows, make_api


async def fan_out_all(api: Api, pool: asyncpg.Pool, redis: aioredis.Redis) -> None:
    """What worker-events does for every PostCreated, run in place of the broker round trip."""
    rows = await pool.fetch("SELECT payload FROM outbox WHERE event_type = 'PostCreated' ORDER BY id")
    for row in rows:
        async with transaction(pool) as conn:
            await timelines.fan_out(conn, redis, api.settings, uuid.UUID(row["payload"]["postId"]))


async def read_all(api: Api, token: str, first: int) -> tuple[list[str], list[str]]:
    ids: list[str] = []
    sources: list[str] = []
    after = None
    while True:
        data = (await api.gql(HOME, {"first": first, "after": after}, token=token))["homeFeed"]
        ids += [e["node"]["id"] for e in data["edges"]]
        sources.append(data["source"])
        if not data["pageInfo"]["hasNextPage"]:
            return ids, sources
        after = data["pageInfo"]["endCursor"]


@pytest.mark.redis_cluster
async def test_a_pushed_timeline_is_served_from_redis_with_fresh_text(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.follow(maya, "theo")
    post = await api.post(theo, "first draft")
    await fan_out_all(api, pool, redis)
    await api.gql('mutation($id: ID!) { updatePost(id: $id, content: "final") { id } }', {"id": post}, token=theo)
    data = (await api.gql(HOME, {"first": 5}, token=maya))["homeFeed"]
    assert data["source"] == "REDIS"
    assert [e["node"]["content"] for e in data["edges"]] == ["final"]


async def test_no_timeline_is_served_from_postgres_and_asks_for_a_rebuild_once(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    await api.post(maya, "mine")
    for _ in range(2):
        assert (await api.gql(HOME, token=maya))["homeFeed"]["source"] == "POSTGRES"
    events = await pool.fetch("SELECT payload FROM outbox WHERE event_type = 'MemberReturned'")
    assert len(events) == 1


async def test_a_cursor_not_in_the_timeline_is_served_from_postgres(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    stranger = await api.member("stranger")
    await api.follow(maya, "theo")
    older = await api.post(theo, "older")
    elsewhere = await api.post(stranger, "never in maya's timeline")
    await api.post(maya, "mine")
    await fan_out_all(api, pool, redis)
    data = (await api.gql(HOME, {"first": 5, "after": elsewhere}, token=maya))["homeFeed"]
    assert data["source"] == "POSTGRES"
    assert [e["node"]["id"] for e in data["edges"]] == [older]


@pytest.mark.redis_cluster
async def test_a_page_past_the_kept_entries_continues_from_postgres_without_gap_or_duplicate(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    # A followed author's posts: the reader's own are pulled from Postgres by every first round.
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.follow(maya, "theo")
    posted = [await api.post(theo, f"p{i}") for i in range(12)]
    small = api.settings.model_copy(update={"feed_max_length": 5})
    rows = await pool.fetch("SELECT payload FROM outbox WHERE event_type = 'PostCreated' ORDER BY id")
    for row in rows:
        async with transaction(pool) as conn:
            await timelines.fan_out(conn, redis, small, uuid.UUID(row["payload"]["postId"]))
    maya_id = await pool.fetchval("SELECT id FROM members WHERE username = 'maya'")
    assert len(await timelines.timeline_ids(redis, maya_id)) == 5
    ids, sources = await read_all(api, maya, 4)
    assert ids == list(reversed(posted))
    assert sources[0] == "REDIS" and sources[1] == "REDIS_POSTGRES" and sources[-1] == "POSTGRES"


async def test_an_inactive_member_is_served_from_postgres_and_their_return_is_announced(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    maya = await api.member("maya")
    await api.post(maya, "old")
    await fan_out_all(api, pool, redis)
    days = api.settings.inactive_after_days + 1
    await pool.execute("UPDATE members SET last_seen_at = now() - $1::interval", timedelta(days=days))
    assert (await api.gql(HOME, token=maya))["homeFeed"]["source"] == "POSTGRES"
    events = await pool.fetch("SELECT payload FROM outbox WHERE event_type = 'MemberReturned'")
    assert [e["payload"]["memberId"] for e in events] == [str(await pool.fetchval("SELECT id FROM members"))]
    # Seen again now: the next read is back on Redis.
    assert (await api.gql(HOME, token=maya))["homeFeed"]["source"] == "REDIS"


async def test_the_celebrity_merge_reads_as_if_the_celebrity_had_been_pushed(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    async with make_api(settings.model_copy(update={"celebrity_follower_threshold": 2})) as api:
        await _celebrity_scenario(api, pool, redis)


async def _celebrity_scenario(api: Api, pool: asyncpg.Pool, redis: aioredis.Redis) -> None:
    fans = [await api.member(f"fan{i}") for i in range(3)]
    star = await api.member("star")
    friend = await api.member("friend")
    for fan in fans:
        await api.follow(fan, "star")
    await api.follow(fans[0], "friend")
    for i in range(6):
        await api.post(star if i % 2 else friend, f"post {i}")
    await fan_out_all(api, pool, redis)
    fan_id = await pool.fetchval("SELECT id FROM members WHERE username = 'fan0'")
    pushed = await timelines.timeline_ids(redis, fan_id)
    assert len(pushed) == 3  # only friend's posts were pushed
    for first in (1, 2, 4, 7):
        ids, sources = await read_all(api, fans[0], first)
        assert len(ids) == 6 and ids == sorted(ids, reverse=True)
        assert sources[0] == "REDIS"


async def test_a_page_its_first_round_fills_carries_its_extras_and_reads_as_from_postgres(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    async with make_api(settings.model_copy(update={"celebrity_follower_threshold": 2})) as api:
        fans = [await api.member(f"fan{i}") for i in range(3)]
        star = await api.member("star")
        friend = await api.member("friend")
        for fan in fans:
            await api.follow(fan, "star")
        await api.follow(fans[0], "friend")
        for i in range(22):  # more than a page, so Redis alone fills it
            await api.post(friend, f"pushed {i}")
        starred = await api.post(star, "pulled at read time #news")
        await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": starred}, token=friend)
        await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": starred}, token=fans[0])
        await api.gql(
            'mutation($p: ID!) { addComment(postId: $p, content: "nice") { id } }', {"p": starred}, token=fans[1]
        )
        await fan_out_all(api, pool, redis)
        fan_id = await pool.fetchval("SELECT id FROM members WHERE username = 'fan0'")

        member = await members_db.by_external_id(pool, "fan0")
        assert member is not None
        service = HomeFeedService(api.settings, pool, redis, CircuitBreaker(cool_down_s=1))
        page = await service.read(Viewer(member=member), member, None, 20)
        assert page.source == "redis" and page.extras is not None
        assert {p.id for p in page.items} <= set(page.extras.extras)
        served = (await api.rest("GET", "/userfeed/home", token=fans[0])).json()
        await redis.delete(timelines.feed_key(fan_id))
        fallback = (await api.rest("GET", "/userfeed/home", token=fans[0])).json()
    assert (served["source"], fallback["source"]) == ("redis", "postgres")
    assert served["posts"] == fallback["posts"]
    liked = next(p for p in served["posts"] if p["id"] == starred)
    assert (liked["likeCount"], liked["commentCount"], liked["viewerHasLiked"], liked["tags"]) == (1, 1, True, ["news"])
    shared = next(p for p in served["posts"] if p["repostOf"] == starred)
    assert shared["repost"]["id"] == starred and shared["repost"]["likeCount"] == 1


@pytest.fixture
async def own_redis(tmp_path: Path) -> AsyncIterator[devstack.Service]:
    service = devstack.start_redis(tmp_path)
    yield service
    service.stop()


async def test_redis_stopping_mid_test_costs_no_read_and_its_return_is_used(
    settings: Settings, own_redis: devstack.Service, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    settings = settings.model_copy(update={"redis_url": own_redis.url, "redis_breaker_cooldown_ms": 200})
    redis = aioredis.from_url(own_redis.url)
    async with make_api(settings) as api:
        maya = await api.member("maya")
        await api.post(maya, "hello")
        await fan_out_all(api, pool, redis)
        assert (await api.gql(HOME, token=maya))["homeFeed"]["source"] == "REDIS"
        port = int(own_redis.url.rsplit(":", 1)[1].split("/")[0])
        own_redis.stop()
        for _ in range(5):
            data = (await api.gql(HOME, token=maya))["homeFeed"]
            assert data["source"] == "POSTGRES" and len(data["edges"]) == 1
        restarted = devstack.start_redis(tmp_path / "again", port=port)
        try:
            await breaker_allows(api)
            await redis.aclose()
            redis = aioredis.from_url(own_redis.url)
            await api.post(maya, "again")
            await fan_out_all(api, pool, redis)
            sources = [(await api.gql(HOME, token=maya))["homeFeed"]["source"] for _ in range(3)]
            # The restarted Redis may have lost writes: entries up to its floor (the newest post when the
            # restart was noticed) are read from Postgres, anything newer from Redis (docs/reliability.md).
            assert sources[-1] == "REDIS_POSTGRES"
        finally:
            await redis.aclose()
            restarted.stop()


async def test_the_feed_log_records_served_pages_with_reposts_as_their_original(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.follow(maya, "theo")
    original = await api.post(maya, "share me")
    await api.gql("mutation($id: ID!) { repost(postId: $id) { id } }", {"id": original}, token=theo)
    await api.gql("{ homeFeed { source } }", token=maya)
    await api.gql('{ tagFeed(tag: "x") { source } }', token=maya)
    for _ in range(50):
        rows = await pool.fetch("SELECT feed, post_id, position, source FROM feed_log ORDER BY position")
        if len(rows) == 2:
            break
        await asyncio.sleep(0.05)
    assert [(r["feed"], str(r["post_id"]), r["position"]) for r in rows] == [
        ("following", original, 0),
        ("following", original, 1),
    ]


async def test_a_celebritys_tagged_post_reaches_tag_followers_who_do_not_follow_it(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    async with make_api(settings.model_copy(update={"celebrity_follower_threshold": 1})) as api:
        star = await api.member("star")
        fans = [await api.member(f"fan{i}") for i in range(2)]
        for fan in fans:
            await api.follow(fan, "star")
        reader = await api.member("reader")
        await api.gql('mutation { followTag(tag: "trail") }', token=reader)
        await api.post(reader, "my own")
        tagged = await api.post(star, "up the hill #trail")
        await fan_out_all(api, pool, redis)
        data = (await api.gql(HOME, {"first": 10}, token=reader))["homeFeed"]
        assert data["source"] == "REDIS"
        assert tagged in [e["node"]["id"] for e in data["edges"]]


async def test_a_cluster_node_down_sends_the_reads_of_its_slots_only_to_postgres(
    settings: Settings, pool: asyncpg.Pool, redis_cluster: devstack.RedisClusterNodes
) -> None:
    settings = settings.model_copy(
        update={"redis_url": redis_cluster.url, "redis_cluster": True, "redis_breaker_cooldown_ms": 1000}
    )
    redis = create_redis(settings)
    await redis.flushall(target_nodes=RedisCluster.PRIMARIES)
    try:
        async with make_api(settings) as api:
            theo = await api.member("theo")
            tokens = {f"fan{i}": await api.member(f"fan{i}") for i in range(9)}
            for token in tokens.values():
                await api.follow(token, "theo")
            await api.post(theo, "hello")
            await fan_out_all(api, pool, redis)
            node_of = {}
            for name in tokens:
                member = await pool.fetchval("SELECT id FROM members WHERE username = $1", name)
                node_of[name] = redis.get_node_from_key(timelines.feed_key(member)).port
            down_port = node_of["fan0"]
            down_member = await pool.fetchval("SELECT id FROM members WHERE username = 'fan0'")
            down = next(i for i, n in enumerate(redis_cluster.nodes) if n.url.endswith(f":{down_port}/0"))
            up = [name for name, port in node_of.items() if port != down_port]
            assert up, "every fan's timeline landed on one node"

            async def sources() -> dict[str, str]:
                # The down node's members first: their failures in a row would open a breaker shared by all.
                order = sorted(tokens, key=lambda n: n in up)
                return {n: (await api.gql(HOME, token=tokens[n]))["homeFeed"]["source"] for n in order}

            assert set((await sources()).values()) == {"REDIS"}
            redis_cluster.nodes[down].kill()
            try:
                for _ in range(3):
                    served = await sources()
                    assert {n for n, s in served.items() if s == "POSTGRES"} == set(tokens) - set(up)
                    assert {served[n] for n in up} == {"REDIS"}
            finally:
                redis_cluster.restart(down)
            await breaker_allows(api, shard_of(redis, down_member))
            served = await sources()
            # Back without its data: its members have no timeline (Postgres, and a rebuild is asked for).
            assert {n for n, s in served.items() if s == "POSTGRES"} == set(tokens) - set(up)
            assert {served[n] for n in up} == {"REDIS"}
    finally:
        await redis.aclose()
