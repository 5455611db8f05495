"""A finished GraphQL operation is freed by reference counting: none of its state waits for the cyclic collector.

Before, one operation's executor, collected fields, context and request (about
300 objects a home-feed page) were cyclic garbage, and the collector's pauses
set the GraphQL p99 (feedfabric/schema/acyclic.py).
"""

import gc
import inspect
from collections.abc import Iterator

import graphql
import pytest
from feedfabric.resolvers.context import Context
from feedfabric.schema import acyclic
from feedfabric.schema.shared import SharedRenderingExecutionContext
from graphql import GraphQLResolveInfo
from graphql.execution.executor import Executor
from graphql.type.definition import GraphQLResolveInfoHelpers

from tests.support import Api, feed_world

OPERATION_STATE = (SharedRenderingExecutionContext, Context, GraphQLResolveInfo)
BENCH = """query Home($first: Int) { homeFeed(first: $first) { source pageInfo { hasNextPage endCursor }
  edges { cursor node { id content status createdAt updatedAt tags likeCount commentCount viewerHasLiked
    author { id username displayName avatarUrl } media { id contentType width height url score status rejectReason }
    repostOf { id content author { username displayName avatarUrl } } } } } }"""
SHAPES = [
    BENCH,
    """query($yes: Boolean!) { homeFeed(first: 10) { edges { node { __typename ...P
      a: id b: content @include(if: $yes) c: tags @skip(if: $yes) author { __typename u: username }
      author { displayName } ... on Post { likeCount repostOf { ...P author { id } } } } } } }
      fragment P on Post { id status viewerHasLiked }""",
    """{ homeFeed(first: 10) { edges { node { id mentions { username } author { followerCount viewerFollows } } } } }""",
]


def test_the_graphql_core_internals_acyclic_relies_on_are_still_there() -> None:
    """acyclic.py replaces an executor attribute graphql-core does not document; a release that renames or
    reshapes it must fail here, not leak cycles silently (widen the pin only after this passes)."""
    assert graphql.__version__ == "3.3.2", (
        f"acyclic.py was written against graphql-core 3.3.2, not {graphql.__version__}"
    )
    assert acyclic.TOUCHES == ("Executor.async_helpers", "Executor.track_async_work", "Executor.gather_async_work")
    assert callable(Executor.track_async_work) and callable(Executor.gather_async_work)
    assert "async_helpers" in Executor.__init__.__code__.co_names  # still built, so still ours to replace
    assert list(inspect.signature(GraphQLResolveInfoHelpers).parameters) == ["gather", "track"]


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    """What the cyclic collector finds unreachable from here on (it keeps it in gc.garbage to be read)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def operation_state_left(garbage: list[object]) -> list[str]:
    gc.collect()
    return [type(o).__name__ for o in garbage if isinstance(o, OPERATION_STATE)]


@pytest.mark.parametrize("query", SHAPES)
async def test_a_feed_operation_leaves_no_cyclic_garbage(api: Api, saved_garbage: list[object], query: str) -> None:
    reader = await feed_world(api, "hello #news @reader")
    answer = await api.raw(query, {"first": 10, "yes": True}, token=reader)
    assert answer["data"] and not answer.get("errors")
    assert operation_state_left(saved_garbage) == []


async def test_a_mutation_leaves_no_cyclic_garbage(api: Api, saved_garbage: list[object]) -> None:
    reader = await feed_world(api, "hello")
    answer = await api.raw('mutation { createPost(input: {content: "again"}) { id } }', token=reader)
    assert answer["data"] and not answer.get("errors")
    assert operation_state_left(saved_garbage) == []
