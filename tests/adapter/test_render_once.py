"""A post's shared part is completed once per version (feedfabric.adapter.execution.render_once); pages stay exact.

Every page served with the cache must equal, byte for byte in JSON (key order
included), the same document executed without it, for random viewers after
random edits, likes, comments, reposts, renames, deletions, holds and
unfollows (visibility changes).
"""

import inspect
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import orjson
import pytest
from feedfabric.adapter.execution import PostRenders
from feedfabric.app import schema
from feedfabric.core.settings import Settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.support import Api, make_api

NAMES = ("ann", "bob", "cat", "dan")
HOME = """query Home($first: Int) { homeFeed(first: $first) { source pageInfo { hasNextPage endCursor }
  edges { cursor node { id content status createdAt updatedAt tags likeCount commentCount viewerHasLiked
    author { id username displayName avatarUrl status } media { id contentType width height url score status }
    repostOf { id content likeCount author { username displayName } } } } } }"""
DOCUMENTS = (
    HOME,
    # Aliases, __typename, fragments, a variable's @include, fields split between shared and per viewer.
    """query($yes: Boolean!) { homeFeed(first: 10) { edges { node { __typename ...P
      a: id b: content @include(if: $yes) c: tags @skip(if: $yes) author { __typename u: username }
      author { displayName followerCount } ... on Post { likeCount repostOf { ...P author { id } } } } } } }
      fragment P on Post { id status viewerHasLiked commentCount }""",
    # A post through a single-post field, and mentions (read per request: asynchronous).
    """{ homeFeed(first: 5) { edges { node { id mentions { username } content author { username }
      d1: likeCount d2: likeCount } } } }""",
)
ACTIONS = ("like", "unlike", "edit", "rename", "comment", "repost", "delete", "hold", "release", "unfollow", "follow")


@dataclass
class World:
    tokens: dict[str, str] = field(default_factory=dict)
    admin: str = ""
    posts: list[tuple[str, str]] = field(default_factory=list)  # (post id, author)
    edits: int = 0


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    """The app with a rate limit no example reaches (the examples make hundreds of requests)."""
    async with make_api(settings.model_copy(update={"rate_limit_operations": 10**6, "rate_limit_cost": 10**12})) as a:
        yield a


@pytest.fixture
def renders() -> Iterator[PostRenders]:
    found = schema.execution_context_class.renders  # type: ignore[attr-defined]
    assert isinstance(found, PostRenders)
    found.clear()
    yield found
    found.clear()


async def build_world(api: Api) -> World:
    world = World(admin=await api.member("mod", admin=True))
    for name in NAMES:
        world.tokens[name] = await api.member(name)
    for name in NAMES:
        for other in NAMES:
            if other != name:
                await api.follow(world.tokens[name], other)
        for i in range(2):
            world.posts.append((await api.post(world.tokens[name], f"{name} says {i} #t{i} @{NAMES[i]}"), name))
    return world


async def act(api: Api, world: World, action: str, who: str, pick: int) -> None:
    """One change; a refused one (liking a deleted post, say) changes nothing and is fine."""
    token = world.tokens[who]
    post_id, author = world.posts[pick % len(world.posts)]
    gql, variables = {
        "like": ("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": post_id}),
        "unlike": ("mutation($p: ID!) { unlikePost(postId: $p) { id } }", {"p": post_id}),
        "comment": ('mutation($p: ID!) { addComment(postId: $p, content: "hi") { id } }', {"p": post_id}),
        "repost": ("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": post_id}),
        "edit": ("mutation($p: ID!, $c: String!) { updatePost(id: $p, content: $c) { id } }", {"p": post_id}),
        "delete": ("mutation($p: ID!) { deletePost(id: $p) }", {"p": post_id}),
        "hold": ("mutation($p: ID!) { holdPost(id: $p) { id } }", {"p": post_id}),
        "release": ("mutation($p: ID!) { releasePost(id: $p) { id } }", {"p": post_id}),
        "rename": (
            "mutation($u: String!, $d: String!) { upsertProfile(username: $u, displayName: $d) { id } }",
            {"u": who, "d": f"{who.title()} {world.edits}"},
        ),
        "unfollow": ("mutation($e: String!) { unfollow(externalUserId: $e) { id } }", {"e": author}),
        "follow": ("mutation($e: String!) { follow(externalUserId: $e) { id } }", {"e": author}),
    }[action]
    world.edits += 1
    if action == "edit":
        variables["c"] = f"edited {world.edits} #e{world.edits % 3}"
        token = world.tokens[author]
    elif action == "delete":
        token = world.tokens[author]
    elif action in ("hold", "release"):
        token = world.admin
    body = await api.raw(gql, variables, token=token)
    if action == "repost" and body.get("data"):
        world.posts.append((str(body["data"]["repost"]["id"]), who))


async def page(api: Api, document: str, token: str, renders: PostRenders, *, cached: bool) -> bytes:
    holder = schema.execution_context_class  # type: ignore[attr-defined]
    if not cached:
        holder.renders = None
    try:
        body = await api.raw(document, {"first": 20, "yes": True}, token=token)
    finally:
        holder.renders = renders
    assert not body.get("errors"), body
    return orjson.dumps(body["data"])  # extensions (rate limit, cost) change from one request to the next


async def same_page(api: Api, document: str, token: str, renders: PostRenders) -> None:
    """Cached and uncached answers agree. Background work (fan-out) may land between two reads, so a
    difference is read again; a stale cache entry would differ every time."""
    for _ in range(3):
        with_cache = await page(api, document, token, renders, cached=True)
        without = await page(api, document, token, renders, cached=False)
        if with_cache == without:
            return
    assert orjson.loads(with_cache) == orjson.loads(without)  # values first: the clearer report
    assert with_cache == without  # key order too


steps = st.lists(
    st.tuples(st.sampled_from(ACTIONS), st.sampled_from(NAMES), st.integers(0, 50)), min_size=1, max_size=4
)
Example = tuple[list[tuple[str, str, int]], str, str]


def examples(count: int) -> list[Example]:
    """Hypothesis draws the examples (changes, a viewer, a document); the app's event loop then runs them in
    order, each against the state the previous ones left."""
    drawn: list[Example] = []

    @given(changes=steps, viewer=st.sampled_from(NAMES), document=st.sampled_from(DOCUMENTS))
    @hypothesis_settings(max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def draw(changes: list[tuple[str, str, int]], viewer: str, document: str) -> None:
        drawn.append((changes, viewer, document))

    draw()
    return drawn


async def test_cached_pages_equal_uncached_execution(api: Api, renders: PostRenders) -> None:
    world = await build_world(api)
    for changes, viewer, document in examples(30):
        for action, who, pick in changes:
            await act(api, world, action, who, pick)
        for name in (viewer, *NAMES):  # the chosen viewer, then every viewer: entries are shared across them
            await same_page(api, document, world.tokens[name], renders)
    assert renders.hits > 0  # the cache was used, and across viewers


async def test_an_entry_is_reused_across_viewers_and_a_like_makes_a_new_version(api: Api, renders: PostRenders) -> None:
    world = await build_world(api)
    first = {"data": orjson.loads(await page(api, HOME, world.tokens["ann"], renders, cached=True))}
    kept, hits = len(renders.results), renders.hits
    await page(api, HOME, world.tokens["bob"], renders, cached=True)
    assert renders.hits > hits and kept > 0  # bob's page reused posts ann's page completed
    post_id = first["data"]["homeFeed"]["edges"][0]["node"]["id"]
    await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": post_id}, token=world.tokens["cat"])
    again = {"data": orjson.loads(await page(api, HOME, world.tokens["ann"], renders, cached=True))}
    node = next(e["node"] for e in again["data"]["homeFeed"]["edges"] if e["node"]["id"] == post_id)
    before = next(e["node"] for e in first["data"]["homeFeed"]["edges"] if e["node"]["id"] == post_id)
    assert node["likeCount"] == before["likeCount"] + 1  # no lag: the like is a new version


def test_the_executor_methods_render_once_overrides_keep_their_signatures() -> None:
    """render_once overrides or calls these executor methods (their pins: feedfabric.adapter.execution);
    a release that reshapes them must fail here rather than complete posts wrongly."""
    from graphql.execution.executor import Executor

    def names(method: object) -> list[str]:
        return list(inspect.signature(method).parameters)  # type: ignore[arg-type]

    assert names(Executor.complete_object_value) == [
        "self",
        "return_type",
        "field_details_list",
        "info",
        "path",
        "result",
        "position_context",
    ]
    assert names(Executor.execute_fields) == [
        "self",
        "parent_type",
        "source_value",
        "path",
        "grouped_field_set",
        "position_context",
    ]
    assert names(Executor.collect_subfields) == ["self", "return_type", "field_details_list"]
    assert "handle_field_error" in vars(Executor)
