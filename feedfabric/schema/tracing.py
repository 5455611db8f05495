"""GraphQL operations as spans: one span per executed operation, with its name, type, root fields and cost.

One span, on OpenTelemetry's public API, covers execution and is current
while the resolvers run: the outbox's traceparent is taken from it, and the
asyncpg and Redis client spans hang under it. Nothing else is a span here.
Strawberry's OpenTelemetryExtension is not used: it opens a second SERVER
span per operation (the request's server span is already one,
feedfabric.http.server_span) carrying the whole query text, a span each for
parsing and validation (both cached here, ParseCache and ValidationCache, so
they would time a dictionary lookup) and, through its `resolve` hook, one per
field, which wraps every resolver of a page, hundreds, in a coroutine and
costs more than the operation it measures.

A request its trace's sampler dropped costs one check: under a parent that
is not recording no span is made at all (its children would be dropped too,
and they then hang under the same unsampled parent).
"""

from __future__ import annotations

from collections.abc import Callable, Generator

from graphql import FieldNode, get_operation_ast
from opentelemetry import trace
from strawberry.extensions import SchemaExtension
from strawberry.types.execution import ExecutionContext

from feedfabric.schema.core_schema import graphql_schema
from feedfabric.schema.cost import cached_cost


class TracedOperation(SchemaExtension):
    def __init__(self, *, tracer: trace.Tracer, execution_context: ExecutionContext | None = None) -> None:
        self.tracer = tracer
        if execution_context is not None:
            self.execution_context = execution_context

    def on_execute(self) -> Generator[None, None, None]:
        parent = trace.get_current_span()
        if parent.get_span_context().is_valid and not parent.is_recording():
            yield  # an unsampled trace: nothing to record
            return
        ec = self.execution_context
        kind = ec.operation_type.value
        with self.tracer.start_as_current_span(f"GraphQL {kind} {ec.operation_name or ''}".rstrip()) as span:
            if span.is_recording():
                attributes: dict[str, str | int] = {
                    "graphql.operation.name": ec.operation_name or "",
                    "graphql.operation.type": kind,
                }
                if ec.graphql_document is not None:
                    operation = get_operation_ast(ec.graphql_document, ec.operation_name)
                    selections = operation.selection_set.selections if operation is not None else ()
                    attributes["graphql.operation.fields"] = ",".join(
                        f.name.value for f in selections if isinstance(f, FieldNode)
                    )
                    attributes["feedfabric.graphql.cost"] = cached_cost(
                        graphql_schema(ec.schema), ec.graphql_document, ec.operation_name, ec.variables
                    )
                if kind == "mutation":
                    attributes["feedfabric.step"] = "mutation"
                span.set_attributes(attributes)
            yield


def traced_operations(tracer_provider: trace.TracerProvider) -> Callable[[], TracedOperation]:
    """The extension factory the schema is built with: one tracer for every operation."""
    tracer = tracer_provider.get_tracer("feedfabric.graphql")
    return lambda: TracedOperation(tracer=tracer)
