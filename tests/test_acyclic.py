"""A finished GraphQL operation is freed by reference counting: none of its state waits for the cyclic collector.

Before, one operation's executor, collected fields, context and request (about
300 objects a home-feed page) were cyclic garbage, and the collector's pauses
set the GraphQL p99 (feedfabric/schema/acyclic.py).
"""

import gc
from collections.abc import Iterator

import pytest
from feedfabric.context import Context
from feedfabric.schema.shared import SharedEventExecutor
from graphql import GraphQLResolveInfo

from tests.support import Api, feed_world
from tests.test_prefetched_completion import BENCH, SHAPES

OPERATION_STATE = (SharedEventExecutor, Context, GraphQLResolveInfo)


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


@pytest.mark.parametrize("query", [BENCH, SHAPES[1], SHAPES[2]])
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
