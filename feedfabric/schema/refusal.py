"""Ending an operation early with one coded error, before any resolver runs.

Guards (cost, rate limit, persisted queries) refuse from `on_execute`. For a
query or mutation they put a finished result on the execution context, which
Strawberry then returns instead of executing, without logging the refusal as a
server error. A subscription has no such slot, so there the error is raised
and Strawberry turns it into the stream's one error result.
"""

from __future__ import annotations

from typing import Any

from graphql.error import GraphQLError
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.graphql import OperationType

from feedfabric.core.errors import FeedFabricError


def refuse(execution_context: ExecutionContext, error: FeedFabricError) -> None:
    graphql_error = GraphQLError(error.message, extensions={"code": error.code})
    try:
        operation_type = execution_context.operation_type
    except RuntimeError:
        operation_type = OperationType.QUERY
    if operation_type is OperationType.SUBSCRIPTION:
        raise graphql_error
    execution_context.result = ExecutionResult(data=None, errors=[graphql_error])


def refuse_before_execution(execution_context: ExecutionContext, errors: list[GraphQLError]) -> None:
    """Ends any operation, a subscription's included, with these errors as its one result: for
    requests that are wrong as sent (a subscription over HTTP, invalid variables). Marked as
    pre-execution errors, so no guard works on the refused operation (nor reports a cost for it)."""
    execution_context.pre_execution_errors = errors
    execution_context.result = ExecutionResult(data=None, errors=errors)


def app_context(execution_context: ExecutionContext) -> Any | None:
    """The FeedFabric Context when the schema runs inside the app; None elsewhere (plain schema tests)."""
    context = execution_context.context
    return context if hasattr(context, "resources") else None
