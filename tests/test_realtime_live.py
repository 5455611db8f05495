"""A pre-encoded live message is byte for byte what Strawberry sends (tests/test_realtime_shared.py: over real sockets)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from feedfabric.app import FeedFabricGraphQL
from feedfabric.realtime.live import LiveOperation
from feedfabric.realtime.sockets import LegacyGraphQLWSHandler, TransportWSHandler
from strawberry.extensions import SchemaExtension
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import Operation
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.types import ExecutionResult

from tests.realtime_support import PROTOCOLS, TRANSPORT_WS

DATA = {
    "homeTimeline": {
        "cursor": "c1",
        "post": {
            "id": "p1",
            "content": 'caf\u00e9 \u2713 "q" </script> \\ \n',
            "likeCount": 0,
            "tags": [],
            "author": {"username": "alice"},
        },
    }
}
EXTENSIONS = {
    "cost": {"requestedQueryCost": 3, "maximumAvailable": 10000},
    "rateLimit": {"limit": 600, "remaining": 587, "resetSeconds": 41},
}


class _Capture:
    """Stands in for a protocol handler: what Strawberry's own code would hand to the socket, encoded."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def forget_id(self, op_id: str) -> None:
        pass

    async def send_message(self, message: Any) -> None:
        self.sent.append(FeedFabricGraphQL.encode_json(None, message))  # type: ignore[arg-type]


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
        return FeedFabricGraphQL.encode_json(None, value)  # type: ignore[arg-type]

    def empty_result(self, target: str) -> dict[str, Any]:
        handler = TransportWSHandler if self.protocol == TRANSPORT_WS else LegacyGraphQLWSHandler
        return handler.empty_result(None, _Op(target) if self.protocol == TRANSPORT_WS else target)  # type: ignore[arg-type]

    async def send_encoded_result(self, target: str, text: str) -> bool:
        self.sent.append(text)
        return True


class _Op:
    def __init__(self, op_id: str) -> None:
        self.id = op_id


class _Reporting(SchemaExtension):
    """An extension whose results may change from one message to the next."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.results = results

    def get_results(self) -> dict[str, Any]:
        return self.results


class _Settled(_Reporting):
    settled_results = True


class _Runner:
    """As Strawberry's runner: each extension's results, merged."""

    def __init__(self, *extensions: SchemaExtension) -> None:
        self.extensions = list(extensions)
        self.asked = 0

    async def get_extensions_results(self, ctx: Any) -> dict[str, Any]:
        self.asked += 1
        merged: dict[str, Any] = {}
        for extension in self.extensions:
            merged.update(extension.get_results())
        return merged


def _live(protocol: str, op_id: str, runner: _Runner) -> tuple[LiveOperation, _Socket]:
    socket = _Socket(protocol)
    live = LiveOperation(socket, op_id)
    live.runner, live.execution_context = runner, SimpleNamespace(extensions_results={})  # type: ignore[assignment]
    return live, socket


async def _live_text(protocol: str, op_id: str, extensions: dict[str, Any]) -> str:
    live, socket = _live(protocol, op_id, _Runner(_Settled(extensions)))
    assert await live.send_data(socket.encode_json(DATA))
    return socket.sent[0]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("extensions", [EXTENSIONS, {}])
@pytest.mark.parametrize("op_id", ["1", 'weird "id" \u00e9'])
async def test_pre_encoded_message_is_what_strawberry_sends(
    protocol: str, extensions: dict[str, Any], op_id: str
) -> None:
    expected = await _strawberry_text(protocol, op_id, ExecutionResult(data=DATA, errors=None, extensions=extensions))
    assert await _live_text(protocol, op_id, extensions) == expected


async def test_settled_extension_results_are_asked_and_encoded_once_per_operation() -> None:
    runner = _Runner(_Settled(EXTENSIONS), SchemaExtension(execution_context=None))  # type: ignore[arg-type]
    live, socket = _live(TRANSPORT_WS, "1", runner)
    for _ in range(3):
        assert await live.send_data(socket.encode_json(DATA))
    assert runner.asked == 1
    assert len(set(socket.sent)) == 1 and '"remaining":587' in socket.sent[0]


async def test_results_of_an_extension_that_may_change_are_asked_for_every_message() -> None:
    changing = _Reporting({"progress": 1})
    runner = _Runner(_Settled(EXTENSIONS), changing)
    live, socket = _live(TRANSPORT_WS, "1", runner)
    assert await live.send_data(socket.encode_json(DATA))
    changing.results = {"progress": 2}
    assert await live.send_data(socket.encode_json(DATA))
    assert runner.asked == 2
    assert '"progress":1' in socket.sent[0] and '"progress":2' in socket.sent[1]


def test_the_schemas_reporting_extensions_declare_their_results_settled() -> None:
    from feedfabric.schema import schema

    reporting = [e for e in schema.get_extensions() if type(e).get_results is not SchemaExtension.get_results]
    assert reporting and all(getattr(e, "settled_results", False) for e in reporting)
