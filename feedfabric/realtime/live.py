"""Live items sent to a subscriber's socket pre-encoded, skipping the per-subscriber GraphQL pipeline.

A live post reaches every connected follower as the same TimelineItem, and
a viewer-independent selection already renders once for all of them
(feedfabric.schema.shared). Even so, every subscriber's copy still went
through graphql-core's per-event execution, Strawberry's per-result steps
(eleven extensions' `get_results` and `on_stream_result` hooks) and a JSON
encoding of the whole message: about 100 us of CPU per delivered event,
which for 1,000 followers is most of the latency of the last one.

Here the item's shared `data` is encoded once (SharedRenders.data_json) and
each subscriber's message is assembled around it: the protocol's head
(`{"id":"1","type":"next","payload":{"data":` for graphql-transport-ws,
`{"type":"data","id":"1","payload":{"data":` for graphql-ws, made by
encoding the real message with `data` null, so by the same encoder) and the
operation's `extensions`, asked from Strawberry's extension runner as
Strawberry does. The text is what Strawberry would have sent, byte for byte
(tests/test_realtime_live.py).

Asking the runner and encoding its answer was a third of the per-event cost
(py-spy, 1,000 subscribers). The schema's extensions report what they settled
when the operation executed (its cost, the rate-limit window it was counted
in), so their answer is the same for every message of a subscription; an
extension says so with `settled_results = True` (one that reports nothing
need not), and when all of them do, the encoded `extensions` are kept for the
operation's life after its first message. It is only used for
results that are shared and error-free, for which every per-result hook of
the schema's extensions does nothing (the error masking has no errors to
mask); any other event takes the full pipeline.

The protocol handler (feedfabric.realtime.sockets) makes a LiveOperation
when it starts an operation's task and puts it in LIVE_OPERATION, a context
variable, so only that task sees it; the schema gives it the operation's
extension runner when it starts the operation (FeedFabricSchema); the
subscription resolver sends through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Protocol

from strawberry.extensions import SchemaExtension
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.types import ExecutionContext

from feedfabric.realtime.render import SharedRenders

LIVE_OPERATION: ContextVar[LiveOperation | None] = ContextVar("feedfabric_live_operation", default=None)


class LiveSocket(Protocol):
    """What a protocol handler provides for its operations' pre-encoded messages."""

    def encode_json(self, value: Any) -> str:
        """The encoder Strawberry's own messages are made with."""

    def empty_result(self, target: Any) -> Mapping[str, Any]:
        """The protocol's result message for `target` (an operation) with `payload` `{"data": None}`."""

    async def send_encoded_result(self, target: Any, text: str) -> bool:
        """Writes the message for `target` as Strawberry would; False if the operation may send no more."""

    def can_send_now(self, target: Any) -> bool:
        """A message for `target` could be written right now, with nothing to wait for."""

    def send_encoded_now(self, target: Any, parts: tuple[bytes, ...]) -> None:
        """Writes the message for `target`, whose UTF-8 text is `parts` joined, at once; only after
        `can_send_now` said it could."""


class LiveOperation:
    """One operation of one socket. Small (it is made for every subscription, idle ones included):
    the message head is made on first use, the extension results come from the operation's runner."""

    __slots__ = ("_head", "_now", "_socket", "_tail", "_target", "execution_context", "runner")

    def __init__(self, socket: LiveSocket, target: Any) -> None:
        self._socket = socket
        self._target = target
        self._head: str | None = None
        self._tail: str | None = None  # the message's end, once the extensions' results are settled
        self._now: tuple[bytes, bytes] | None = None  # head and tail in UTF-8, for `send_now`
        # Set by the schema when it starts this operation (feedfabric.schema.FeedFabricSchema).
        self.runner: SchemaExtensionsRunner | None = None
        self.execution_context: ExecutionContext | None = None

    def encode(self, value: Any) -> str:
        return self._socket.encode_json(value)

    def _message_head(self) -> str:
        if self._head is None:
            text = self.encode(self._socket.empty_result(self._target))
            if not text.endswith("null}}"):
                raise ValueError("the result message must end with its payload, whose only key is data")
            self._head = text[: -len("null}}")]
        return self._head

    async def message(self, data_json: str) -> str | None:
        """The whole result message for an error-free result whose `data` encodes to `data_json`."""
        tail = await self._message_tail()
        return None if tail is None else self._message_head() + data_json + tail

    async def _message_tail(self) -> str | None:
        if self.runner is None or self.execution_context is None:
            return None
        tail = self._tail
        if tail is None:
            extensions = await self.runner.get_extensions_results(self.execution_context)
            tail = ',"extensions":' + self.encode(extensions) + "}}" if extensions else "}}"
            if results_settled(self.runner, self.execution_context):
                self._tail = tail
        return tail

    async def settle(self) -> None:
        """Encodes the settled extension results now, when Strawberry sent the operation's first
        messages itself, so they are ready for `send_now`."""
        await self._message_tail()

    async def send_data(self, data_json: str) -> bool:
        message = await self.message(data_json)
        return message is not None and await self._socket.send_encoded_result(self._target, message)

    def can_send_now(self) -> bool:
        """A message can be made and written without awaiting anything: the extensions' results are
        settled (so encoded once already) and the socket can take it (feedfabric.realtime.lane)."""
        return self._tail is not None and self._socket.can_send_now(self._target)

    def send_now(self, data: bytes) -> None:
        """Writes the message whose `data` is the UTF-8 JSON `data` at once; only after `can_send_now`."""
        now = self._now
        if now is None:
            assert self._tail is not None
            now = self._now = (self._message_head().encode(), self._tail.encode())
        self._socket.send_encoded_now(self._target, (now[0], data, now[1]))


def results_settled(runner: SchemaExtensionsRunner, execution_context: ExecutionContext) -> bool:
    """True when the operation's extension results can no longer change: every extension either reports
    nothing or declares `settled_results`, and nothing else was added to the execution's results."""
    return not execution_context.extensions_results and all(
        getattr(extension, "settled_results", False) or type(extension).get_results is SchemaExtension.get_results
        for extension in runner.extensions
    )


async def send_shared(
    live: LiveOperation | None, renders: SharedRenders, operation: Any, variables: Mapping[str, Any]
) -> bool:
    """Sends the item's shared rendering for this operation pre-encoded; False if the subscriber must
    execute it (no shared rendering: a viewer-dependent selection, errors, or not on a socket)."""
    if live is None:
        return False
    data_json = await renders.data_json(operation, variables, live.encode)
    return data_json is not None and await live.send_data(data_json)
