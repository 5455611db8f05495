"""GraphQL over HTTP as the GraphQL-over-HTTP specification has it: a Starlette endpoint on the schema's `execute`.

The HTTP layer is ours, not a subclass of Strawberry's view: what the contract
asks of it (docs/api.md, "GraphQL over HTTP") sits between
the request and the schema at points the view's documented hooks do not
reach, so the endpoint reads the request with Starlette's public API and calls
Strawberry's public `Schema.execute`. Every answer that is not an execution
result is `{"errors": [{"message", "extensions": {"code"}}]}`, and:

- GET runs queries, POST runs queries and mutations; a mutation over GET is
  405 with `Allow: POST`; another method is 405 with `Allow: GET, POST`;
- the body (and a GET's `variables` and `extensions`) must be a JSON object;
  a `null` optional parameter counts as left out; JSON nested too deep to
  parse, a malformed multipart body or a multipart `map` that does not fit
  its operations is a 400;
- a client accepting `application/graphql-response+json` gets that media type,
  and 4xx for a request that fails before execution (parse and validation
  errors, a refusal by a guard: 400, or 429 for the rate limit), where the
  legacy `application/json` keeps 200;
- batches are not served (one operation per request);
- a persisted query's hash is resolved to its text before anything parses it
  (feedfabric.schema.persisted), a document too long to parse is refused, and
  a document of several operations that names none runs none (a 400, spending
  the rate limit as any refused document does);
- a GET from a browser with neither `query` nor `extensions` gets GraphiQL from
  the package's own copies of its scripts (feedfabric.ops.vendor), or 404 when
  GraphiQL is off (production).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphql import DocumentNode, GraphQLError
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, Response
from starlette.types import Receive, Scope, Send
from strawberry import Schema
from strawberry.exceptions import MissingQueryError
from strawberry.http import GraphQLRequestData, process_result
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from feedfabric.core import jsonwire
from feedfabric.core.errors import FeedFabricError, RequestTooLarge
from feedfabric.resolvers.context import Context
from feedfabric.schema import persisted
from feedfabric.schema.documents import UNNAMED_OF_SEVERAL, parse_document, several_operations, too_long
from feedfabric.schema.ratelimit import spend_refused_document

__all__ = ["GRAPHQL_PATH", "GraphQLHTTP", "error_response"]

GRAPHQL_PATH = "/graphql"
GRAPHQL_RESPONSE_JSON = "application/graphql-response+json"
GRAPHIQL_HTML = Path(__file__).resolve().parents[1] / "static" / "graphiql.html"
_CODE_BY_STATUS = {404: "NOT_FOUND", 405: "BAD_USER_INPUT", 429: "RATE_LIMITED"}
_ALLOWED = {
    # A subscription is let through to execution, whose guard tells the client to use the WebSocket.
    "GET": frozenset({OperationType.QUERY, OperationType.SUBSCRIPTION}),
    "POST": frozenset({OperationType.QUERY, OperationType.MUTATION, OperationType.SUBSCRIPTION}),
}

ContextGetter = Callable[[Request, Response], Awaitable[Context]]


class RequestRefused(Exception):
    """A request answered before (or instead of) execution: its status, message, headers and code."""

    def __init__(
        self, status_code: int, reason: str, headers: dict[str, str] | None = None, *, code: str | None = None
    ) -> None:
        super().__init__(reason)
        self.status_code = status_code
        self.reason = reason
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


@dataclass(frozen=True)
class GraphQLHTTP:
    """The ASGI endpoint serving /graphql over HTTP (the WebSocket protocols are served apart)."""

    schema: Schema
    context_getter: ContextGetter
    graphiql: bool = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            response = await self.answer(request)
        except RequestRefused as refused:
            response = error_response(request, refused.status_code, refused.reason, refused.headers, refused.code)
        except StarletteHTTPException as error:  # Starlette's multipart parser: a malformed body
            response = error_response(request, error.status_code, error.detail)
        except RequestTooLarge as error:
            response = error_response(request, error.status, error.message)
        except ClientDisconnect:
            return  # nobody to answer
        await response(scope, receive, send)

    async def answer(self, request: Request) -> Response:
        if request.method not in _ALLOWED:
            raise RequestRefused(405, "GraphQL is served over GET and POST.", {"Allow": "GET, POST"})
        sub_response = Response()  # what resolvers may add to the answer: headers, a status
        del sub_response.headers["content-length"]
        context = await self.context_getter(request, sub_response)
        if _asks_for_graphiql(request):
            if not self.graphiql:
                raise RequestRefused(404, "Not Found")
            return HTMLResponse(GRAPHIQL_HTML.read_text(encoding="utf-8"))
        form: FormData | None = None
        try:
            data, form = await _request_data(request)
            data = await _before_parsing(context, data)
            result = await self._execute(request, data, context)
        finally:
            if form is not None:
                await form.close()
        body = _coded(request, result)
        status = sub_response.status_code if sub_response.status_code != 200 else 200
        media_type = "application/json"
        if wants_graphql_response(request):
            media_type = GRAPHQL_RESPONSE_JSON
            if _is_request_error(result) and status == 200:
                codes = {(e.get("extensions") or {}).get("code") for e in body.get("errors") or []}
                status = 429 if codes == {"RATE_LIMITED"} else 400
        response = Response(jsonwire.dumps_text(body), status_code=status, media_type=media_type)
        response.headers.raw.extend(sub_response.headers.raw)
        return response

    async def _execute(self, request: Request, data: GraphQLRequestData, context: Context) -> ExecutionResult:
        try:
            return await self.schema.execute(
                data.query,
                variable_values=data.variables,
                context_value=context,
                operation_name=data.operation_name,
                allowed_operation_types=_ALLOWED[request.method],
                operation_extensions=data.extensions,
            )
        except CannotGetOperationTypeError as error:
            raise RequestRefused(400, error.as_http_error_reason()) from None
        except InvalidOperationTypeError as error:
            if error.operation_type is OperationType.MUTATION:
                raise RequestRefused(405, "Mutations are sent with POST.", {"Allow": "POST"}) from None
            raise RequestRefused(400, error.as_http_error_reason(request.method)) from None
        except MissingQueryError:
            raise RequestRefused(400, "No GraphQL query found in the request") from None


def _asks_for_graphiql(request: Request) -> bool:
    """A browser's GET with no `query`. A GET with `extensions` but no `query` is an automatic persisted
    query (Apollo Client sends its hash so, with `Accept: */*`), not a browser asking for GraphiQL."""
    accept = request.headers.get("accept", "")
    return (
        request.method == "GET"
        and request.query_params.get("query") is None
        and request.query_params.get("extensions") is None
        and ("text/html" in accept or "*/*" in accept)
    )


async def _request_data(request: Request) -> tuple[GraphQLRequestData, FormData | None]:
    """The operation as sent: a GET's parameters, a JSON body, or a GraphQL multipart request (an upload)."""
    form: FormData | None = None
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if request.method == "GET":
        data: Any = _query_params(request.query_params)
    elif "application/json" in content_type:
        data = _json_object(await request.body())
    elif content_type == "multipart/form-data":
        form = await _form(request)
        try:
            data = _with_files(form)
        except BaseException:
            await form.close()  # the caller closes it only once this returns it
            raise
    else:
        raise RequestRefused(400, "Unsupported content type")
    try:
        return _operation(data), form
    except BaseException:
        if form is not None:
            await form.close()
        raise


def _operation(data: dict[str, Any] | list[Any]) -> GraphQLRequestData:
    """The parts of a request that make an operation, each of the type the specification allows."""
    if isinstance(data, list):
        raise RequestRefused(400, "Batching is not enabled")
    query, variables, extensions = data.get("query"), data.get("variables"), data.get("extensions")
    if not isinstance(query, str | None):
        raise RequestRefused(400, "The GraphQL operation's `query` must be a string or null, if provided.")
    if not isinstance(variables, dict | None):
        raise RequestRefused(400, "The GraphQL operation's `variables` must be an object or null, if provided.")
    if not isinstance(extensions, dict | None):
        raise RequestRefused(400, "The GraphQL operation's `extensions` must be an object or null, if provided.")
    operation_name = data.get("operationName")
    return GraphQLRequestData(
        query=query, variables=variables, operation_name=operation_name, extensions=extensions, protocol="http"
    )


def _json_object(text: str | bytes) -> dict[str, Any] | list[Any]:
    """The body (and a GET's `variables` and `extensions`) must be a JSON object: `null`, `123` or `"text"`
    are refused. JSON nested past what the parser allows is a malformed body too, not a crash."""
    try:
        parsed = jsonwire.loads(text)
    except RecursionError:
        raise RequestRefused(400, "The JSON body is nested too deeply.") from None
    except (json.JSONDecodeError, ValueError):
        raise RequestRefused(400, "Unable to parse request body as JSON") from None
    if not isinstance(parsed, dict | list):
        raise RequestRefused(400, "Expected a JSON object.")
    return parsed


def _query_params(params: Mapping[str, str]) -> dict[str, Any]:
    """A GET's `variables=null` or `extensions=null` is the parameter left out, as GraphQL over HTTP says of
    `null` for any optional parameter (a POST body's `null`s already are)."""
    data: dict[str, Any] = dict(params)
    for key in ("variables", "extensions"):
        value = data.get(key)
        if value is None:
            continue
        if value.strip() == "null":
            del data[key]
        elif value:
            data[key] = _json_object(value)
    return data


async def _form(request: Request) -> FormData:
    try:
        return await request.form()
    except ValueError:
        raise RequestRefused(400, "Unable to parse the multipart body") from None


def _with_files(form: FormData) -> dict[str, Any] | list[Any]:
    """The GraphQL multipart request: `operations` with each file placed where `map` says. A `map` that does
    not fit the operations (`[1]`, `{"0": 5}`, a path through a null) is the client's malformed request."""
    operations: Any = form.get("operations", "{}")
    files_map: Any = form.get("map", "{}")
    if isinstance(operations, str):
        operations = _json_object(operations)
    if isinstance(files_map, str):
        files_map = _json_object(files_map)
    if not isinstance(operations, dict | list) or not isinstance(files_map, dict):
        raise RequestRefused(400, "The multipart map does not fit the operations.")
    for name, paths in files_map.items():
        upload = form.get(name)
        if not isinstance(upload, UploadFile):
            raise RequestRefused(400, "File(s) missing in form data")
        if not isinstance(paths, list):
            raise RequestRefused(400, "The multipart map does not fit the operations.")
        for path in paths:
            _place(operations, path, upload)
    return operations


def _place(operations: dict[str, Any] | list[Any], path: object, upload: UploadFile) -> None:
    if not isinstance(path, str):
        raise RequestRefused(400, "The multipart map does not fit the operations.")
    *steps, last = path.split(".")
    target: Any = operations
    try:
        for step in steps:
            target = target[int(step)] if isinstance(target, list) else target[step]
        if isinstance(target, list):
            target[int(last)] = upload
        elif isinstance(target, dict):
            target[last] = upload
        else:
            raise TypeError(type(target).__name__)
    except (KeyError, IndexError, ValueError, TypeError):
        raise RequestRefused(400, "The multipart map does not fit the operations.") from None


async def _before_parsing(context: Context, data: GraphQLRequestData) -> GraphQLRequestData:
    """A persisted query's hash becomes its stored text, before anything parses it (feedfabric.schema.persisted),
    and a document too long to parse is refused; the context notes whether the request named its operation
    (feedfabric.schema.operation refuses an unnamed one among several). A document of several operations that
    names none is a 400 whatever the Accept, as an unknown operationName is: none of them can run (the spec's
    GetOperation), anonymous ones included (graphql-core would answer those with one validation error each)."""
    context.operation_unnamed = data.operation_name is None
    try:
        data = await persisted.resolve_request(context, data)
    except FeedFabricError as error:
        raise RequestRefused(error.status, error.message, code=error.code) from None
    if isinstance(data.query, str) and (refusal := too_long(data.query)) is not None:
        raise RequestRefused(400, refusal.message, code="BAD_USER_INPUT")
    if context.operation_unnamed and (several := _several_operations(data.query)) is not None:
        # Refused as any refused document is: its parse spends from the rate limit.
        allowance = await spend_refused_document(context, data.query, several)
        if allowance is not None and allowance.refusal is not None:
            retry = {"Retry-After": str(allowance.reset_seconds)}
            raise RequestRefused(429, allowance.refusal.message, retry, code=allowance.refusal.code)
        raise RequestRefused(400, UNNAMED_OF_SEVERAL, code="BAD_USER_INPUT")
    return data


def _coded(request: Request, result: ExecutionResult) -> dict[str, Any]:
    """Parse and validation errors end before the error coding (feedfabric.schema.operation) sees them: they
    are coded here. A request that never executed has no `data` entry at all under
    application/graphql-response+json (the spec's request error)."""
    body: dict[str, Any] = dict(process_result(result))
    for error in body.get("errors") or []:
        extensions = error.setdefault("extensions", {})
        extensions.setdefault("code", "BAD_USER_INPUT")
    if _is_request_error(result) and wants_graphql_response(request):
        body.pop("data", None)
    return body


def _several_operations(query: object) -> DocumentNode | None:
    """The document when the text parses (through the shared cache) into more than one operation; a text
    that does not parse is left to execution, which reports it."""
    if not isinstance(query, str):
        return None
    try:
        document = parse_document(query)
    except GraphQLError:
        return None
    return document if several_operations(document) else None
