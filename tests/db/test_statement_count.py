"""A page costs a fixed number of SQL statements whatever its size, on every list of both APIs."""

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.app import schema
from feedfabric.core.auth import TokenCache
from feedfabric.core.settings import Settings
from feedfabric.db.pool import create_pool, transaction
from feedfabric.feeds import timelines
from feedfabric.feeds.viewer import resolve_viewer
from feedfabric.resolvers.context import build_context
from feedfabric.resources import Resources
from feedfabric.rest import routes
from starlette.requests import Request

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
    viewer = await resolve_viewer(pool, settings, TokenCache(), f"Bearer {token}")
    ctx = build_context(resources, viewer)
    before = counter.count
    result = await schema.execute(PAGE, variable_values={"first": first}, context_value=ctx)
    assert result.errors is None, result.errors
    assert result.data is not None
    return counter.count - before, len(result.data["homeFeed"]["edges"])


async def test_pages_of_5_and_40_posts_cost_the_same_statements(
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
    # 40, not 50: with every post field selected (mentions bounded at 50 a post), 50 posts cost over the cap.
    for first in (5, 40):  # warm the pool: new connections introspect their types once
        await statements_for_page(api.settings, pool, counter, maya, first)
    small, small_size = await statements_for_page(api.settings, pool, counter, maya, 5)
    large, large_size = await statements_for_page(api.settings, pool, counter, maya, 40)
    assert (small_size, large_size) == (5, 40)
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
        viewer = await resolve_viewer(pool, api.settings, TokenCache(), f"Bearer {hub}")
        ctx = build_context(Resources(settings=api.settings, pool=pool), viewer)
        before = counter.count
        result = await schema.execute(query, variable_values={"u": "hub", "first": first}, context_value=ctx)
        assert result.errors is None, result.errors
        return counter.count - before

    for query in LISTS:
        await statements(query, 10)  # warm the pool's connections
        assert await statements(query, 2) == await statements(query, 10)


ITEMS, SMALL, LARGE = 32, 3, 30
POST_FIELDS = """id content tags status createdAt likeCount commentCount viewerHasLiked
  author { username followerCount viewerFollows isFavourite } mentions { username } media { id url }
  repostOf { id author { username } tags }"""
COMMENT_FIELDS = "id content createdAt author { username } post { id content author { username } }"

# Every list field of the GraphQL API: (name, query with $n as the page size, how to count its items).
GRAPHQL_LISTS: list[tuple[str, str, Callable[[Any], int]]] = [
    (
        "homeFeed",
        f"query($n: Int) {{ homeFeed(first: $n) {{ edges {{ node {{ {POST_FIELDS} }} }} }} }}",
        lambda d: len(d["homeFeed"]["edges"]),
    ),
    (
        "favouritesFeed",
        f"query($n: Int) {{ favouritesFeed(first: $n) {{ edges {{ node {{ {POST_FIELDS} }} }} }} }}",
        lambda d: len(d["favouritesFeed"]["edges"]),
    ),
    (
        "tagFeed",
        f'query($n: Int) {{ tagFeed(tag: "big", first: $n) {{ edges {{ node {{ {POST_FIELDS} }} }} }} }}',
        lambda d: len(d["tagFeed"]["edges"]),
    ),
    (
        "mentionsFeed",
        "query($n: Int) { mentionsFeed(first: $n) { edges { node { __typename "
        f"... on Post {{ {POST_FIELDS} }} ... on Comment {{ {COMMENT_FIELDS} }} }} }} }} }}",
        lambda d: len(d["mentionsFeed"]["edges"]),
    ),
    (
        "Member.posts",
        f'query($n: Int) {{ member(username: "maya") {{ posts(first: $n) {{ edges {{ node {{ {POST_FIELDS} }} }} }} }} }}',
        lambda d: len(d["member"]["posts"]["edges"]),
    ),
    (
        "Post.comments",
        f"query($n: Int, $p: ID!) {{ post(id: $p) {{ comments(first: $n) {{ edges {{ node {{ {COMMENT_FIELDS} }} }} }} }} }}",
        lambda d: len(d["post"]["comments"]["edges"]),
    ),
    (
        "notifications",
        "query($n: Int) { notifications(first: $n) { unreadCount edges { node { id kind read actor { username } "
        "post { id content } comment { id content } } } } }",
        lambda d: len(d["notifications"]["edges"]),
    ),
    (
        "Playlist.items",
        "query($n: Int) { viewer { likedPlaylist { items(first: $n) { edges { node { post { "
        f"{POST_FIELDS} }} }} }} }} }} }} }}",
        lambda d: len(d["viewer"]["likedPlaylist"]["items"]["edges"]),
    ),
]

# Every list route of the REST API: (handler, path parameters, the key of its items).
REST_LISTS: list[tuple[str, Callable[..., Awaitable[Any]], dict[str, str], str]] = [
    ("/userfeed/home", routes.home, {}, "posts"),
    ("/userfeed/favourites", routes.favourites_feed, {}, "posts"),
    ("/userfeed/tags/{tag}/posts", routes.tag_feed, {"tag": "big"}, "posts"),
    ("/userfeed/mentions", routes.mentions, {}, "posts"),
    ("/userfeed", routes.own_posts, {}, "posts"),
]


@pytest.fixture
async def busy_world(api: Api) -> tuple[str, str]:
    """maya follows and favourites five authors whose 32 posts (a quarter reposted) mention her and carry
    #big; she comments on one of them 32 times (mentioning herself), likes 32 posts and posts 32 of her own."""
    maya = await api.member("maya")
    authors = [await api.member(f"author{i}") for i in range(5)]
    for i in range(5):
        await api.follow(maya, f"author{i}")
        await api.gql(f'mutation {{ addFavourite(externalUserId: "author{i}") {{ id }} }}', token=maya)
    first_post = ""
    for i in range(ITEMS):
        post_id = await api.post(authors[i % 5], f"post {i} #big @maya")
        first_post = first_post or post_id
        await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": post_id}, token=maya)
        if i % 4 == 0:
            await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": post_id}, token=authors[(i + 1) % 5])
        await api.gql(
            "mutation($p: ID!, $c: String!) { addComment(postId: $p, content: $c) { id } }",
            {"p": first_post, "c": f"comment {i} @maya"},
            token=maya,
        )
        await api.post(maya, f"my own {i}")
    return maya, first_post


async def _graphql_statements(
    settings: Settings, pool: asyncpg.Pool, counter: Counter, token: str, query: str, variables: dict[str, Any]
) -> tuple[int, Any]:
    viewer = await resolve_viewer(pool, settings, TokenCache(), f"Bearer {token}")
    ctx = build_context(Resources(settings=settings, pool=pool), viewer)
    before = counter.count
    result = await schema.execute(query, variable_values=variables, context_value=ctx)
    assert result.errors is None, result.errors
    return counter.count - before, result.data


async def _rest_statements(
    settings: Settings, pool: asyncpg.Pool, counter: Counter, token: str, handler: Any, params: dict[str, str], n: int
) -> tuple[int, Any]:
    viewer = await resolve_viewer(pool, settings, TokenCache(), f"Bearer {token}")
    ctx = build_context(Resources(settings=settings, pool=pool), viewer)
    request = Request(
        {"type": "http", "method": "GET", "query_string": f"limit={n}".encode(), "path_params": params, "headers": []}
    )
    before = counter.count
    body = await handler(ctx, request)
    return counter.count - before, body


async def test_every_graphql_list_costs_the_same_statements_for_3_and_30_items(
    api: Api, counted_pool: tuple[asyncpg.Pool, Counter], busy_world: tuple[str, str]
) -> None:
    pool, counter = counted_pool
    maya, first_post = busy_world
    for name, query, count in GRAPHQL_LISTS:
        found = []
        for n in (SMALL, LARGE, SMALL, LARGE):  # the first two warm the pool: new connections introspect types
            variables = {"n": n, "p": first_post}
            found.append(await _graphql_statements(api.settings, pool, counter, maya, query, variables))
        (small, small_data), (large, large_data) = found[2], found[3]
        if name != "notifications":  # made by the notifications worker, not running here
            assert (count(small_data), count(large_data)) == (SMALL, LARGE), name
        assert small == large, f"{name}: {small} statements for {SMALL} items, {large} for {LARGE}"


async def test_every_rest_list_route_costs_the_same_statements_for_3_and_30_items(
    api: Api, counted_pool: tuple[asyncpg.Pool, Counter], busy_world: tuple[str, str]
) -> None:
    pool, counter = counted_pool
    maya, _ = busy_world
    for path, handler, params, key in REST_LISTS:
        found = [
            await _rest_statements(api.settings, pool, counter, maya, handler, params, n)
            for n in (SMALL, LARGE, SMALL, LARGE)
        ]
        (small, small_body), (large, large_body) = found[2], found[3]
        assert (len(small_body[key]), len(large_body[key])) == (SMALL, LARGE), path
        assert small == large, f"{path}: {small} statements for {SMALL} items, {large} for {LARGE}"


async def test_the_favourites_list_costs_the_same_statements_for_1_and_5_members(
    api: Api, counted_pool: tuple[asyncpg.Pool, Counter]
) -> None:
    """GET /favourites and Query.favourites have no page size: the list is at most 30 members."""
    pool, counter = counted_pool
    maya = await api.member("maya")
    counts = []
    for i in range(5):
        await api.member(f"fav{i}")
        await api.gql(f'mutation {{ addFavourite(externalUserId: "fav{i}") {{ id }} }}', token=maya)
        if i in (0, 4):
            query = "{ favourites { username followerCount viewerFollows isFavourite } }"
            for _ in range(2):  # the first warms the pool
                graphql, data = await _graphql_statements(api.settings, pool, counter, maya, query, {})
                rest, body = await _rest_statements(api.settings, pool, counter, maya, routes.favourites, {}, 20)
            assert len(data["favourites"]) == len(body["favourites"]) == i + 1
            counts.append((graphql, rest))
    assert counts[0] == counts[1]


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
