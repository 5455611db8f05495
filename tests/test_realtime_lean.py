"""The lean per-socket pieces: the subscriber inbox, and uvicorn's WebSocket protocol with less state."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import pytest
from feedfabric.realtime.mailbox import Mailbox
from feedfabric.realtime.sockets import WebSocketAdapter
from feedfabric.realtime.wsprotocol import SCOPE_KEY, LeanWebSocketProtocol, _Flag, protocol_of, text_frame_header
from feedfabric.settings import Settings
from starlette.websockets import WebSocket, WebSocketState
from strawberry.http.exceptions import WebSocketDisconnected
from uvicorn.protocols.utils import ClientDisconnected
from websockets.frames import Frame, Opcode

from tests.realtime_support import TRANSPORT_WS, serve, ws_client


async def test_mailbox_is_fifo_wakes_its_reader_and_holds_nothing_once_drained() -> None:
    box: Mailbox[int] = Mailbox()
    reader = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    box.put(1)
    box.put(2)
    assert await reader == 1
    assert len(box) == 1 and await box.get() == 2
    assert len(box) == 0 and box._items is None
    box.put(3)
    box.clear()
    assert len(box) == 0
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(box.get(), 0.05)
    assert box._waiter is None  # a cancelled reader leaves no waiter behind


async def test_mailbox_refuses_a_second_reader() -> None:
    box: Mailbox[int] = Mailbox()
    first = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError):
        await box.get()
    first.cancel()


async def test_flag_waits_while_cleared_like_an_event() -> None:
    flag = _Flag()
    await asyncio.wait_for(flag.wait(), 0.05)
    flag.clear()
    waiters = [asyncio.create_task(flag.wait()) for _ in range(2)]
    await asyncio.sleep(0.01)
    assert not any(w.done() for w in waiters)
    flag.set()
    await asyncio.wait_for(asyncio.gather(*waiters), 1)
    assert flag.is_set()


async def test_sockets_are_served_by_the_lean_protocol_without_the_handshake(settings: Settings) -> None:
    async with serve(settings) as server:
        member = await server.api.member("alice")
        async with ws_client(server, TRANSPORT_WS, member):
            open_sockets = [
                c for c in server.connections if isinstance(c, LeanWebSocketProtocol) and not c.disconnected
            ]
            assert len(open_sockets) == 1
            assert open_sockets[0].request is None and open_sockets[0].response is None
            assert protocol_of(open_sockets[0].scope) is open_sockets[0]
            # websockets' handshake parser still holds the request (a local of its suspended frame), emptied
            handshake = open_sockets[0].conn.parser.gi_frame.f_locals.get("request")
            assert handshake is not None and not handshake.headers


class _Protocol:
    """Stands in for the server protocol under a socket's scope."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.sent: list[Any] = []

    async def send(self, message: Any) -> None:
        if self.fail:
            raise ClientDisconnected()
        self.sent.append(message)


def _adapter(protocol: _Protocol) -> tuple[WebSocketAdapter, WebSocket]:
    async def chain_send(message: Any) -> None:
        raise AssertionError("the ASGI send chain was used")

    scope = {"type": "websocket", SCOPE_KEY: weakref.ref(protocol)}
    ws = WebSocket(scope, receive=None, send=chain_send)  # type: ignore[arg-type]
    ws.application_state = WebSocketState.CONNECTED
    return WebSocketAdapter(None, ws, ws), ws  # type: ignore[arg-type]


async def test_pre_encoded_messages_go_straight_to_the_server_protocol() -> None:
    protocol = _Protocol()
    adapter, _ = _adapter(protocol)
    await adapter.send_encoded('{"type":"next"}')
    assert protocol.sent == [{"type": "websocket.send", "text": '{"type":"next"}'}]


async def test_a_client_gone_mid_send_is_a_disconnect_as_through_starlette() -> None:
    protocol = _Protocol(fail=True)  # held: the scope's reference is weak
    adapter, ws = _adapter(protocol)
    with pytest.raises(WebSocketDisconnected):
        await adapter.send_encoded("{}")
    assert ws.application_state is WebSocketState.DISCONNECTED


@pytest.mark.parametrize("length", [0, 1, 125, 126, 65535, 65536, 70_000])
def test_a_message_written_by_the_lane_is_framed_as_websockets_frames_it(length: int) -> None:
    payload = "é".encode() * (length // 2) + b"x" * (length % 2)
    assert text_frame_header(len(payload)) + payload == Frame(Opcode.TEXT, payload).serialize(mask=False, extensions=[])
