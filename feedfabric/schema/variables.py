"""Variables coerced before anything reads them: the guards see only values GraphQL accepts.

graphql-core coerces variables when execution starts, after the cost and
rate-limit guards have already run on the raw JSON values. A `first: $n`
with n = 2^63 was then costed (and the figure failed to encode), though an
Int outside 32 bits is invalid by the specification. Here the selected
operation's variables are coerced with graphql-core's public
`get_variable_values` against a schema built from the served SDL (the same
input types, enums and Int/Float ranges; custom scalars accept anything here
and are checked again by execution), so the operation is refused with
BAD_USER_INPUT first. Applied by feedfabric.schema.operation from `on_execute`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from graphql import GraphQLError, GraphQLSchema, build_schema, get_operation_ast, get_variable_values
from strawberry.types import ExecutionContext

MAX_ERRORS = 5


@lru_cache(maxsize=4)
def _input_schema(sdl: str) -> GraphQLSchema:
    return build_schema(sdl)


@lru_cache(maxsize=4)
def _sdl(schema: Any) -> str:
    return str(schema.as_str())


def variable_errors(execution_context: ExecutionContext, *, hide_suggestions: bool) -> list[GraphQLError]:
    """The coercion errors of the operation's variables; empty when they are all valid (or absent)."""
    ec = execution_context
    if ec.graphql_document is None:
        return []
    operation = get_operation_ast(ec.graphql_document, ec.operation_name)
    if operation is None or not operation.variable_definitions:
        return []
    schema = _input_schema(_sdl(ec.schema))
    coerced = get_variable_values(
        schema, operation.variable_definitions, ec.variables or {}, MAX_ERRORS, hide_suggestions
    )
    return coerced if isinstance(coerced, list) else []
