"""What a frame may be, before and after it is parsed, and how results go out as text.

Every frame a client sends spends from its socket's message budget before
anything reads it, and until `connection_init` is handled a socket may send
only a few small frames: a socket that floods or sends garbage costs the
process a counter and a comparison per frame, never a JSON parse or a shape
check. A frame that is not a JSON object of its protocol's shape closes the
socket with 4400, graphql-transport-ws's close for an invalid message (the
legacy protocol defines none and gets the same).

A subscription's result is the same for every subscriber of a live item whose
selection reads nothing about the viewer (feedfabric.adapter.execution hands each
of them the same result object), so its `payload` is encoded once and kept by
the identity of the result's data; each subscriber's frame is that text with
its operation id spliced in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias, cast

from graphql import GraphQLError
from strawberry.subscriptions.protocols.graphql_transport_ws import types as transport_ws
from strawberry.subscriptions.protocols.graphql_ws import types as legacy_ws

from feedfabric.core import jsonwire

__all__ = [
    "MAX_CHARS_BEFORE_INIT",
    "MAX_FRAMES_BEFORE_INIT",
    "TRY_AGAIN_LATER",
    "BeforeInit",
    "Extensions",
    "Malformed",
    "MessageBudget",
    "parse",
    "payload_text",
]

# The messages a client sends, typed as Strawberry types them for both protocols: `parse` hands on only
# what has the fields its `type` needs (the `malformed` checks), so the handlers read them as typed.
TransportMessage: TypeAlias = (
    transport_ws.ConnectionInitMessage
    | transport_ws.PingMessage
    | transport_ws.PongMessage
    | transport_ws.SubscribeMessage
    | transport_ws.CompleteMessage
)
LegacyMessage: TypeAlias = (
    legacy_ws.ConnectionInitMessage
    | legacy_ws.StartMessage
    | legacy_ws.StopMessage
    | legacy_ws.ConnectionTerminateMessage
)
ClientMessage: TypeAlias = TransportMessage | LegacyMessage
OperationPayload: TypeAlias = transport_ws.SubscribeMessagePayload | legacy_ws.StartMessagePayload
"""What starts an operation: its query, variables and operation name (`subscribe`, legacy `start`)."""
# The messages the server builds as objects, as Strawberry types them. The frequent ones (`next`/`data`,
# `complete`, `pong`, `connection_ack`) are written as text around a payload's text instead: their shapes
# are NextMessage / DataMessage and the others of the same modules.
ServerMessage: TypeAlias = transport_ws.ErrorMessage | legacy_ws.ErrorMessage | legacy_ws.ConnectionErrorMessage
ResultPayload: TypeAlias = transport_ws.NextMessagePayload
"""A result as a `next` (legacy `data`) message carries it."""


class Result(Protocol):
    """What a payload is made of, in Strawberry's ExecutionResult and graphql-core's alike."""

    @property
    def data(self) -> dict[str, object] | None: ...

    @property
    def errors(self) -> Sequence[GraphQLError] | None: ...

    @property
    def extensions(self) -> dict[str, object] | None: ...


INVALID_MESSAGE = 4400
UNAUTHORIZED = 4401
FORBIDDEN = 4403
SUBPROTOCOL_NOT_ACCEPTABLE = 4406
INIT_TIMEOUT = 4408
DUPLICATE_OPERATION = 4409
TOO_MANY_INITS = 4429
POLICY_VIOLATION = 1008
TRY_AGAIN_LATER = 1013
NORMAL = 1000

TOO_MANY_MESSAGES = "Too many messages"
MAX_FRAMES_BEFORE_INIT = 4
"""Frames a socket may send before its `connection_init` is handled (the init itself included): a
conforming client sends one, perhaps a ping."""
MAX_CHARS_BEFORE_INIT = 16_384
"""Characters those frames may hold in all: an init carries a token and a few parameters."""

_OPERATION_MESSAGES = frozenset({"subscribe", "complete", "start", "stop"})
_STARTING_MESSAGES = frozenset({"subscribe", "start"})


class Malformed(Exception):
    """The frame cannot be handled; the message is the 4400 close's reason."""


@dataclass(slots=True)
class MessageBudget:
    """A socket's frames per second, spent before a frame is parsed: answering a ping costs the event loop
    every request shares (50,000 pings sent in 0.6 s held other requests up to 650 ms)."""

    per_second: int
    clock: Callable[[], float] = time.monotonic
    left: float = -1.0
    at: float = 0.0

    def spend(self) -> bool:
        """False for a frame past the budget. A bucket of a second's frames, refilled as time passes:
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


@dataclass(slots=True)
class BeforeInit:
    """What a socket has sent before its `connection_init` was handled."""

    frames: int = 0
    chars: int = 0

    def admit(self, size: int) -> str | None:
        """None while within MAX_FRAMES_BEFORE_INIT and MAX_CHARS_BEFORE_INIT, else the close reason."""
        self.frames += 1
        self.chars += size
        if self.frames > MAX_FRAMES_BEFORE_INIT:
            return f"Too many messages before connection_init: at most {MAX_FRAMES_BEFORE_INIT}"
        if self.chars > MAX_CHARS_BEFORE_INIT:
            return f"Too much sent before connection_init: at most {MAX_CHARS_BEFORE_INIT:,} characters"
        return None


def parse(text: str) -> ClientMessage:
    """The frame as a message of the right shape, or Malformed with the reason (a `type` neither protocol
    knows passes too: the protocol answers it)."""
    try:
        message = jsonwire.loads(text)
    except ValueError:
        raise Malformed("Message must be valid JSON") from None
    if (reason := malformed(message)) is not None:
        raise Malformed(reason)
    return cast("ClientMessage", message)


def malformed(message: object) -> str | None:
    """Why a message cannot be handled; None for one of the right shape. graphql-transport-ws's reference
    server refuses the same shapes, and both protocols' clients send string ids, so a conforming client
    never meets it. Non-object `variables` are not the protocol's concern: the schema refuses them with
    BAD_USER_INPUT, as over HTTP."""
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


def encode(message: ServerMessage) -> str:
    return jsonwire.dumps_text(message)


class Extensions:
    """An operation's last `extensions` and their text: the same for each of its events (its cost, its
    member's rate-limit status as of the subscribe), so encoded once while they do not change."""

    __slots__ = ("text", "value")

    def __init__(self) -> None:
        self.value: dict[str, object] | None = None
        self.text = ""

    def encode(self, value: dict[str, object]) -> str:
        if value != self.value:
            self.value, self.text = value, jsonwire.dumps_text(value)
        return self.text

    def clear(self) -> None:
        """Forgets them: an operation whose live items a listener writes has them in its frames' text
        (feedfabric.adapter.websocket.operation), so its idle subscription holds no dicts of them."""
        self.value, self.text = None, ""


def payload_text(result: Result, extensions: Extensions) -> str:
    """`{"data": ..., "errors": ..., "extensions": ...}` as text, the extensions' text encoded once per
    operation (a result with errors is encoded whole)."""
    if result.errors or result.data is None:
        return jsonwire.dumps_text(result_payload(result))
    text = '{"data":' + jsonwire.dumps_text(result.data)
    if result.extensions:
        text += ',"extensions":' + extensions.encode(result.extensions)
    return text + "}"


def result_payload(result: Result) -> ResultPayload:
    payload: ResultPayload = {"data": result.data}
    if result.errors:
        payload["errors"] = [error.formatted for error in result.errors]
    if result.extensions:
        payload["extensions"] = result.extensions
    return payload


def id_text(operation_id: str) -> str:
    """The operation id as JSON, encoded once per operation and spliced into each of its frames."""
    return jsonwire.dumps_text(operation_id)
