"""uvicorn's WebSocket protocol (websockets, sans-I/O) holding less for every open socket.

An idle subscription is mostly the per-socket state of the server stack.
Three items of uvicorn's were about 8 kB of each idle socket's 57 kB
(tracemalloc, 500 idle subscriptions): its receive queue (an asyncio.Queue:
three deques and an Event), the handshake's parsed request and the response
it sent (headers kept for the socket's life though never read again: the
ASGI scope has its own copy of the headers), and the `writable` Event; and
websockets' parser kept the request's headers too (2.7 kB). The protocol
below is uvicorn's own with those made lean; the wire behaviour, flow
control and ASGI events are uvicorn's.

It also puts a weak reference to itself in the socket's scope, so a message
already encoded (feedfabric.realtime.live) can be handed to its `send`
directly rather than through the ASGI send chain: Starlette's WebSocket
state checks, its exception wrapper and each middleware's send wrapper
(request ID, socket metrics) cost about a tenth of a delivered event, and
none of them acts on a data message of an accepted socket.

`serve_options()` is what every uvicorn that serves the API gets (the
`feedfabric api` and `dev` commands and the tests' servers), so they all
run the same WebSocket stack.
"""

from __future__ import annotations

import asyncio
import struct
import weakref
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

from feedfabric.realtime.mailbox import Mailbox

# Where the scope of a socket served by LeanWebSocketProtocol points back at it (a weak reference).
SCOPE_KEY = "feedfabric.websocket"


class _ReceiveQueue(Mailbox[Any]):
    """The asyncio.Queue calls uvicorn makes on its receive queue; it has one reader, the app's `receive`."""

    __slots__ = ()

    def put_nowait(self, item: Any) -> None:
        self.put(item)

    def empty(self) -> bool:
        return len(self) == 0


class _Flag:
    """asyncio.Event as uvicorn uses `writable` (set, clear, wait), with no waiter deque until one waits."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = True
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> None:
        if self._set:
            return
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if self._waiters is not None and waiter in self._waiters:
                self._waiters.remove(waiter)


class LeanWebSocketProtocol(WebSocketsSansIOProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queue = _ReceiveQueue()  # type: ignore[assignment]
        self.writable = _Flag()  # type: ignore[assignment]

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        if self.close_sent:
            return  # refused before any scope was made
        self.request = None  # never read again; the scope holds the headers
        # websockets' handshake parser keeps the request as a local of its suspended generator for the
        # socket's life (ServerProtocol.parse delegates to the frame parser from inside that frame), so
        # the request lives on regardless; its headers, the bulk of it, are only read during the
        # handshake, which accept() above has completed.
        event.headers.clear()

        # The app's own messages can come straight here (see SCOPE_KEY); a weak reference, so the
        # scope does not keep the protocol (and the protocol its scope) alive in a cycle.
        self.scope[SCOPE_KEY] = weakref.ref(self)  # type: ignore[literal-required]

    def can_send_now(self) -> bool:
        """A text message would be written by `send` without waiting (the transport is not paused) or
        failing (the socket is open and accepted), as one plain frame (no extension transforms it and
        no fragmented message is in progress), so `send_text_now` may frame it itself."""
        conn = self.conn
        return (
            self.writable.is_set()
            and self.handshake_complete
            and not self.disconnected
            and not self.close_sent
            and self.initial_response is None
            and conn.state is State.OPEN
            and not conn.extensions
            and not conn.expect_continuation_frame
        )

    def send_text_now(self, parts: tuple[bytes, ...]) -> None:
        """`send` of a text message whose UTF-8 is `parts` joined, as a plain call; only after
        `can_send_now`. The frame is what websockets' `send_text` serializes then (a server's frame is
        unmasked), made here so the parts a thousand sockets share are not copied and framed a
        thousand times over; anything websockets has queued (a pong) goes first."""
        pending = self.conn.data_to_send() if self.conn.writes else ()
        self.transport.write(b"".join((*pending, text_frame_header(sum(map(len, parts))), *parts)))

    def start_keepalive(self) -> None:
        # Called once, right after the accept's handshake response is written.
        super().start_keepalive()
        self.response = None  # the handshake response, sent


def text_frame_header(length: int) -> bytes:
    """RFC 6455 5.2: FIN and the text opcode, then the unmasked payload length in 7, 16 or 64 bits."""
    if length < 126:
        return bytes((0x81, length))
    if length < 1 << 16:
        return struct.pack("!BBH", 0x81, 126, length)
    return struct.pack("!BBQ", 0x81, 127, length)


def protocol_of(scope: Any) -> LeanWebSocketProtocol | None:
    """The server protocol under a WebSocket scope, while it is open, if it is ours."""
    ref = scope.get(SCOPE_KEY)
    return ref() if ref is not None else None  # type: ignore[no-any-return]


def serve_options() -> dict[str, Any]:
    """uvicorn options for every server of the API.

    permessage-deflate keeps a zlib compressor and decompressor per socket (~46 kB, half of an idle
    subscription's memory then) and deflates every event once per subscriber; the events are small
    JSON, so it is off (docs/benchmarks.md).
    """
    return {"ws": f"{__name__}:{LeanWebSocketProtocol.__name__}", "ws_per_message_deflate": False}
