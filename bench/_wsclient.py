"""A light WebSocket subscriber for the benchmarks: websockets' own client protocol on a bare asyncio transport.

The realtime benchmark runs 1,000 subscribers in one Python process on the
same two cores as the API. With websockets' asyncio client, each received
message costs a reader task wake-up, a UTF-8 decode and the assembler's
bookkeeping before the benchmark even sees it, so the clients' own queueing
showed up in the measured latency. Here the sans-I/O ClientProtocol (the
same framing, masking and handshake code) is fed straight from
`data_received`, and each complete text frame is handed to a callback with
the time it was parsed: no task per socket, no per-message wake-up. It is
still a real client on a real TCP connection; the server cannot tell.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

OnMessage = Callable[[bytes, float], None]


class Subscriber(asyncio.Protocol):
    """One socket. `messages` collects text frames until `on_message` is set; then each goes there."""

    def __init__(self, url: str, subprotocol: str) -> None:
        self.proto = ClientProtocol(parse_uri(url), subprotocols=[Subprotocol(subprotocol)], max_size=None)
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.messages: asyncio.Queue[bytes] = asyncio.Queue()
        self.on_message: OnMessage | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.proto.send_request(self.proto.connect())
        self._flush()

    def data_received(self, data: bytes) -> None:
        self.proto.receive_data(data)
        for event in self.proto.events_received():
            if isinstance(event, Response):
                if event.status_code == 101 and self.proto.handshake_exc is None:
                    self.opened.set_result(None)
                else:
                    self.opened.set_exception(ConnectionError(f"handshake refused: {event.status_code}"))
            elif isinstance(event, Frame) and event.opcode is Opcode.TEXT:
                if self.on_message is not None:
                    self.on_message(event.data, time.monotonic())
                else:
                    self.messages.put_nowait(event.data)
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_exception(exc or ConnectionError("closed during the handshake"))
        if not self.closed.done():
            self.closed.set_result(None)

    def send_text(self, text: str) -> None:
        self.proto.send_text(text.encode())
        self._flush()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.proto.send_close(1000)
            self._flush()
            self.transport.close()

    def _flush(self) -> None:
        assert self.transport is not None
        for data in self.proto.data_to_send():
            if data:
                self.transport.write(data)
            elif self.transport.can_write_eof():
                self.transport.write_eof()


async def connect(url: str, subprotocol: str, host: str, port: int) -> Subscriber:
    _, subscriber = await asyncio.get_running_loop().create_connection(lambda: Subscriber(url, subprotocol), host, port)
    await asyncio.wait_for(subscriber.opened, 30)
    return subscriber
