"""A page costs a fixed number of SQL statements whatever its size (DataLoaders batch every field)."""

from collections.abc import AsyncIterator

import asyncpg
import pytest
from feedfabric.context import Resources, build_context
from feedfabric.db.pool import create_pool
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
    settings: Settings, pool: asyncpg.Pool, counter: Counter, token: str, first: int
) -> tuple[int, int]:
    resources = Resources(settings=settings, pool=pool)
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


LIST = """query($u: String!, $first: Int) { member(username: $u) { FIELD(first: $first) {
  edges { cursor node { NODE } } pageInfo { hasNextPage endCursor } } } }"""
MEMBER_NODE = "username followerCount viewerFollows"
LISTS = [
    LIST.replace("FIELD", "followers").replace("NODE", MEMBER_NODE),
    LIST.replace("FIELD", "following").replace("NODE", MEMBER_NODE),
    LIST.replace("FIELD", "playlists").replace("NODE", "name owner { username } followerCount viewerFollows"),
]


async def test_list_pages_cost_the_same_statements_whatever_their_size(
    api: Api,
    counted_pool: tuple[asyncpg.Pool, Counter],
) -> None:
    pool, counter = counted_pool
    hub = await api.member("hub")
    for i in range(12):
        token = await api.member(f"peer{i}")
        await api.follow(token, "hub")
        await api.follow(hub, f"peer{i}")
        await api.gql("mutation($n: String!) { createPlaylist(name: $n) { id } }", {"n": f"p{i}"}, token=hub)

    async def statements(query: str, first: int) -> int:
        viewer = await resolve_viewer(pool, api.settings, f"Bearer {hub}")
        ctx = build_context(Resources(settings=api.settings, pool=pool), viewer)
        before = counter.count
        result = await schema.execute(query, variable_values={"u": "hub", "first": first}, context_value=ctx)
        assert result.errors is None, result.errors
        return counter.count - before

    for query in LISTS:
        await statements(query, 10)  # warm the pool's connections
        assert await statements(query, 2) == await statements(query, 10)
