"""The ASGI endpoint for WebSockets at /graphql: origin, subprotocol, accept, then the protocol's loop.

A handshake from a page on an origin not allowed is refused (HTTP 403) before anything else runs; a
client that offers neither protocol is accepted and closed with 4406, as graphql-transport-ws's servers
do. The open-sockets gauge counts every accepted socket for its life.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.schema import BaseSchema

from feedfabric.adapter.websocket.frames import POLICY_VIOLATION, SUBPROTOCOL_NOT_ACCEPTABLE
from feedfabric.adapter.websocket.legacy import LegacyProtocol
from feedfabric.adapter.websocket.origins import Origins
from feedfabric.adapter.websocket.protocol import SocketProtocol
from feedfabric.adapter.websocket.transport import TransportProtocol
from feedfabric.core import metrics
from feedfabric.resources import Resources

__all__ = ["GraphQLSockets"]

PROTOCOLS: dict[str, type[SocketProtocol]] = {
    TransportProtocol.name: TransportProtocol,
    LegacyProtocol.name: LegacyProtocol,
}


class GraphQLSockets:
    """GraphQL over WebSocket, both protocols, on Starlette's WebSocket."""

    def __init__(
        self, schema: BaseSchema, allowed_origins: Iterable[str], init_timeout: timedelta, max_operations: int
    ) -> None:
        self.schema = schema
        self.origins = Origins(allowed_origins)
        self.init_timeout = init_timeout
        self.max_operations = max_operations

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        websocket = WebSocket(scope, receive, send)
        if not self.origins.allows(websocket.headers):
            await websocket.close(code=POLICY_VIOLATION)  # before the accept: the handshake's 403
            return
        offered = scope.get("subprotocols") or []
        chosen = next((p for p in offered if p in PROTOCOLS), None)
        await websocket.accept(subprotocol=chosen)
        if chosen is None:
            await websocket.close(code=SUBPROTOCOL_NOT_ACCEPTABLE, reason="Subprotocol not acceptable")
            return
        resources: Resources = websocket.app.state.resources
        protocol = PROTOCOLS[chosen](websocket, resources, self.schema, self.init_timeout, self.max_operations)
        metrics.WEBSOCKET_CONNECTIONS.inc()
        try:
            await protocol.run()
        finally:
            metrics.WEBSOCKET_CONNECTIONS.dec()
