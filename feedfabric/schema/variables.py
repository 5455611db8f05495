"""Variables coerced before anything reads them: the guards see only values GraphQL accepts.

First every variable is bounded by what the schema declares
(feedfabric.schema.input_bounds: list lengths, object keys, nesting), so
nothing below walks an unbounded value.

graphql-core coerces variables when execution starts, after the cost and
rate-limit guards have already run on the raw JSON values. A `first: $n`
with n = 2^63 was then costed (and the figure failed to encode), though an
Int outside 32 bits is invalid by the specification. Here the selected
operation's variables are coerced with graphql-core's public
`get_variable_values` against a schema built from the served SDL (the same
input types, enums and Int/Float ranges; custom scalars accept anything here
and are checked again by execution), so the operation is refused with
BAD_USER_INPUT first. Applied by feedfabric.schema.operation from `on_execute`.

Full coercion costs about 45 us for a feed page's two variables, so an
operation whose variables are all of the built-in scalar types is first
checked by their rules in plain Python (an Int is a 32-bit int, a String a
str, ...). Only a value that fails that check, or a variable of an
input-object, enum, list or custom-scalar type, gets the full coercion (and
its exact error message).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from graphql import (
    GraphQLError,
    GraphQLSchema,
    NamedTypeNode,
    NonNullTypeNode,
    OperationDefinitionNode,
    build_schema,
    get_operation_ast,
    get_variable_values,
)
from strawberry.types import ExecutionContext

from feedfabric.schema.core_schema import graphql_schema
from feedfabric.schema.idmemo import IdMemo
from feedfabric.schema.input_bounds import bound_errors

__all__ = ["input_schema", "schema_sdl", "variable_errors"]

MAX_ERRORS = 5
NOT_AN_OBJECT = "The GraphQL operation's `variables` must be an object or null, if provided."


@lru_cache(maxsize=4)
def input_schema(sdl: str) -> GraphQLSchema:
    return build_schema(sdl)


@lru_cache(maxsize=4)
def schema_sdl(schema: Any) -> str:
    return str(schema.as_str())


_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def _is_int(value: Any) -> bool:
    return type(value) is int and _INT_MIN <= value <= _INT_MAX


def _is_float(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


_SCALAR_RULES: dict[str, Callable[[Any], bool]] = {
    "Int": _is_int,
    "Float": _is_float,
    "String": lambda value: type(value) is str,
    "Boolean": lambda value: type(value) is bool,
    "ID": lambda value: type(value) is str or type(value) is int,
}

# (name, rule, nullable, may be left out) per variable; None when some variable is not a built-in scalar.
_Plan = tuple[tuple[str, Callable[[Any], bool], bool, bool], ...] | None
_PLANS: IdMemo[_Plan] = IdMemo(1024)


def _plan(operation: OperationDefinitionNode) -> _Plan:
    checks = []
    for definition in operation.variable_definitions or ():
        type_node = definition.type
        nullable = not isinstance(type_node, NonNullTypeNode)
        if isinstance(type_node, NonNullTypeNode):
            type_node = type_node.type
        rule = _SCALAR_RULES.get(type_node.name.value) if isinstance(type_node, NamedTypeNode) else None
        if rule is None:
            return None
        checks.append(
            (definition.variable.name.value, rule, nullable, nullable or definition.default_value is not None)
        )
    return tuple(checks)


def _plainly_valid(operation: OperationDefinitionNode, variables: dict[str, Any]) -> bool:
    plan = _PLANS.get(id(operation), operation, lambda: _plan(operation))
    if plan is None:
        return False
    for name, rule, nullable, omissible in plan:
        if name not in variables:
            if not omissible:
                return False
            continue
        value = variables[name]
        if value is None:
            if not nullable:
                return False
        elif not rule(value):
            return False
    return True


def variable_errors(execution_context: ExecutionContext, *, hide_suggestions: bool) -> list[GraphQLError]:
    """The coercion errors of the operation's variables; empty when they are all valid (or absent).

    The HTTP endpoint (feedfabric.adapter.graphql_http) refuses variables that are not an object (NOT_AN_OBJECT is its message);
    the WebSocket handlers pass them on as sent, so they are refused here for every transport."""
    ec = execution_context
    if not isinstance(ec.variables, dict | None):
        return [GraphQLError(NOT_AN_OBJECT)]
    if ec.graphql_document is None:
        return []
    operation = get_operation_ast(ec.graphql_document, ec.operation_name)
    if operation is None:
        return []
    variables = ec.variables or {}
    if bounds := bound_errors(graphql_schema(ec.schema), ec.graphql_document, operation, variables):
        return bounds
    if not operation.variable_definitions:
        return []
    if _plainly_valid(operation, variables):
        return []
    schema = input_schema(schema_sdl(ec.schema))
    coerced = get_variable_values(schema, operation.variable_definitions, variables, MAX_ERRORS, hide_suggestions)
    return coerced if isinstance(coerced, list) else []
