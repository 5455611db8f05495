"""GraphQL operations as spans: Strawberry's OpenTelemetry extension, with the operation's name, type and cost.

Strawberry's extension gives each operation a span. Its per-field spans are
switched off (its `resolve` hook is not used): a hook on every field wraps
every resolver of a page, hundreds, in a coroutine, and costs more than the
operation it measures; parsing and validation are cached (ParseCache,
ValidationCache), so their spans would time a dictionary lookup. Instead one
span covers execution, current while resolvers run (the outbox's traceparent
is taken from it, and the asyncpg and Redis spans hang under it), carrying
the operation's name, type and cost, and for a mutation the journey step.
"""

from __future__ import annotations

from collections.abc import Generator

from graphql import FieldNode, get_operation_ast
from opentelemetry import trace
from strawberry.extensions import SchemaExtension
from strawberry.extensions.tracing import OpenTelemetryExtension
from strawberry.types.execution import ExecutionContext

from feedfabric.schema.cost import cached_cost
from feedfabric.schema.served import graphql_schema


class TracedOperation(OpenTelemetryExtension):
    resolve = SchemaExtension.resolve  # type: ignore[assignment]

    def __init__(
        self,
        *,
        execution_context: ExecutionContext | None = None,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        super().__init__(execution_context=execution_context, tracer_provider=tracer_provider)
        self.tracer = trace.get_tracer("feedfabric.graphql", tracer_provider=tracer_provider)

    def on_parse(self) -> Generator[None, None, None]:
        yield

    def on_validate(self) -> Generator[None, None, None]:
        yield

    def on_execute(self) -> Generator[None, None, None]:
        ec = self.execution_context
        kind = ec.operation_type.value
        with self.tracer.start_as_current_span(f"GraphQL {kind} {ec.operation_name or ''}".rstrip()) as span:
            if span.is_recording():
                span.set_attribute("graphql.operation.name", ec.operation_name or "")
                span.set_attribute("graphql.operation.type", kind)
                if ec.graphql_document is not None:
                    operation = get_operation_ast(ec.graphql_document, ec.operation_name)
                    selections = operation.selection_set.selections if operation is not None else ()
                    fields = [f.name.value for f in selections if isinstance(f, FieldNode)]
                    span.set_attribute("graphql.operation.fields", ",".join(fields))
                    cost = cached_cost(graphql_schema(ec.schema), ec.graphql_document, ec.operation_name, ec.variables)
                    span.set_attribute("feedfabric.graphql.cost", cost)
                if kind == "mutation":
                    span.set_attribute("feedfabric.step", "mutation")
            yield
