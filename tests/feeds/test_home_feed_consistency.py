"""The home feed as its reader sees it across reads: your own writes at once, and never a step backwards.

No worker runs in these tests: fan-out happens only where a test runs it, event by event, so the
pipeline's lag is whatever the test makes it.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import asyncpg
import redis.asyncio as aioredis
from feedfabric.core.settings import Settings
from feedfabric.db.pool import transaction
from feedfabric.feeds import timelines
from feedfabric.ops import devstack

from tests.support import HOME, Api, make_api


async def fan_out(api: Api, pool: asyncpg.Pool, redis: aioredis.Redis, post_ids: list[str]) -> None:
    """What worker-events does for these posts' PostCreated events, and only these."""
    for post_id in post_ids:
        async with transaction(pool) as conn:
            await timelines.fan_out(conn, redis, api.settings, uuid.UUID(post_id))


async def delete_leaving_timelines(pool: asyncpg.Pool, post_ids: list[str]) -> None:
    """Deleted with no worker running, so their entries stay in the timelines that hold them."""
    await pool.execute(
        "UPDATE posts SET status = 'deleted' WHERE id = ANY($1::uuid[])", [uuid.UUID(p) for p in post_ids]
    )


async def first_page(api: Api, token: str, first: int = 10) -> tuple[list[str], str]:
    data = (await api.gql(HOME, {"first": first}, token=token))["homeFeed"]
    return [e["node"]["id"] for e in data["edges"]], data["source"]


async def rest_page(api: Api, token: str) -> tuple[list[str], list[str], str]:
    body = (await api.rest("GET", "/userfeed/home", token=token)).json()
    return [p["id"] for p in body["posts"]], [p["content"] for p in body["posts"]], body["source"]


async def test_own_post_repost_and_edit_are_on_the_next_read_with_no_fan_out(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.follow(maya, "theo")
    theirs = await api.post(theo, "theo's")
    await fan_out(api, pool, redis, [theirs])  # maya has a timeline, served by Redis
    assert await first_page(api, maya) == ([theirs], "REDIS")

    mine = await api.post(maya, "draft")
    shared = (await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": theirs}, token=maya))["repost"]
    await api.gql('mutation($id: ID!) { updatePost(id: $id, content: "final") { id } }', {"id": mine}, token=maya)

    # Neither of maya's posts was fanned out, yet both are there, over GraphQL and REST, from Redis.
    assert await first_page(api, maya) == ([shared["id"], mine, theirs], "REDIS")
    ids, contents, source = await rest_page(api, maya)
    assert (ids, source) == ([shared["id"], mine, theirs], "redis")
    assert contents[1] == "final"
    # The Postgres path (the timeline lost) serves them as well.
    await redis.delete(timelines.feed_key(await _id(pool, "maya")))
    assert await first_page(api, maya) == ([shared["id"], mine, theirs], "POSTGRES")


async def test_a_half_fanned_out_timeline_never_drops_what_postgres_served_first(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    ana = await api.member("ana")
    await api.follow(maya, "theo")
    await api.follow(maya, "ana")
    older = [await api.post(ana, f"ana {i}") for i in range(25)]
    newer = [await api.post(theo, f"theo {i}") for i in range(3)]
    expected = [*reversed(newer), *reversed(older)][:5]

    # No timeline yet: Postgres serves the page, with all of theo's posts.
    assert await first_page(api, maya, 5) == (expected, "POSTGRES")
    # The worker, paused mid-way, has pushed ana's posts and one of theo's, out of order: the timeline holds
    # more than a page, and theo's other two posts are missing from it, one above and one below its newest.
    await fan_out(api, pool, redis, [*older, newer[1]])
    assert (await timelines.timeline_ids(redis, await _id(pool, "maya")))[0] == newer[1]
    assert await first_page(api, maya, 5) == (expected, "REDIS_POSTGRES")
    # Fan-out done: Redis alone serves the same page, and the owed mark is gone.
    await fan_out(api, pool, redis, [newer[0], newer[2]])
    assert await first_page(api, maya, 5) == (expected, "REDIS")
    assert await timelines.read_owed(redis, await _id(pool, "maya")) is None


async def test_a_short_timeline_with_its_newest_post_pushed_first_keeps_the_rest(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.follow(maya, "theo")
    posts = [await api.post(theo, f"theo {i}") for i in range(3)]
    assert await first_page(api, maya) == (list(reversed(posts)), "POSTGRES")
    await fan_out(api, pool, redis, [posts[2]])
    assert await first_page(api, maya) == (list(reversed(posts)), "REDIS_POSTGRES")
    await fan_out(api, pool, redis, [posts[0]])
    assert await first_page(api, maya) == (list(reversed(posts)), "REDIS_POSTGRES")


async def _id(pool: asyncpg.Pool, username: str) -> uuid.UUID:
    return await pool.fetchval("SELECT id FROM members WHERE username = $1", username)  # type: ignore[no-any-return]


async def test_own_unpushed_post_under_a_batch_of_gone_entries_is_still_on_the_page(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.follow(maya, "theo")
    older = [await api.post(theo, f"older {i}") for i in range(3)]
    await fan_out(api, pool, redis, older)
    mine = await api.post(maya, "mine, not yet pushed")
    gone = [await api.post(theo, f"gone {i}") for i in range(20)]
    await fan_out(api, pool, redis, gone)
    await delete_leaving_timelines(pool, gone)  # the first batch shows nothing
    assert await first_page(api, maya, 2) == ([mine, older[2]], "REDIS")


async def test_own_unpushed_post_below_the_batch_floor_is_on_the_page_when_gone_entries_push_the_page_lower(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.follow(maya, "theo")
    older = [await api.post(theo, f"older {i}") for i in range(3)]
    mine = await api.post(maya, "mine, not yet pushed")
    newer = [await api.post(theo, f"newer {i}") for i in range(2)]
    gone = [await api.post(theo, f"gone {i}") for i in range(2)]
    await fan_out(api, pool, redis, [*older, *newer, *gone])
    await delete_leaving_timelines(pool, gone)
    # The batch's 4th entry (a page of 3 reads 4) is newer[0], but two entries above it are gone, so the
    # page reaches below it, to where maya's own post belongs.
    assert await first_page(api, maya, 3) == ([newer[1], newer[0], mine], "REDIS")


async def test_an_instance_cut_off_from_redis_keeps_what_redis_pages_showed_and_owes_what_it_showed_more(
    api: Api, settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, tmp_path: Path
) -> None:
    """Two API instances on one database, the second cut off from Redis (docs/reliability.md, cases 1 and 4)."""
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.follow(maya, "theo")
    older = await api.post(theo, "older")
    reached = await api.post(theo, "reached")
    # Fan-out has reached maya's timeline, and is not finished (as when it is retried against a node cut off).
    await fan_out(api, pool, redis, [older, reached])
    assert await first_page(api, maya) == ([reached, older], "REDIS")

    lost = devstack.start_redis(tmp_path)
    cut_settings = settings.model_copy(update={"redis_url": lost.url, "redis_breaker_cooldown_ms": 60_000})
    async with make_api(cut_settings) as cut:
        lost.stop()
        unpushed = await api.post(theo, "not fanned out")
        # Redis failing, then the breaker open: Postgres serves every page, leaving out nothing Redis showed.
        for _ in range(4):
            assert await first_page(cut, maya) == ([unpushed, reached, older], "POSTGRES")
        maya_id = await _id(pool, "maya")
        assert str(await pool.fetchval("SELECT home_owed FROM members WHERE id = $1", maya_id)) == unpushed

    # Back on the instance that reaches Redis: the timeline lacks what the cut instance served, the page does not,
    # and the debt moves from Postgres into the Redis mark.
    for _ in range(2):
        assert await first_page(api, maya) == ([unpushed, reached, older], "REDIS_POSTGRES")
        assert await pool.fetchval("SELECT home_owed FROM members WHERE id = $1", maya_id) is None
        assert str(await timelines.read_owed(redis, maya_id)) == unpushed
    await fan_out(api, pool, redis, [unpushed])
    assert await first_page(api, maya) == ([unpushed, reached, older], "REDIS")
    assert await timelines.read_owed(redis, maya_id) is None
