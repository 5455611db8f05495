"""The one place FeedFabric touches a dependency's internals: graphql-core's executor helpers.

What it touches (graphql-core 3.3.2; pinned to that range in pyproject.toml,
and tests/adapter/test_acyclic.py fails loudly if any of these changes):

- `Executor.async_helpers`: the attribute graphql-core builds in
  `Executor.__init__` (graphql.execution.executor) and hands to every `GraphQLResolveInfo`;
- `Executor.track_async_work` and `Executor.gather_async_work`,
  the bound methods it is built from;
- `graphql.type.definition.GraphQLResolveInfoHelpers(gather=..., track=...)`.

Why: `async_helpers` holds bound methods of the executor, so executor ->
helpers -> bound method -> executor is a reference cycle, and each
operation's whole execution state (the executor, its collected fields, the
context, the request; about 300 objects a home-feed page) became cyclic
garbage. The collector then ran about every 50 pages and its pauses set the
GraphQL p99 (docs/benchmarks.md). The helpers here reach the executor weakly;
it is alive whenever they are called, since they are only called while it
runs. Upstream: graphql-core's time spent in the cyclic collector with async
resolvers, https://github.com/graphql-python/graphql-core/issues/190 (open).
Remove this module once graphql-core builds the helpers without the cycle.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Sequence
from typing import Any

from graphql.type.definition import GraphQLResolveInfoHelpers

# The internals above, by name, for tests/adapter/test_acyclic.py.
TOUCHES = ("Executor.async_helpers", "Executor.track_async_work", "Executor.gather_async_work")


def weak_async_helpers(executor: Any) -> GraphQLResolveInfoHelpers:
    track = weakref.WeakMethod(executor.track_async_work)
    gather = weakref.WeakMethod(executor.gather_async_work)

    def track_async_work(values: Sequence[Any]) -> None:
        _alive(track)(values)

    def gather_async_work(values: Sequence[Awaitable[Any]]) -> Awaitable[list[Any]]:
        return _alive(gather)(values)

    return GraphQLResolveInfoHelpers(gather=gather_async_work, track=track_async_work)


def _alive(method: weakref.WeakMethod) -> Any:
    bound = method()
    if bound is None:
        raise RuntimeError("async work was started for a GraphQL operation that has already finished")
    return bound
