"""One accepted socket's writes: a bounded send queue, and a close that never waits on the reader.

Writes go straight to the socket while it keeps up. uvicorn's send waits while
the peer's TCP window is full; a write made meanwhile (another operation's
result, a pong) joins a queue that the waiting writer drains, so no operation
waits on another's slow reader and no task is kept per socket for writing.
A caller that may not wait at all (the hub's fan-out, through a listener)
posts its frame: it joins that queue, and a short-lived task writes it.
Past `max_pending` queued frames the reader is too slow: the socket is closed
with 1013 (Try Again Later), and the client resumes with `homeTimeline(since:)`.
Frames alone did not bound memory: 30 aliased feed pages make one 15 MB frame,
and a reader that never reads parked it for as long as the socket lived. So
the bytes unsent (queued, and the frame being written, which uvicorn holds
until the peer's window takes it) are bounded too, by `max_bytes`
(WS_MAX_UNSENT_BYTES): a frame that would pass it is not written, and the
socket is closed with 1013 the same way, counted in
feedfabric_realtime_dropped_subscribers_total (reason `unsent_bytes`).

A close is sent from a task of its own: the close frame itself waits for the
peer's window, and the caller (a subscription ending its own stream, the
rights sweep, a timer) must not. `on_close` ends the socket's operations.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable

from starlette.websockets import WebSocket, WebSocketDisconnect

from feedfabric.adapter.websocket.frames import TRY_AGAIN_LATER
from feedfabric.core import metrics

__all__ = ["Connection"]

DEFAULT_MAX_UNSENT_BYTES = 1_048_576
"""WS_MAX_UNSENT_BYTES's default: what a phone on a slow network (1 Mbit/s) takes in 8 s, and the size of
the largest frame a client may send."""
TOO_SLOW = "too slow: {} messages unsent; resubscribe with since=<last cursor>"
TOO_MUCH = "too slow: {:,} bytes unsent, at most {:,}; resubscribe with since=<last cursor>"


def frame_bytes(text: str) -> int:
    """The frame's size on the wire: its UTF-8 bytes (the length itself when it is ASCII, known at once)."""
    return len(text) if text.isascii() else len(text.encode())


class Connection:
    """The socket's writer and its close; also the key the process's sessions know the socket by."""

    __slots__ = (
        "_closing",
        "_pending",
        "_sending",
        "_writer",
        "_unsent",
        "closed",
        "close_code",
        "max_bytes",
        "max_pending",
        "on_close",
        "websocket",
    )

    def __init__(self, websocket: WebSocket, max_pending: int, max_bytes: int = DEFAULT_MAX_UNSENT_BYTES) -> None:
        self.websocket = websocket
        self.max_pending = max_pending
        self.max_bytes = max_bytes
        self._unsent = 0
        self.closed = False
        self.close_code: int | None = None
        self.on_close: Callable[[], None] | None = None
        self._sending = False
        self._pending: deque[tuple[str, str | None]] | None = None
        self._closing: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None

    @property
    def unsent(self) -> int:
        """Bytes queued or being written."""
        return self._unsent

    def _admit(self, text: str) -> bool:
        """Counts the frame as unsent; False (and the socket closing) when it would pass `max_bytes`."""
        size = frame_bytes(text)
        if self._unsent + size > self.max_bytes:
            metrics.DROPPED_SUBSCRIBERS.labels(reason="unsent_bytes").inc()
            self.close_soon(TRY_AGAIN_LATER, TOO_MUCH.format(self._unsent + size, self.max_bytes))
            return False
        self._unsent += size
        return True

    async def send(self, text: str, owner: str | None = None) -> None:
        """Writes the frame, or queues it behind a write that is waiting for the reader; `owner` (an
        operation's ID) may take its queued frames back (`drop`). Only this frame is written in the caller's
        task: the caller may be an operation the client completes (its task cancelled), and the frames
        queued behind belong to others, so a writer task of their own takes them on."""
        if self.closed or not self._admit(text):
            return
        if self._sending:
            self._queue(text, owner)
            return
        self._sending = True
        try:
            await self._write(text)
        finally:
            self._hand_on()

    def _hand_on(self) -> None:
        """After the caller's own write: what queued behind it goes out from a writer task."""
        if self._pending and not self.closed:
            self._writer = asyncio.get_running_loop().create_task(self._drain(self._pending.popleft()[0]))
        else:
            self._pending = None
            self._sending = False

    async def drained(self) -> None:
        """Waits until every frame admitted so far is written (or the socket closed)."""
        while self._writer is not None:
            await asyncio.wait({self._writer})

    def post(self, text: str, owner: str | None = None) -> None:
        """`send` for a caller that may not wait: the frame is written by a task, or queued behind a write."""
        if self.closed or not self._admit(text):
            return
        if self._sending:
            self._queue(text, owner)
            return
        self._sending = True
        self._writer = asyncio.get_running_loop().create_task(self._drain(text))

    def drop(self, owner: str) -> None:
        """Takes back the queued frames of `owner` (the ID of an operation the client completed, running
        or already finished: the protocol allows nothing of it to be sent once its `complete` is read). A
        frame already handed to the server's writer is past taking back."""
        if self._pending:
            kept = [(text, o) for text, o in self._pending if o != owner]
            for text, o in self._pending:
                if o == owner:
                    self._unsent = max(self._unsent - frame_bytes(text), 0)
            self._pending = deque(kept)

    def _queue(self, text: str, owner: str | None) -> None:
        if self._pending is None:
            self._pending = deque()
        self._pending.append((text, owner))
        if len(self._pending) > self.max_pending:
            self.close_soon(TRY_AGAIN_LATER, TOO_SLOW.format(len(self._pending)))

    async def _drain(self, text: str) -> None:
        try:
            await self._write(text)
            while self._pending and not self.closed:
                await self._write(self._pending.popleft()[0])
        finally:
            self._pending = None
            self._sending = False
            self._writer = None

    async def _write(self, text: str) -> None:
        try:
            await self.websocket.send_text(text)
        except (WebSocketDisconnect, RuntimeError):  # the peer went, or a close was sent meanwhile
            self._gone()
        finally:
            self._unsent = max(self._unsent - frame_bytes(text), 0)

    def _gone(self) -> None:
        if not self.closed:
            self.closed = True
            self._pending = None
            self._unsent = 0
            if self.on_close is not None:
                self.on_close()

    async def close(self, code: int, reason: str = "") -> None:
        """Closes the socket with `code` (the sessions' and the streams' way to end it)."""
        self.close_soon(code, reason)

    def close_soon(self, code: int, reason: str = "") -> None:
        if self.closed:
            return
        self.close_code = code
        self._gone()
        self._closing = asyncio.create_task(self._send_close(code, reason[:120]))

    async def _send_close(self, code: int, reason: str) -> None:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
            await self.websocket.close(code=code, reason=reason)

    async def closed_down(self) -> None:
        """Waits until the close frame went out (or the peer did)."""
        if self._closing is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._closing
