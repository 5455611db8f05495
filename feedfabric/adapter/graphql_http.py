"""GraphQL over HTTP as the GraphQL-over-HTTP specification has it, on Strawberry's ASGI view.

Strawberry answers a request it cannot run (unparseable or non-object body,
unknown operation, a mutation over GET, a batch, another method) with a plain
text body; a client expecting JSON then fails on the first byte. Here every
such answer is `{"errors": [{"message", "extensions": {"code"}}]}`, and:

- a mutation over GET is 405 with `Allow: POST`; another method is 405 with
  `Allow: GET, POST`;
- a client accepting `application/graphql-response+json` gets that media type,
  and 4xx for a request that fails before execution (parse and validation
  errors, a refusal by a guard: 400, or 429 for the rate limit), where the
  legacy `application/json` keeps 200;
- batches are not served (one operation per request; docs/operations.md).

A persisted query's hash is resolved to its text here too, before Strawberry
parses anything (feedfabric.schema.persisted). Only the view's public methods
are overridden (`__call__`, `should_render_graphql_ide`, `parse_json`, `parse_query_params`,
`parse_multipart`, `execute_operation`, `execute_single`, `process_result`, `render_graphql_ide`); the mixin goes
before `strawberry.asgi.GraphQL` in the app's view class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cross_web import HTTPException
from graphql import DocumentNode, GraphQLError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, Response
from starlette.types import Receive, Scope, Send
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.schema.exceptions import InvalidOperationTypeError
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from feedfabric.core import jsonwire
from feedfabric.core.errors import FeedFabricError, RequestTooLarge
from feedfabric.schema import persisted
from feedfabric.schema.documents import UNNAMED_OF_SEVERAL, parse_document, several_operations, too_long
from feedfabric.schema.ratelimit import spend_refused_document

GRAPHQL_PATH = "/graphql"
GRAPHQL_RESPONSE_JSON = "application/graphql-response+json"
_REQUEST_ERROR_STATUS = "graphql_request_error_status"
GRAPHIQL_HTML = Path(__file__).resolve().parents[1] / "static" / "graphiql.html"
_CODE_BY_STATUS = {404: "NOT_FOUND", 405: "BAD_USER_INPUT", 429: "RATE_LIMITED"}


class RequestRefused(HTTPException):
    """An HTTP-level refusal with headers of its own (405's `Allow`)."""

    def __init__(
        self, status_code: int, reason: str, headers: dict[str, str] | None = None, *, code: str | None = None
    ) -> None:
        super().__init__(status_code, reason)
        self.headers = headers or {}
        self.code = code


def wants_graphql_response(request: Request) -> bool:
    return GRAPHQL_RESPONSE_JSON in request.headers.get("accept", "")


def error_response(
    request: Request, status: int, message: str, headers: dict[str, str] | None = None, code: str | None = None
) -> Response:
    code = code or _CODE_BY_STATUS.get(status, "BAD_USER_INPUT")
    body = {"errors": [{"message": message, "extensions": {"code": code}}]}
    media_type = GRAPHQL_RESPONSE_JSON if wants_graphql_response(request) else "application/json"
    return Response(jsonwire.dumps_text(body), status_code=status, headers=headers, media_type=media_type)


def _is_request_error(result: ExecutionResult) -> bool:
    """No execution happened: no data, and no error belongs to a field (parse, validation, guards)."""
    return result.data is None and bool(result.errors) and all(not e.path for e in result.errors or ())


class GraphQLOverHTTP:
    """Mixin for strawberry.asgi.GraphQL (see the module docstring)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)  # type: ignore[misc]
            return
        request = Request(scope, receive)
        if request.method not in ("GET", "POST"):
            response = error_response(request, 405, "GraphQL is served over GET and POST.", {"Allow": "GET, POST"})
        else:
            try:
                response = await self.run(request)  # type: ignore[attr-defined]
            except RequestRefused as refused:
                response = error_response(request, refused.status_code, refused.reason, refused.headers, refused.code)
            except HTTPException as error:
                response = error_response(request, error.status_code, error.reason)
            except StarletteHTTPException as error:  # Starlette's multipart parser: a malformed body
                response = error_response(request, error.status_code, error.detail)
            except RequestTooLarge as error:
                response = error_response(request, error.status, error.message)
            except ClientDisconnect:
                return  # nobody to answer
            else:
                if wants_graphql_response(request) and response.media_type == "application/json":
                    response.headers["content-type"] = GRAPHQL_RESPONSE_JSON
                    status = getattr(request.state, _REQUEST_ERROR_STATUS, None)
                    if status is not None and response.status_code == 200:
                        response.status_code = status
        await response(scope, receive, send)

    def should_render_graphql_ide(self, request: Any) -> bool:
        """A GET with `extensions` but no `query` is an automatic persisted query (Apollo Client sends
        its hash so, with `Accept: */*`), not a browser asking for GraphiQL."""
        return super().should_render_graphql_ide(request) and request.query_params.get("extensions") is None  # type: ignore[misc]

    def parse_json(self, data: str | bytes) -> Any:
        """The body (and a GET's `variables` and `extensions`) must be a JSON object: `null`, `123` or
        `"text"` are refused here, before Strawberry reads fields from them. JSON nested past what the
        parser's recursion allows (about a thousand levels) is a malformed body too, not a crash."""
        try:
            parsed = super().parse_json(data)  # type: ignore[misc]
        except RecursionError:
            raise HTTPException(400, "The JSON body is nested too deeply.") from None
        if not isinstance(parsed, dict | list):
            raise HTTPException(400, "Expected a JSON object.")
        return parsed

    def parse_query_params(self, params: Any) -> dict[str, Any]:
        """A GET's `variables=null` or `extensions=null` is the parameter left out, as GraphQL over HTTP
        says of `null` for any optional parameter (a POST body's `null`s already are)."""
        given = {key: value for key, value in dict(params).items() if not _json_null(key, value)}
        return super().parse_query_params(given)  # type: ignore[misc]

    async def parse_multipart(self, request: Any) -> dict[str, str]:
        """A `map` that does not fit the operations (`[1]`, `{"0": 5}`, a path through a null) makes
        Strawberry's file placement fail on a type it did not expect: that is the client's malformed
        request, a 400 like Strawberry's own for a missing file, not a crash."""
        try:
            return await super().parse_multipart(request)  # type: ignore[misc]
        except (AttributeError, TypeError, IndexError, ValueError) as error:
            raise HTTPException(400, "The multipart map does not fit the operations.") from error

    async def execute_operation(  # noqa: PLR0917
        self,
        request: Request,
        request_adapter: Any,
        request_data: GraphQLRequestData | list[GraphQLRequestData],
        context: Any,
        root_value: Any,
        sub_response: Any,
    ) -> Any:
        """A persisted query's hash becomes its stored text here, before Strawberry parses anything
        (feedfabric.schema.persisted), and a document too long to parse is refused; and the context notes whether the request named its operation
        (feedfabric.schema.operation refuses an unnamed one among several). A document of several
        operations that names none is a 400 whatever the Accept, as an unknown operationName is: none of
        them can run (the spec's GetOperation), anonymous ones included (graphql-core would answer
        those with one validation error per operation)."""
        if isinstance(request_data, GraphQLRequestData) and hasattr(context, "resources"):
            context.operation_unnamed = request_data.operation_name is None
            try:
                request_data = await persisted.resolve_request(context, request_data)
            except FeedFabricError as error:
                raise RequestRefused(error.status, error.message, code=error.code) from None
            if isinstance(request_data.query, str) and (refusal := too_long(request_data.query)) is not None:
                raise RequestRefused(400, refusal.message, code="BAD_USER_INPUT")
            if context.operation_unnamed and (several := _several_operations(request_data.query)) is not None:
                # Refused as any refused document is: its parse spends from the rate limit.
                allowance = await spend_refused_document(context, request_data.query, several)
                if allowance is not None and allowance.refusal is not None:
                    retry = {"Retry-After": str(allowance.reset_seconds)}
                    raise RequestRefused(429, allowance.refusal.message, retry, code=allowance.refusal.code)
                raise RequestRefused(400, UNNAMED_OF_SEVERAL, code="BAD_USER_INPUT")
        return await super().execute_operation(  # type: ignore[misc]
            request, request_adapter, request_data, context, root_value, sub_response
        )

    async def execute_single(self, *args: Any, **kwargs: Any) -> ExecutionResult:
        try:
            return await super().execute_single(*args, **kwargs)  # type: ignore[misc]  # a mixin: the view class follows it
        except HTTPException as error:
            cause = error.__cause__
            if isinstance(cause, InvalidOperationTypeError) and cause.operation_type is OperationType.MUTATION:
                raise RequestRefused(405, "Mutations are sent with POST.", {"Allow": "POST"}) from error
            raise

    async def process_result(self, request: Request, result: ExecutionResult) -> GraphQLHTTPResponse:
        """Parse and validation errors end before the error coding (feedfabric.schema.operation) sees
        them: code them here, and note a request that never executed (its status under
        application/graphql-response+json)."""
        response = await super().process_result(request, result)  # type: ignore[misc]
        for error in response.get("errors") or []:
            extensions = error.setdefault("extensions", {})
            extensions.setdefault("code", "BAD_USER_INPUT")
        if _is_request_error(result):
            codes = {(e.get("extensions") or {}).get("code") for e in response.get("errors") or []}
            setattr(request.state, _REQUEST_ERROR_STATUS, 429 if codes == {"RATE_LIMITED"} else 400)
            if wants_graphql_response(request):
                response.pop("data", None)  # the spec's request error: no `data` entry at all
        return response

    async def render_graphql_ide(self, request: Request) -> Response:
        """GraphiQL from the package's own copies of its scripts (feedfabric.ops.vendor), never a CDN."""
        return HTMLResponse(GRAPHIQL_HTML.read_text(encoding="utf-8"))


def _several_operations(query: object) -> DocumentNode | None:
    """The document when the text parses (through the shared cache) into more than one operation; a text
    that does not parse is left to Strawberry, which reports it."""
    if not isinstance(query, str):
        return None
    try:
        document = parse_document(query)
    except GraphQLError:
        return None
    return document if several_operations(document) else None


def _json_null(key: str, value: object) -> bool:
    return key in ("variables", "extensions") and isinstance(value, str) and value.strip() == "null"
