"""The socket loop both protocols share: frames in (budget, pre-init bound, shape), operations out.

A frame is handled in this order, each step before the next costs anything:
the message budget (past it: 1008), text not binary (else 4400), the bound
on what may come before `connection_init` (past it: 1008), JSON of the
protocol's shape (else 4400). Then the protocol (`transport`, `legacy`)
handles the message.

An operation is the schema's public `stream` for its document, run in a
task of its own, its results written as the protocol's frames. A live
homeTimeline the schema hands to a listener (feedfabric.realtime.listener)
keeps neither: its stream ends with a result that carries only its
extensions, which is not sent, and from then on the fan-out writes its
frames; the operation stays on the socket until the client or the socket
ends it. Two
refusals come first, as over HTTP: a document past the character cap, and a
document of several operations that names none (the spec's GetOperation;
Strawberry would run the first). Both spend from the rate limit as any
refused document does (feedfabric.schema.ratelimit), as do the documents the
schema refuses (parse, validation, depth, cost: feedfabric.schema.operation).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import aclosing
from datetime import timedelta

from graphql import GraphQLError
from starlette.websockets import WebSocket
from strawberry.schema import BaseSchema
from strawberry.subscriptions.protocols.graphql_transport_ws import types as transport_ws
from strawberry.subscriptions.protocols.graphql_ws import types as legacy_ws
from strawberry.types.execution import ExecutionResult, PreExecutionError

from feedfabric.adapter.websocket import frames
from feedfabric.adapter.websocket.auth import LIMIT_CODE, Rejected, TooManySockets, authenticate
from feedfabric.adapter.websocket.connection import TOO_SLOW, Connection
from feedfabric.adapter.websocket.frames import (
    FORBIDDEN,
    INVALID_MESSAGE,
    POLICY_VIOLATION,
    TOO_MANY_INITS,
    TOO_MANY_MESSAGES,
    TRY_AGAIN_LATER,
    BeforeInit,
    ClientMessage,
    Malformed,
    MessageBudget,
    OperationPayload,
    payload_text,
)
from feedfabric.adapter.websocket.operation import Operation
from feedfabric.resolvers.context import Context, build_context
from feedfabric.resources import Resources
from feedfabric.schema.documents import UNNAMED_OF_SEVERAL, parse_document, several_operations, too_long
from feedfabric.schema.ratelimit import spend_refused_document

log = logging.getLogger(__name__)


class SocketProtocol:
    """A socket's life under one protocol; `transport` and `legacy` supply the messages' handling."""

    name = ""
    # Every open socket holds one: slots, not a dict per instance.
    __slots__ = (
        "before_init",
        "budget",
        "conn",
        "context",
        "init_received",
        "init_timeout",
        "init_timer",
        "max_operations",
        "operations",
        "resources",
        "schema",
        "websocket",
    )

    def __init__(
        self,
        websocket: WebSocket,
        resources: Resources,
        schema: BaseSchema,
        init_timeout: timedelta,
        max_operations: int,
    ) -> None:
        settings = resources.settings
        self.websocket = websocket
        self.resources = resources
        self.schema = schema
        self.init_timeout = init_timeout
        self.init_timer: asyncio.TimerHandle | None = None
        self.max_operations = max_operations
        self.conn = Connection(websocket, settings.realtime_queue_size, settings.ws_max_unsent_bytes)
        self.conn.on_close = self._end_operations
        self.budget = MessageBudget(settings.ws_max_messages_per_second)
        self.before_init: BeforeInit | None = BeforeInit()
        self.init_received = False
        self.context: Context | None = None  # set once the socket is authenticated
        self.operations: dict[str, Operation] = {}

    # -- the loop ---------------------------------------------------------------------------------------

    async def run(self) -> None:
        self.init_timer = asyncio.get_running_loop().call_later(self.init_timeout.total_seconds(), self._init_timed_out)
        try:
            while not self.conn.closed:
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                await self._frame(message.get("text"), message.get("bytes"))
        finally:
            if self.init_timer is not None:
                self.init_timer.cancel()
            self.conn.closed = True
            tasks = [op.task for op in self.operations.values() if op.task is not None]
            self._end_operations()
            for task in tasks:  # let their finally blocks run before the socket is forgotten
                with contextlib.suppress(BaseException):
                    await task
            await self.conn.closed_down()
            await self.resources.sessions.forget(self.conn)

    async def _frame(self, text: str | None, data: bytes | None) -> None:
        if not self.budget.spend():
            self.conn.close_soon(POLICY_VIOLATION, TOO_MANY_MESSAGES)
            return
        if text is None:
            self.conn.close_soon(INVALID_MESSAGE, "WebSocket message type must be text")
            return
        if self.before_init is not None and (reason := self.before_init.admit(len(text))) is not None:
            self.conn.close_soon(POLICY_VIOLATION, reason)
            return
        try:
            message = frames.parse(text)
        except Malformed as malformed:
            self.conn.close_soon(INVALID_MESSAGE, str(malformed))
            return
        await self.handle(message)

    async def handle(self, message: ClientMessage) -> None:
        raise NotImplementedError

    def _init_timed_out(self) -> None:
        if self.context is None:
            self.conn.close_soon(frames.INIT_TIMEOUT, "Connection initialisation timeout")

    # -- connection_init ----------------------------------------------------------------------------------

    async def initialise(self, message: transport_ws.ConnectionInitMessage | legacy_ws.ConnectionInitMessage) -> bool:
        """Authenticates the socket from its init; False when the socket was closed instead."""
        if self.init_received:
            self.conn.close_soon(TOO_MANY_INITS, "Too many initialisation requests")
            return False
        self.init_received = True
        self.before_init = None
        if self.init_timer is not None:
            self.init_timer.cancel()  # answered now, one way or the other: an idle socket keeps no timer
        payload = message.get("payload")
        if payload is not None and not isinstance(payload, dict):
            await self.refuse_init({"message": "The connection_init payload must be an object"})
            self.conn.close_soon(INVALID_MESSAGE, "Invalid connection init payload")
            return False
        try:
            viewer = await authenticate(self.resources, payload, self.websocket.headers, self.conn, self.conn.close)
        except Rejected as rejected:
            await self.refuse_init(rejected.payload)
            self.conn.close_soon(FORBIDDEN, "Forbidden")
            return False
        except TooManySockets as refused:
            await self.refuse_init({"message": str(refused), "code": LIMIT_CODE})
            self.conn.close_soon(TRY_AGAIN_LATER, str(refused))
            return False
        self.context = build_context(self.resources, viewer, request=self.websocket, response=self.conn)
        await self.conn.send('{"type":"connection_ack"}')
        return True

    async def refuse_init(self, payload: dict[str, object]) -> None:
        """What the protocol says before a refused init's close (graphql-ws: `connection_error`)."""

    # -- operations ---------------------------------------------------------------------------------------

    def full(self, operation_id: str) -> bool:
        return len(self.operations) >= self.max_operations and operation_id not in self.operations

    def limit_error(self) -> GraphQLError:
        return GraphQLError(
            f"Subscription limit reached: at most {self.max_operations} operations at once on one socket",
            extensions={"code": LIMIT_CODE},
        )

    async def refusal(self, payload: OperationPayload) -> GraphQLError | None:
        """The error for a document refused before the schema sees it, spent from the rate limit as any
        refused document is; None for one the schema runs (or refuses itself)."""
        assert self.context is not None
        query: str = payload["query"]
        operation_name = payload.get("operationName")
        error: GraphQLError | None = None
        if (too := too_long(query)) is not None:
            error, document = too, None
        elif operation_name is None:
            try:
                document = parse_document(query)
            except GraphQLError:
                return None  # the schema reports it, and spends for it
            if not several_operations(document):
                return None
            error = GraphQLError(UNNAMED_OF_SEVERAL, extensions={"code": "BAD_USER_INPUT"})
        else:
            return None
        allowance = await spend_refused_document(self.context, query, document)
        if allowance is not None and allowance.refusal is not None:
            return GraphQLError(allowance.refusal.message, extensions={"code": allowance.refusal.code})
        return error

    def start(self, operation_id: str, payload: OperationPayload) -> None:
        operation = Operation(operation_id, self.next_frame)
        operation.conn = self.conn
        operation.limit = self.resources.hub.queue_size
        self.operations[operation_id] = operation
        operation.task = asyncio.create_task(self._run(operation, payload))

    async def stop(self, operation_id: str) -> None:
        # Its frames still queued behind a slow reader do not go out either, also when the operation already
        # finished (a query's result and `complete` queued, its task gone).
        self.conn.drop(operation_id)
        operation = self.operations.pop(operation_id, None)
        if operation is not None:
            operation.finish()

    async def _run(self, operation: Operation, payload: OperationPayload) -> None:
        variables = payload.get("variables")
        try:
            stream = await self.schema.stream(
                payload["query"],
                variable_values=variables,  # not an object: the schema answers BAD_USER_INPUT
                context_value=self.context,
                root_value=operation,
                operation_name=payload.get("operationName"),
            )
            async with aclosing(stream):
                first = True
                async for result in stream:
                    if self.ended(operation):  # the client's `complete` came first: no result goes out after it
                        return
                    if first and isinstance(result, PreExecutionError):
                        await self.send_errors(operation, list(result.errors or ()))
                        return
                    first = False
                    if not isinstance(result, ExecutionResult):  # @defer / @stream frames: no wire form here
                        await self.send_errors(operation, [GraphQLError("Incremental delivery is not supported")])
                        return
                    if operation.live is not None:  # the stream's last result: a listener writes from now on
                        operation.go_live(result.extensions)
                        return
                    text = payload_text(result, operation.extensions)
                    await self.conn.send(self.next_frame(operation, text), operation.id)
            if not self.ended(operation):
                await self.send_complete(operation)
        except asyncio.CancelledError:
            await self.cancelled(operation)
            raise
        except Exception:  # noqa: BLE001 - the schema answers its own errors; this is ours, and ends the operation
            log.exception("websocket operation %s failed", operation.id)
            if not self.ended(operation):
                await self.send_errors(
                    operation, [GraphQLError("Internal server error", extensions={"code": "INTERNAL"})]
                )
        finally:
            if self.operations.get(operation.id) is operation and operation.task is not None:
                del self.operations[operation.id]

    def ended(self, operation: Operation) -> bool:
        """Whether the client ended the operation (`complete`, `stop`) or the socket closed: from then on
        nothing of it is sent, as graphql-transport-ws requires. Its task is cancelled too, but a result
        already computed (a mutation that committed) would otherwise still go out."""
        return self.conn.closed or self.operations.get(operation.id) is not operation

    def _end_operations(self) -> None:
        # Closed for reading too slowly (feedfabric.adapter.websocket.connection): its subscribers were cut off.
        dropped = TOO_SLOW if self.conn.close_code == TRY_AGAIN_LATER else None
        for operation in list(self.operations.values()):
            operation.finish(dropped)
        self.operations.clear()

    def next_frame(self, operation: Operation, payload: str) -> str:
        raise NotImplementedError

    async def send_errors(self, operation: Operation, errors: list[GraphQLError]) -> None:
        raise NotImplementedError

    async def send_complete(self, operation: Operation) -> None:
        raise NotImplementedError

    async def cancelled(self, operation: Operation) -> None:
        """An operation ended by the client or the socket's close."""
