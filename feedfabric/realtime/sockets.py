"""WebSocket authentication for /graphql, shared by both subscription protocols.

The token comes from the `connection_init` payload (`{"authorization": "Bearer
..."}`), else from the upgrade request's Authorization header. A socket
without a valid token is closed with 4403 before any operation runs, so it
learns nothing: graphql-transport-ws defines 4403 Forbidden; the legacy
graphql-ws protocol has no such code, so it gets its `connection_error`
message and then the same 4403 close (strawberry's default there is a bare
1011, which reads as a server fault).

Both handlers also give each operation's task its LiveOperation
(feedfabric.realtime.live): how that operation's result messages start and
how to write one that is already encoded, through the same ASGI send (and so
the same flow control) as Strawberry's own messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocketDisconnect, WebSocketState
from strawberry.asgi import ASGIWebSocketAdapter
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler

from feedfabric.feeds.viewer import resolve_viewer
from feedfabric.realtime.live import LIVE_OPERATION, LiveOperation
from feedfabric.realtime.wsprotocol import protocol_of

if TYPE_CHECKING:
    from feedfabric.context import Context

FORBIDDEN = 4403


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


class WebSocketAdapter(ASGIWebSocketAdapter):
    """Strawberry's ASGI socket adapter, plus sending a message that is already JSON text."""

    async def send_encoded(self, text: str) -> None:
        """As `send_json` does after encoding, including its disconnect error. On an accepted socket of
        ours the message goes to the server protocol's own `send` (feedfabric.realtime.wsprotocol), which
        is where the ASGI send chain ends; Starlette's own state rules apply as in `WebSocket.send`."""
        ws = self.ws
        protocol = protocol_of(ws.scope) if ws.application_state is WebSocketState.CONNECTED else None
        try:
            if protocol is None:
                await ws.send_text(text)
                return
            try:
                await protocol.send({"type": "websocket.send", "text": text})
            except OSError:
                ws.application_state = WebSocketState.DISCONNECTED
                raise WebSocketDisconnect(code=1006) from None
        except WebSocketDisconnect as exc:
            raise WebSocketDisconnected from exc

    def can_send_now(self) -> bool:
        """`send_encoded` would write at once, with nothing to wait for."""
        ws = self.ws
        if ws.application_state is not WebSocketState.CONNECTED:
            return False
        protocol = protocol_of(ws.scope)
        return protocol is not None and protocol.can_send_now()

    def send_encoded_now(self, parts: tuple[bytes, ...]) -> None:
        """`send_encoded` of the text whose UTF-8 is `parts` joined, as a plain call; only after `can_send_now`."""
        protocol = protocol_of(self.ws.scope)
        assert protocol is not None
        protocol.send_text_now(parts)


class _LiveSocket:
    """The LiveSocket parts both handlers share (feedfabric.realtime.live)."""

    view: Any
    websocket: Any

    def encode_json(self, value: Any) -> str:
        return self.view.encode_json(value)  # type: ignore[no-any-return]

    def send_encoded_now(self, target: Any, parts: tuple[bytes, ...]) -> None:
        self.websocket.send_encoded_now(parts)

    def _start_live(self, target: Any) -> None:
        """Called first thing in an operation's own task, so the context variable is that task's alone."""
        if isinstance(self.websocket, WebSocketAdapter):
            LIVE_OPERATION.set(LiveOperation(self, target))  # type: ignore[arg-type]


class TransportWSHandler(_LiveSocket, BaseGraphQLTransportWSHandler[Any, Any]):
    """graphql-transport-ws, with a LiveOperation for each operation's task."""

    async def run_operation(self, operation: Operation[Any, Any]) -> None:
        self._start_live(operation)
        await super().run_operation(operation)

    async def handle_connection_init(self, message: Any) -> None:
        await super().handle_connection_init(message)
        if self.connection_init_received and self.connection_init_timeout_task is not None:
            # Cancelled by the init just handled; Strawberry keeps the finished task (and its sleep) for
            # the socket's life, about 1.5 kB of every idle subscription. shutdown() skips a None.
            self.connection_init_timeout_task = None

    def empty_result(self, target: Operation[Any, Any]) -> Mapping[str, Any]:
        return {"id": target.id, "type": "next", "payload": {"data": None}}  # as Operation.send_next

    async def send_encoded_result(self, target: Operation[Any, Any], text: str) -> bool:
        if target.completed:  # as Operation.send_operation_message
            return False
        await self.websocket.send_encoded(text)
        return True

    def can_send_now(self, target: Operation[Any, Any]) -> bool:
        return not target.completed and self.websocket.can_send_now()  # type: ignore[no-any-return]


class LegacyGraphQLWSHandler(_LiveSocket, BaseGraphQLWSHandler[Any, Any]):
    """graphql-ws (subscriptions-transport-ws) with the forbidden close of graphql-transport-ws,
    and a LiveOperation for each operation's task."""

    async def handle_async_results(
        self, operation_id: str, query: str, operation_name: str | None, variables: dict[str, object] | None
    ) -> None:
        self._start_live(operation_id)
        await super().handle_async_results(operation_id, query, operation_name, variables)

    def empty_result(self, target: str) -> Mapping[str, Any]:
        return {"type": "data", "id": target, "payload": {"data": None}}  # as send_data_message

    async def send_encoded_result(self, target: str, text: str) -> bool:
        await self.websocket.send_encoded(text)  # as send_data_message
        return True

    def can_send_now(self, target: str) -> bool:
        return self.websocket.can_send_now()  # type: ignore[no-any-return]

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
        await super().handle_connection_init(message)
