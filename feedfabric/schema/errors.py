"""Every GraphQL error carries `extensions.code`; anything unexpected is masked and logged, never shown.

Applied to every result by feedfabric.schema.operation, after Strawberry's
`process_errors` (which FeedFabricSchema leaves silent: the unexpected is
logged here, once, with its traceback).
"""

from __future__ import annotations

import logging

from graphql.error import GraphQLError
from strawberry.exceptions import MissingQueryError
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError

from feedfabric.core.errors import FeedFabricError, ServiceUnavailable, store_unreachable

__all__ = ["code_errors"]

log = logging.getLogger("feedfabric.graphql")

MASKED_MESSAGE = "Internal server error."

# What Strawberry finds wrong with a request before it runs (an empty query, an operationName the document
# does not define). Over HTTP the endpoint answers these itself (feedfabric.adapter.graphql_http); over a WebSocket they
# reach the result as errors whose message is Strawberry's own description of the request.
_REQUEST_ERRORS = (MissingQueryError, CannotGetOperationTypeError, InvalidOperationTypeError)


def code_errors(errors: list[GraphQLError]) -> list[GraphQLError]:
    return [_coded(error) for error in errors]


def _coded(error: GraphQLError) -> GraphQLError:
    original = error.original_error
    if isinstance(original, FeedFabricError):
        return _with(error, original.message, original.code)
    if original is None:
        # Parse and validation errors describe the query, not the server.
        code = (error.extensions or {}).get("code") or "BAD_USER_INPUT"
        return _with(error, error.message, str(code))
    if isinstance(original, GraphQLError) and original.original_error is None:
        return _with(error, original.message, "BAD_USER_INPUT")
    if isinstance(original, _REQUEST_ERRORS):
        return _with(error, error.message, "BAD_USER_INPUT")
    if store_unreachable(original):
        log.warning("postgres unreachable in %s: %s", error.path, type(original).__name__)
        return _with(error, ServiceUnavailable.message_text, ServiceUnavailable.code)
    log.error("unexpected error in %s", error.path, exc_info=original)
    return _with(error, MASKED_MESSAGE, "INTERNAL_SERVER_ERROR")


def _with(error: GraphQLError, message: str, code: str) -> GraphQLError:
    """A new error object: the validation cache may hold the original."""
    return GraphQLError(
        message=message,
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        original_error=None,
        extensions={"code": code},
    )
