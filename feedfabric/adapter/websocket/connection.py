"""One accepted socket's writes: a bounded send queue, and a close that never waits on the reader.

Writes go straight to the socket while it keeps up. uvicorn's send waits while
the peer's TCP window is full; a write made meanwhile (another operation's
result, a pong) joins a queue that the waiting writer drains, so no operation
waits on another's slow reader and no task is kept per socket for writing.
A caller that may not wait at all (the hub's fan-out, through a listener)
posts its frame: it joins that queue, and a short-lived task writes it.
Past `max_pending` queued frames the reader is too slow: the socket is closed
with 1013 (Try Again Later), and the client resumes with `homeTimeline(since:)`.

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

TOO_SLOW = "too slow: {} messages unsent; resubscribe with since=<last cursor>"


class Connection:
    """The socket's writer and its close; also the key the process's sessions know the socket by."""

    __slots__ = (
        "_closing",
        "_pending",
        "_sending",
        "_writer",
        "closed",
        "close_code",
        "max_pending",
        "on_close",
        "websocket",
    )

    def __init__(self, websocket: WebSocket, max_pending: int) -> None:
        self.websocket = websocket
        self.max_pending = max_pending
        self.closed = False
        self.close_code: int | None = None
        self.on_close: Callable[[], None] | None = None
        self._sending = False
        self._pending: deque[str] | None = None
        self._closing: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None

    async def send(self, text: str) -> None:
        """Writes the frame, or queues it behind a write that is waiting for the reader."""
        if self.closed:
            return
        if self._sending:
            self._queue(text)
            return
        self._sending = True
        await self._drain(text)

    def post(self, text: str) -> None:
        """`send` for a caller that may not wait: the frame is written by a task, or queued behind a write."""
        if self.closed:
            return
        if self._sending:
            self._queue(text)
            return
        self._sending = True
        self._writer = asyncio.get_running_loop().create_task(self._drain(text))

    def _queue(self, text: str) -> None:
        if self._pending is None:
            self._pending = deque()
        self._pending.append(text)
        if len(self._pending) > self.max_pending:
            self.close_soon(TRY_AGAIN_LATER, TOO_SLOW.format(len(self._pending)))

    async def _drain(self, text: str) -> None:
        try:
            await self._write(text)
            while self._pending and not self.closed:
                await self._write(self._pending.popleft())
        finally:
            self._pending = None
            self._sending = False
            self._writer = None

    async def _write(self, text: str) -> None:
        try:
            await self.websocket.send_text(text)
        except (WebSocketDisconnect, RuntimeError):  # the peer went, or a close was sent meanwhile
            self._gone()

    def _gone(self) -> None:
        if not self.closed:
            self.closed = True
            self._pending = None
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
