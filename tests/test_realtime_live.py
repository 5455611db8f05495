"""A pre-encoded live message is byte for byte what Strawberry sends (tests/test_realtime_shared.py: over real sockets)."""

from __future__ import annotations

from typing import Any

import pytest
from strawberry.http.base import BaseView
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import Operation
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.types import ExecutionResult

from feedfabric.realtime.live import LiveOperation
from feedfabric.realtime.sockets import LegacyGraphQLWSHandler, TransportWSHandler
from tests.realtime_support import PROTOCOLS, TRANSPORT_WS

DATA = {"homeTimeline": {"cursor": "c1", "post": {"id": "p1", "content": 'caf\u00e9 \u2713 "q" </script> \\ \n',
                                                    "likeCount": 0, "tags": [], "author": {"username": "alice"}}}}
EXTENSIONS = {"cost": {"requestedQueryCost": 3, "maximumAvailable": 10000},
              "rateLimit": {"limit": 600, "remaining": 587, "resetSeconds": 41}}


class _Capture:
    """Stands in for a protocol handler: what Strawberry's own code would hand to the socket, encoded."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def forget_id(self, op_id: str) -> None:
        pass

    async def send_message(self, message: Any) -> None:
        self.sent.append(BaseView.encode_json(None, message))  # type: ignore[arg-type]


async def _strawberry_text(protocol: str, op_id: str, result: ExecutionResult) -> str:
    capture = _Capture()
    if protocol == TRANSPORT_WS:
        await Operation(capture, op_id, "", None, None).send_next(result)  # type: ignore[arg-type]
    else:
        await BaseGraphQLWSHandler.send_data_message(capture, result, op_id)  # type: ignore[arg-type]
    return capture.sent[0]  # type: ignore[no-any-return]


class _Socket:
    """A LiveSocket that keeps what it is asked to send."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.sent: list[str] = []

    def encode_json(self, value: Any) -> str:
        return BaseView.encode_json(None, value)  # type: ignore[arg-type,return-value]

    def empty_result(self, target: str) -> dict[str, Any]:
        handler = TransportWSHandler if self.protocol == TRANSPORT_WS else LegacyGraphQLWSHandler
        return handler.empty_result(None, _Op(target) if self.protocol == TRANSPORT_WS else target)  # type: ignore[arg-type]

    async def send_encoded_result(self, target: str, text: str) -> bool:
        self.sent.append(text)
        return True


class _Op:
    def __init__(self, op_id: str) -> None:
        self.id = op_id


class _Runner:
    def __init__(self, extensions: dict[str, Any]) -> None:
        self.extensions = extensions

    async def get_extensions_results(self, ctx: Any) -> dict[str, Any]:
        return self.extensions


async def _live_text(protocol: str, op_id: str, extensions: dict[str, Any]) -> str:
    socket = _Socket(protocol)
    live = LiveOperation(socket, op_id)
    live.runner, live.execution_context = _Runner(extensions), object()  # type: ignore[assignment]
    assert await live.send_data(socket.encode_json(DATA))
    return socket.sent[0]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("extensions", [EXTENSIONS, {}])
@pytest.mark.parametrize("op_id", ["1", 'weird "id" \u00e9'])
async def test_pre_encoded_message_is_what_strawberry_sends(protocol: str, extensions: dict[str, Any], op_id: str) -> None:
    expected = await _strawberry_text(protocol, op_id, ExecutionResult(data=DATA, errors=None, extensions=extensions))
    assert await _live_text(protocol, op_id, extensions) == expected
