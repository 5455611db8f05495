"""graphql-ws, the legacy protocol of subscriptions-transport-ws (Apollo Client v2 sends every operation
on the socket, so queries and mutations are served as well as subscriptions).

`connection_init` → `connection_ack`, or `connection_error` and a close; `start` runs an operation, its
results as `data`, then `complete`, or one `error` for an operation refused before it ran; `stop` ends
one (answered with `complete`); `connection_terminate` closes the socket. The protocol defines no close
codes, so it gets graphql-transport-ws's: 4400 an invalid message, 4401 a `start` before the ack, 4403
no valid token (after its `connection_error`), 4408 no init in time, 4429 a second init. Unknown message
types are ignored, as the protocol's servers did. `start` with an id already running replaces it.
"""

from __future__ import annotations

from graphql import GraphQLError
from strawberry.subscriptions.protocols.graphql_ws.types import StartMessage

from feedfabric.adapter.websocket import frames
from feedfabric.adapter.websocket.frames import NORMAL, UNAUTHORIZED, ClientMessage
from feedfabric.adapter.websocket.operation import Operation
from feedfabric.adapter.websocket.protocol import SocketProtocol

PROTOCOL = "graphql-ws"


class LegacyProtocol(SocketProtocol):
    __slots__ = ()
    name = PROTOCOL

    async def handle(self, message: ClientMessage) -> None:
        if message["type"] == "start":
            await self._start(message)
        elif message["type"] == "stop":
            await self.stop(message["id"])
        elif message["type"] == "connection_init":
            await self.initialise(message)
        elif message["type"] == "connection_terminate":
            self.conn.close_soon(NORMAL, "")

    async def refuse_init(self, payload: dict[str, object]) -> None:
        await self.conn.send(frames.encode({"type": "connection_error", "payload": payload}))

    async def _start(self, message: StartMessage) -> None:
        operation_id: str = message["id"]
        if self.context is None:
            self.conn.close_soon(UNAUTHORIZED, "Unauthorized")
            return
        if operation_id in self.operations:
            await self.stop(operation_id)
        if self.full(operation_id):
            await self.send_errors(Operation(operation_id), [self.limit_error()])
            return
        if (refused := await self.refusal(message["payload"])) is not None:
            await self.send_errors(Operation(operation_id), [refused])
            return
        self.start(operation_id, message["payload"])

    def next_frame(self, operation: Operation, payload: str) -> str:
        return '{"type":"data","id":' + operation.id_json + ',"payload":' + payload + "}"

    async def send_errors(self, operation: Operation, errors: list[GraphQLError]) -> None:
        frame = frames.encode({"type": "error", "id": operation.id, "payload": errors[0].formatted})
        await self.conn.send(frame, operation.id)

    async def send_complete(self, operation: Operation) -> None:
        await self.conn.send('{"type":"complete","id":' + operation.id_json + "}", operation.id)

    async def cancelled(self, operation: Operation) -> None:
        await self.send_complete(operation)
