"""Shared live items go to sockets pre-encoded, byte for byte what Strawberry would send; others are executed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from strawberry.http.base import BaseView
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import Operation
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.types import ExecutionResult

from feedfabric.realtime.live import LiveOperation
from feedfabric.realtime.sockets import LegacyGraphQLWSHandler, TransportWSHandler
from feedfabric.settings import Settings
from tests.pipeline_support import relay, running
from tests.realtime_support import HOME_SUB, LEGACY_WS, PROTOCOLS, TRANSPORT_WS, WsClient, serve, wait_subscribed, ws_client

PER_VIEWER = """subscription { homeTimeline { post { id author { username viewerFollows } } } }"""

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


@pytest.fixture
def fast_sends(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every message sent pre-encoded."""
    sent: list[str] = []
    send_data = LiveOperation.send_data

    async def counting(self: LiveOperation, data_json: str) -> bool:
        done = await send_data(self, data_json)
        if done:
            sent.append(data_json)
        return done

    monkeypatch.setattr(LiveOperation, "send_data", counting)
    return sent


async def _raw_next(ws: WsClient) -> str:
    while True:
        raw = await asyncio.wait_for(ws.conn.recv(), 5)
        if json.loads(raw)["type"] in ("next", "data"):
            return raw  # type: ignore[return-value]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_followers_after_the_first_get_the_item_pre_encoded(settings: Settings, protocol: str,
                                                                  fast_sends: list[str]) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice = await api.member("alice")
        readers = [await api.member(name) for name in ("bob", "carol", "dave")]
        for reader in readers:
            await api.follow(reader, "alice")
        async with ws_client(server, protocol, readers[0]) as a, ws_client(server, protocol, readers[1]) as b, \
                ws_client(server, protocol, readers[2]) as c:
            for ws in (a, b, c):
                await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 3)
            post_id = await api.post(alice, "caf\u00e9 \u2713 \"pre-encoded\"")
            raws = [await _raw_next(ws) for ws in (a, b, c)]
            second = await api.post(alice, "and again")
            again = [await _raw_next(ws) for ws in (a, b, c)]
    messages = [json.loads(raw) for raw in raws]
    expected = {"homeTimeline": {"cursor": post_id, "post": {
        "id": post_id, "content": "caf\u00e9 \u2713 \"pre-encoded\"", "author": {"username": "alice"}}}}
    for raw, message in zip(raws, messages):
        assert message["type"] == ("next" if protocol == TRANSPORT_WS else "data") and message["id"] == "1"
        assert message["payload"]["data"] == expected
        assert "cost" in message["payload"]["extensions"]
        # The exact text Strawberry's encoder makes of that message: same key order, same escaping.
        assert raw == BaseView.encode_json(None, message)  # type: ignore[arg-type]
    assert [json.loads(raw)["payload"]["data"]["homeTimeline"]["post"]["id"] for raw in again] == [second] * 3
    # One subscriber executed each item; the other two got its rendering pre-encoded.
    assert len(fast_sends) == 4


async def test_viewer_dependent_selection_is_never_sent_pre_encoded(settings: Settings, fast_sends: list[str]) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob, carol = await api.member("alice"), await api.member("bob"), await api.member("carol")
        await api.follow(bob, "alice")
        await api.gql('mutation { followTag(tag: "news") }', token=carol)
        async with ws_client(server, TRANSPORT_WS, bob) as b, ws_client(server, LEGACY_WS, carol) as c:
            await b.subscribe(PER_VIEWER)
            await c.subscribe(PER_VIEWER)
            await wait_subscribed(server, 2)
            await api.post(alice, "for #news readers")
            by_bob = (await b.next_data())["homeTimeline"]["post"]["author"]
            by_carol = (await c.next_data())["homeTimeline"]["post"]["author"]
    assert by_bob == {"username": "alice", "viewerFollows": True}
    assert by_carol == {"username": "alice", "viewerFollows": False}
    assert fast_sends == []
