"""The lean per-socket pieces: the subscriber inbox, and uvicorn's WebSocket protocol with less state."""

from __future__ import annotations

import asyncio

import pytest

from feedfabric.realtime.mailbox import Mailbox
from feedfabric.realtime.wsprotocol import LeanWebSocketProtocol, _Flag
from feedfabric.settings import Settings
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
            open_sockets = [c for c in server.connections if isinstance(c, LeanWebSocketProtocol) and not c.disconnected]
            assert len(open_sockets) == 1
            assert open_sockets[0].request is None and open_sockets[0].response is None
            # websockets' handshake parser still holds the request (a local of its suspended frame), emptied
            handshake = open_sockets[0].conn.parser.gi_frame.f_locals.get("request")
            assert handshake is not None and not handshake.headers
