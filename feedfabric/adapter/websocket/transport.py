"""graphql-transport-ws (the `graphql-ws` library's protocol, github.com/enisdenjo/graphql-ws PROTOCOL.md).

`connection_init` → `connection_ack`; `ping` → `pong`; `subscribe` runs an operation of any type, its
results as `next`, then `complete`, or one `error` for an operation refused before it ran; the client's
`complete` ends an operation. The protocol's closes: 4400 an invalid message, 4401 a `subscribe` before
the ack, 4403 no valid token, 4408 no init in time, 4409 an id already running, 4429 a second init.
"""

from __future__ import annotations

from graphql import GraphQLError
from strawberry.subscriptions.protocols.graphql_transport_ws.types import SubscribeMessage

from feedfabric.adapter.websocket import frames
from feedfabric.adapter.websocket.frames import DUPLICATE_OPERATION, INVALID_MESSAGE, UNAUTHORIZED, ClientMessage
from feedfabric.adapter.websocket.operation import Operation
from feedfabric.adapter.websocket.protocol import SocketProtocol

PROTOCOL = "graphql-transport-ws"


class TransportProtocol(SocketProtocol):
    __slots__ = ()
    name = PROTOCOL

    async def handle(self, message: ClientMessage) -> None:
        if message["type"] == "subscribe":
            await self._subscribe(message)
        elif message["type"] == "complete":
            await self.stop(message["id"])
        elif message["type"] == "ping":
            await self.conn.send('{"type":"pong"}')
        elif message["type"] == "pong":
            return
        elif message["type"] == "connection_init":
            await self.initialise(message)
        else:  # legacy graphql-ws's messages, or a type neither protocol knows
            self.conn.close_soon(INVALID_MESSAGE, f"Unknown message type: {message['type']}"[:120])

    async def _subscribe(self, message: SubscribeMessage) -> None:
        operation_id: str = message["id"]
        if self.context is None:
            self.conn.close_soon(UNAUTHORIZED, "Unauthorized")
            return
        if operation_id in self.operations:
            self.conn.close_soon(DUPLICATE_OPERATION, f"Subscriber for {operation_id} already exists"[:120])
            return
        if self.full(operation_id):
            await self.send_errors(Operation(operation_id), [self.limit_error()])
            return
        if (refused := await self.refusal(message["payload"])) is not None:
            await self.send_errors(Operation(operation_id), [refused])
            return
        self.start(operation_id, message["payload"])

    def next_frame(self, operation: Operation, payload: str) -> str:
        return '{"id":' + operation.id_json + ',"type":"next","payload":' + payload + "}"

    async def send_errors(self, operation: Operation, errors: list[GraphQLError]) -> None:
        await self.conn.send(
            frames.encode({"id": operation.id, "type": "error", "payload": [e.formatted for e in errors]}),
            operation.id,
        )

    async def send_complete(self, operation: Operation) -> None:
        await self.conn.send('{"id":' + operation.id_json + ',"type":"complete"}', operation.id)
