"""Refusals made by middleware before any route runs, in the error shape of the API that was asked."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from feedfabric.adapter.graphql_http import GRAPHQL_PATH, error_response
from feedfabric.rest.responses import JSONResponse

__all__ = ["refusal"]


def refusal(
    scope: Scope, status: int, message: str, *, code: str, rest_code: str, headers: dict[str, str] | None = None
) -> Response:
    """GraphQL's `{"errors": [...]}` (coded `code`) on /graphql, REST's `{"error": {...}}` (coded
    `rest_code`) anywhere else: a client reads every answer of its API the same way."""
    if scope["path"] == GRAPHQL_PATH:
        return error_response(Request(scope), status, message, headers, code)
    body = {"error": {"code": rest_code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)
