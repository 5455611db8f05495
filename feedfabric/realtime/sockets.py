"""WebSocket authentication and operations for /graphql, shared by both subscription protocols.

The token comes from the `connection_init` payload (`{"authorization": "Bearer
..."}`), else from the upgrade request's Authorization header. A socket
without a valid token is closed with 4403 before any operation runs, so it
learns nothing: graphql-transport-ws defines 4403 Forbidden; the legacy
graphql-ws protocol has no such code, so it gets its `connection_error`
message and then the same 4403 close (Strawberry's default there is a bare
1011, which reads as a server fault). A signed-in socket is then watched for
the rest of its life (feedfabric.realtime.rights).

Apollo Client v2 (subscriptions-transport-ws) sends every operation on the
socket, so the legacy handler serves queries and mutations as well as
subscriptions, as graphql-transport-ws does. Both refuse an operation past the
per-socket limit with a coded error.

Strawberry reads fields from each message as it comes (`message["type"]`,
`payload["query"]`) and catches only a missing key: a message that is not an
object, or an operation whose id or payload has the wrong shape, would raise
out of the handler and drop the socket without a close frame. Both protocols
first check each message's shape here and close with 4400, graphql-transport-ws's
close for an invalid message (the legacy protocol has none, so it borrows this
one as it does 4403). Non-object `variables` are not the protocol's concern:
the schema refuses them with BAD_USER_INPUT, as over HTTP.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graphql import (
    GraphQLError,
    GraphQLFormattedError,
    OperationType,
    get_operation_ast,
)
from strawberry.exceptions import ConnectionRejectionError
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import BaseGraphQLTransportWSHandler
from strawberry.subscriptions.protocols.graphql_transport_ws.types import ErrorMessage as TransportError
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.subscriptions.protocols.graphql_ws.types import ConnectionErrorMessage
from strawberry.subscriptions.protocols.graphql_ws.types import ErrorMessage as LegacyError

from feedfabric.core import metrics
from feedfabric.feeds.viewer import resolve_viewer
from feedfabric.realtime.rights import FORBIDDEN
from feedfabric.schema.documents import UNNAMED_OF_SEVERAL, parse_document, several_operations, too_long

if TYPE_CHECKING:
    from feedfabric.resolvers.context import Context

LIMIT_CODE = "RATE_LIMITED"
INVALID_MESSAGE = 4400
INIT_TIMEOUT = 4408
TRY_AGAIN_LATER = 1013
POLICY_VIOLATION = 1008
TOO_MANY_MESSAGES = "Too many messages"
_OPERATION_MESSAGES = frozenset({"subscribe", "complete", "start", "stop"})
_STARTING_MESSAGES = frozenset({"subscribe", "start"})


@dataclass
class MessageBudget:
    """A socket's messages per second. Strawberry answers each one, a ping with a pong, on the event loop
    every request shares: 50,000 pings sent in 0.6 s held other requests up to 650 ms."""

    per_second: int
    clock: Callable[[], float] = time.monotonic
    left: float = -1.0
    at: float = 0.0

    def spend(self) -> bool:
        """False for a message past the budget. A bucket of a second's messages, refilled as time passes:
        a fixed window would refuse two bursts that straddle its edge although each is within the rate."""
        now = self.clock()
        if self.left < 0:
            self.left = float(self.per_second)
        else:
            self.left = min(float(self.per_second), self.left + (now - self.at) * self.per_second)
        self.at = now
        if self.left < 1:
            return False
        self.left -= 1
        return True


async def _flooding(handler: TransportWSHandler | LegacyGraphQLWSHandler) -> bool:
    """Whether to drop this message: the socket went past its budget, and is closed (1008) for it."""
    if handler.message_budget is None:
        handler.message_budget = MessageBudget(handler.context.resources.settings.ws_max_messages_per_second)
    if handler.message_budget.spend() and not handler.flooded:
        return False
    if not handler.flooded:
        handler.flooded = True
        await handler.websocket.close(code=POLICY_VIOLATION, reason=TOO_MANY_MESSAGES)
    return True


class TooManySockets(Exception):
    """The member already holds WS_MAX_SOCKETS_PER_MEMBER open sockets: this one is closed with
    TRY_AGAIN_LATER (1013), which clients retry with backoff, where 4403 would read as a bad token."""


def _authorization(context: Context) -> str | None:
    params = context.connection_params if isinstance(context.connection_params, dict) else {}
    for key in ("authorization", "Authorization"):
        value = params.get(key)
        if isinstance(value, str):
            return value
    request = context.request
    headers = getattr(request, "headers", None)
    return headers.get("authorization") if headers is not None else None


async def authenticate(context: Context) -> None:
    """Resolves the socket's viewer from the token; raises ConnectionRejectionError without a valid one."""
    resources = context.resources
    result = await resolve_viewer(resources.pool, resources.settings, _authorization(context))
    if result.error is not None or result.viewer.claims is None:
        message = str(result.error) if result.error is not None else "sign in first: send a bearer token"
        raise ConnectionRejectionError({"message": message, "code": "UNAUTHENTICATED"})
    context.viewer_result = result
    context.reset_loaders()  # the viewer changed: loaders made from now on are theirs
    socket = context.response
    if socket is not None:
        member = result.viewer.member
        sessions = resources.sessions
        if not await sessions.admit(
            socket, member.id if member else None, result.viewer.claims.expires_at, _closer(socket)
        ):
            raise TooManySockets(
                f"Too many open sockets: at most {sessions.max_per_member} per member; close one and retry"
            )


def _closer(socket: Any) -> Any:
    async def close(code: int, reason: str) -> None:
        await socket.close(code=code, reason=reason)

    return close


async def _handle_counted(context: Context, handle: Awaitable[None]) -> None:
    """An accepted socket's life (Strawberry accepts before handing it over), counted in the open-sockets
    gauge here rather than by a wrapper around every message's send."""
    metrics.WEBSOCKET_CONNECTIONS.inc()
    try:
        await handle
    finally:
        metrics.WEBSOCKET_CONNECTIONS.dec()
        await context.resources.sessions.forget(context.response)


def _limit_error(limit: int | None) -> GraphQLFormattedError:
    error = GraphQLError(
        f"Subscription limit reached: at most {limit} operations at once on one socket",
        extensions={"code": LIMIT_CODE},
    )
    return error.formatted


def _refusal(payload: dict[str, Any]) -> GraphQLFormattedError | None:
    """The error for a document too long to parse, or for an operation that names none in a document
    of several (the spec's GetOperation), which Strawberry would answer by running the first; None
    otherwise, a document that does not parse included (Strawberry reports that one)."""
    if (refusal := too_long(payload["query"])) is not None:
        return refusal.formatted
    if payload.get("operationName") is not None:
        return None
    try:
        document = parse_document(payload["query"])
    except GraphQLError:
        return None
    if not several_operations(document):
        return None
    return GraphQLError(UNNAMED_OF_SEVERAL, extensions={"code": "BAD_USER_INPUT"}).formatted


def _is_query_or_mutation(query: Any, operation_name: str | None) -> bool:
    """Only a document that parses and names one query or mutation; anything else takes Strawberry's
    subscription path, which reports its errors the protocol's way."""
    if not isinstance(query, str):
        return False
    try:
        operation = get_operation_ast(parse_document(query), operation_name)
    except GraphQLError:
        return False
    return operation is not None and operation.operation in (OperationType.QUERY, OperationType.MUTATION)


def _malformed(message: Any) -> str | None:
    """Why a message cannot be handled (the 4400 close's reason), checked before Strawberry indexes
    into it; None for a message of the right shape. graphql-transport-ws's reference server refuses
    the same shapes, and both protocols' clients send string ids, so a conforming client never meets it."""
    if not isinstance(message, dict):
        return "Message must be a JSON object"
    kind = message.get("type")
    if not isinstance(kind, str):
        return "Message type must be a string"
    if kind in _OPERATION_MESSAGES and not isinstance(message.get("id"), str):
        return "Message id must be a string"
    if kind not in _STARTING_MESSAGES:
        return None
    payload = message.get("payload")
    if not isinstance(payload, dict):
        return "Message payload must be an object"
    if not isinstance(payload.get("query"), str):
        return "The payload's query must be a string"
    operation_name = payload.get("operationName")
    if operation_name is not None and not isinstance(operation_name, str):
        return "The payload's operationName must be a string or null"
    return None


class TransportWSHandler(BaseGraphQLTransportWSHandler[Any, Any]):
    message_budget: MessageBudget | None = None
    flooded = False

    async def handle(self) -> None:
        await _handle_counted(self.context, super().handle())

    async def handle_message(self, message: Any) -> None:
        if await _flooding(self):
            return
        if (reason := _malformed(message)) is not None:
            await self.handle_invalid_message(reason)
            return
        await super().handle_message(message)

    async def handle_connection_init(self, message: Any) -> None:
        try:
            await super().handle_connection_init(message)
        except TooManySockets as refused:
            await self.websocket.close(code=TRY_AGAIN_LATER, reason=str(refused))
            return
        if self.connection_init_received and self.connection_init_timeout_task is not None:
            # Cancelled by the init just handled; Strawberry keeps the finished task (and its sleep) for
            # the socket's life, in every idle subscription. shutdown() skips a None.
            self.connection_init_timeout_task = None

    async def handle_subscribe(self, message: Any) -> None:
        limit = self.max_subscriptions_per_connection
        if (
            self.connection_acknowledged
            and limit is not None
            and len(self.operations) >= limit
            and message["id"] not in self.operations
        ):
            await self.send_message(TransportError(id=message["id"], type="error", payload=[_limit_error(limit)]))
            return
        if (refused := _refusal(message["payload"])) is not None:
            await self.send_message(TransportError(id=message["id"], type="error", payload=[refused]))
            return
        await super().handle_subscribe(message)


class LegacyGraphQLWSHandler(BaseGraphQLWSHandler[Any, Any]):
    """graphql-ws (subscriptions-transport-ws), with the forbidden, invalid-message and
    initialisation-timeout closes of graphql-transport-ws and queries and mutations served.

    Strawberry gives this protocol no wait for `connection_init`: a socket that never sends one
    would stay open, unauthenticated, for as long as its client likes."""

    init_timer: asyncio.Task[None] | None = None
    message_budget: MessageBudget | None = None
    flooded = False

    async def handle(self) -> None:
        self.init_timer = asyncio.create_task(self._close_unless_initialised())
        try:
            await _handle_counted(self.context, super().handle())
        finally:
            self._stop_init_timer()

    async def _close_unless_initialised(self) -> None:
        await asyncio.sleep(self.view.connection_init_wait_timeout.total_seconds())
        if not self.connection_acknowledged:
            await self.websocket.close(code=INIT_TIMEOUT, reason="Connection initialisation timeout")

    def _stop_init_timer(self) -> None:
        """Dropped once the socket is initialised, so an idle subscription keeps no finished task."""
        if self.init_timer is not None:
            self.init_timer.cancel()
            self.init_timer = None

    async def handle_message(self, message: Any) -> None:
        if await _flooding(self):
            return
        if (reason := _malformed(message)) is not None:
            await self.websocket.close(code=INVALID_MESSAGE, reason=reason)
            return
        await super().handle_message(message)

    async def handle_connection_init(self, message: Any) -> None:
        payload = message.get("payload")
        if isinstance(payload, dict) or payload is None:
            self.context.connection_params = payload
            try:
                await authenticate(self.context)
            except ConnectionRejectionError as rejected:
                await self.send_message({"type": "connection_error", "payload": rejected.payload})
                await self.websocket.close(code=FORBIDDEN, reason="Forbidden")
                return
            except TooManySockets as refused:
                error: dict[str, object] = {"message": str(refused), "code": LIMIT_CODE}
                await self.send_message(ConnectionErrorMessage(type="connection_error", payload=error))
                await self.websocket.close(code=TRY_AGAIN_LATER, reason=str(refused))
                return
        await super().handle_connection_init(message)
        if self.connection_acknowledged:
            self._stop_init_timer()

    async def handle_start(self, message: Any) -> None:
        limit = self.max_subscriptions_per_connection
        operation_id = message.get("id")
        if (
            self.connection_acknowledged
            and limit is not None
            and len(self.tasks) >= limit
            and operation_id not in self.tasks
        ):
            await self.send_message(LegacyError(type="error", id=operation_id, payload=_limit_error(limit)))
            return
        if (refused := _refusal(message["payload"])) is not None:
            await self.send_message(LegacyError(type="error", id=operation_id, payload=refused))
            return
        await super().handle_start(message)

    async def handle_async_results(
        self, operation_id: str, query: str, operation_name: str | None, variables: dict[str, object] | None
    ) -> None:
        if not _is_query_or_mutation(query, operation_name):
            await super().handle_async_results(operation_id, query, operation_name, variables)
            return
        try:
            result = await self.schema.execute(
                query,
                variable_values=variables,
                context_value=self.context,
                root_value=self.root_value,
                operation_name=operation_name,
            )
            await self.send_data_message(result, operation_id)
            await self.send_message({"type": "complete", "id": operation_id})
        except asyncio.CancelledError:
            await self.send_message({"type": "complete", "id": operation_id})
        finally:
            self.tasks.pop(operation_id, None)
