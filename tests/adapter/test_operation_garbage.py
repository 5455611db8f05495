"""A finished GraphQL operation's reference cycle is harmless: it dies young and never wakes a full collection.

graphql-core's executor holds its resolve-info helpers (bound methods of the
executor), so each operation's state (the executor, its collected fields, the
context, the request) is a reference cycle, freed by the cyclic collector
rather than by reference counting. FeedFabric uses graphql-core's public API
only and leaves that cycle as it is. What matters for latency is the full
(generation 2) collection, whose pause grows with everything the process
holds (feedfabric.ops.gctune); an operation's state lives for one request, so
a young collection frees it and it never reaches the old generation. These
tests count it: a page leaves a bounded amount of cyclic garbage, collections
of the young generations free it all, and hundreds of pages under the API's
collector settings cause no full collection (bench/home_feed_gc.py measures
the pauses).
"""

import gc
from collections.abc import Iterator

import pytest
from feedfabric.adapter.execution.subscriptions import SharedRenderingExecutionContext
from feedfabric.ops.gctune import tune_for_serving
from feedfabric.resolvers.context import Context
from graphql import GraphQLResolveInfo

from tests.support import Api, feed_world

OPERATION_STATE = (SharedRenderingExecutionContext, Context, GraphQLResolveInfo)
BENCH = """query Home($first: Int) { homeFeed(first: $first) { source pageInfo { hasNextPage endCursor }
  edges { cursor node { id content status createdAt updatedAt tags likeCount commentCount viewerHasLiked
    author { id username displayName avatarUrl } media { id contentType width height url score status rejectReason }
    repostOf { id content author { username displayName avatarUrl } } } } } }"""
PAGES = 300


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
        gc.collect()


@pytest.fixture
def serving_collector() -> Iterator[None]:
    """The API's collector settings (feedfabric.ops.gctune) for one test, then the test process's own."""
    threshold = gc.get_threshold()
    tune_for_serving()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def operation_state(garbage: list[object]) -> list[object]:
    return [o for o in garbage if isinstance(o, OPERATION_STATE)]


async def test_a_page_leaves_one_bounded_cycle_of_operation_state(api: Api, saved_garbage: list[object]) -> None:
    reader = await feed_world(api, "hello #news @reader")
    forget(saved_garbage)
    answer = await api.raw(BENCH, {"first": 10}, token=reader)
    assert answer["data"] and not answer.get("errors")
    gc.collect()
    state = operation_state(saved_garbage)
    executors = [o for o in state if isinstance(o, SharedRenderingExecutionContext)]
    assert len(executors) == 1  # the cycle is there: the executor is freed by the collector
    assert len(saved_garbage) < 3_000  # all of it, bounded: one page's state, not a growing heap


async def test_pages_cycles_die_young_and_wake_no_full_collection(
    api: Api, serving_collector: None, saved_garbage: list[object]
) -> None:
    reader = await feed_world(api, "hello #news @reader")
    forget(saved_garbage)
    before = [s["collections"] for s in gc.get_stats()]
    for _ in range(PAGES):
        answer = await api.raw(BENCH, {"first": 10}, token=reader)
        assert answer["data"] and not answer.get("errors")
    after = [s["collections"] for s in gc.get_stats()]
    freed_young = sum(isinstance(o, SharedRenderingExecutionContext) for o in saved_garbage)
    assert after[0] > before[0] and freed_young > 0  # young collections ran and freed operations' cycles
    assert after[2] == before[2]  # no full collection
    gc.collect(1)  # what is left of the last pages, still young
    left = sum(isinstance(o, SharedRenderingExecutionContext) for o in saved_garbage) - freed_young
    assert freed_young + left == PAGES  # every page's executor was freed by a young collection
    young = len(operation_state(saved_garbage))
    gc.collect(2)  # what only a full collection finds: operation state that reached the old generation
    assert len(operation_state(saved_garbage)) == young


def forget(garbage: list[object]) -> None:
    """Frees what the collector saved so far (saved objects are still cycles: collected once more, unsaved)."""
    gc.set_debug(0)
    garbage.clear()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
