"""GraphQL operations as spans: Strawberry's OpenTelemetry extension, with the operation's name, type and cost.

Only root fields get a span of their own: a span per resolved field would cost
more than the operation it measures (a home page resolves hundreds), and what
an operator asks of a trace is which operation ran, at what cost, and what it
waited on (the asyncpg and Redis client spans under it). The name, type and
cost go on the root field's span, where they are known.
"""

from __future__ import annotations

from collections.abc import Callable
from inspect import isawaitable
from typing import Any

from graphql import GraphQLResolveInfo
from opentelemetry import trace
from strawberry.extensions.tracing import OpenTelemetryExtension

from feedfabric.schema.cost import cached_cost
from feedfabric.schema.served import graphql_schema


class TracedOperation(OpenTelemetryExtension):
    async def resolve(
        self, _next: Callable[..., Any], root: Any, info: GraphQLResolveInfo, *args: str, **kwargs: Any
    ) -> Any:
        if info.path.prev is not None:
            result = _next(root, info, *args, **kwargs)
            return await result if isawaitable(result) else result

        def annotated(root: Any, info: GraphQLResolveInfo, *args: str, **kwargs: Any) -> Any:
            self._annotate(trace.get_current_span())
            return _next(root, info, *args, **kwargs)

        return await super().resolve(annotated, root, info, *args, **kwargs)

    def _annotate(self, span: trace.Span) -> None:
        if not span.is_recording():
            return
        ec = self.execution_context
        span.set_attribute("graphql.operation.name", ec.operation_name or "")
        span.set_attribute("graphql.operation.type", ec.operation_type.value)
        if ec.graphql_document is not None:
            cost = cached_cost(graphql_schema(ec.schema), ec.graphql_document, ec.operation_name, ec.variables)
            span.set_attribute("feedfabric.graphql.cost", cost)
        if ec.operation_type.value == "mutation":
            span.set_attribute("feedfabric.step", "mutation")
