"""A page costs a fixed number of SQL statements whatever its size (DataLoaders batch every field)."""

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.context import Resources, build_context
from feedfabric.db.pool import create_pool, transaction
from feedfabric.feeds import timelines
from feedfabric.feeds.viewer import resolve_viewer
from feedfabric.schema import schema
from feedfabric.settings import Settings

from tests.support import Api

PAGE = """query($first: Int) { homeFeed(first: $first) { edges { node {
  id content tags status createdAt likeCount commentCount viewerHasLiked
  author { username followerCount viewerFollows isFavourite }
  mentions { username } media { id url }
  repostOf { id author { username } tags }
} } source } }"""


class Counter:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, record: asyncpg.connection.LoggedQuery) -> None:
        # asyncpg's own type introspection runs once per connection, on whichever pooled connection first
        # meets a type: a property of the pool's warm-up, not of the page.
        if not any(mark in record.query for mark in _INTROSPECTION):
            self.count += 1


_INTROSPECTION = ("typeinfo_tree", "current_setting('jit')", "set_config('jit'")


@pytest.fixture
async def counted_pool(database_url: str) -> AsyncIterator[tuple[asyncpg.Pool, Counter]]:
    counter = Counter()

    async def attach(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(counter)

    # As the API configures it (lean_reset): the count is the page's own statements, no per-release resets.
    pool = await create_pool(database_url, min_size=1, max_size=10, on_connect=attach, lean_reset=True)
    yield pool, counter
    await pool.close()


async def statements_for_page(
    settings: Settings,
    pool: asyncpg.Pool,
    counter: Counter,
    token: str,
    first: int,
    redis: aioredis.Redis | None = None,
) -> tuple[int, int]:
    resources = Resources(settings=settings, pool=pool, redis=redis)
    viewer = await resolve_viewer(pool, settings, f"Bearer {token}")
    ctx = build_context(resources, viewer)
    before = counter.count
    result = await schema.execute(PAGE, variable_values={"first": first}, context_value=ctx)
    assert result.errors is None, result.errors
    assert result.data is not None
    return counter.count - before, len(result.data["homeFeed"]["edges"])


async def test_pages_of_5_and_50_posts_cost_the_same_statements(
    api: Api, counted_pool: tuple[asyncpg.Pool, Counter]
) -> None:
    pool, counter = counted_pool
    maya = await api.member("maya")
    authors = [await api.member(f"author{i}") for i in range(5)]
    for i in range(5):
        await api.follow(maya, f"author{i}")
    for i in range(60):
        post_id = await api.post(authors[i % 5], f"post {i} #tag{i % 3} @maya")
        if i % 4 == 0:
            await api.gql(
                "mutation($id: ID!) { repost(postId: $id) { id } }", {"id": post_id}, token=authors[(i + 1) % 5]
            )
    for first in (5, 50):  # warm the pool: new connections introspect their types once
        await statements_for_page(api.settings, pool, counter, maya, first)
    small, small_size = await statements_for_page(api.settings, pool, counter, maya, 5)
    large, large_size = await statements_for_page(api.settings, pool, counter, maya, 50)
    assert (small_size, large_size) == (5, 50)
    assert small == large


async def test_a_gap_fill_costs_one_statement_whatever_the_gap(
    api: Api, counted_pool: tuple[asyncpg.Pool, Counter], redis: aioredis.Redis
) -> None:
    pool, counter = counted_pool
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.follow(maya, "theo")
    pushed = [await api.post(theo, f"pushed {i} #t{i % 3}") for i in range(25)]
    for post_id in pushed:
        async with transaction(pool) as conn:
            await timelines.fan_out(conn, redis, api.settings, uuid.UUID(post_id))
    maya_id = await pool.fetchval("SELECT id FROM members WHERE username = 'maya'")
    unpushed = [await api.post(theo, f"not yet pushed {i}") for i in range(15)]

    async def page_owing(newest: str | None) -> int:
        """Statements of a first page after one that served posts up to `newest` the timeline lacks."""
        await redis.delete(timelines.owed_key(maya_id))
        if newest is not None:
            await timelines.raise_owed(redis, maya_id, uuid.UUID(newest))
        count, size = await statements_for_page(api.settings, pool, counter, maya, 20, redis)
        assert size == 20
        return count

    await page_owing(None)  # warm the pool
    no_gap, small_gap, large_gap = await page_owing(None), await page_owing(unpushed[1]), await page_owing(unpushed[-1])
    assert small_gap == large_gap == no_gap + 1
