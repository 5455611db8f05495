"""Execution state freed by reference counting as soon as an operation is done, not by the cyclic collector.

graphql-core's executor keeps `async_helpers`, built from its own bound
methods: executor -> helpers -> bound method -> executor. That one cycle made
each operation's whole execution state (the executor, its collected fields,
the context, the request; about 300 objects a home-feed page) cyclic garbage,
so the collector ran about every 50 pages and its pauses (10-50 ms at 120
pages/s) set the GraphQL p99. The helpers here reach the executor weakly; it
is alive whenever they are called, since they are only called while it runs.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Sequence
from typing import Any

from graphql.type.definition import GraphQLResolveInfoHelpers


def weak_async_helpers(executor: Any) -> GraphQLResolveInfoHelpers:
    track = weakref.WeakMethod(executor.track_async_work)
    gather = weakref.WeakMethod(executor.gather_async_work)

    def track_async_work(values: Sequence[Any]) -> None:
        _alive(track)(values)

    def gather_async_work(values: Sequence[Awaitable[Any]]) -> Awaitable[list[Any]]:
        return _alive(gather)(values)  # type: ignore[no-any-return]

    return GraphQLResolveInfoHelpers(gather=gather_async_work, track=track_async_work)


def _alive(method: weakref.WeakMethod) -> Any:  # type: ignore[type-arg]
    bound = method()
    if bound is None:
        raise RuntimeError("async work was started for a GraphQL operation that has already finished")
    return bound
