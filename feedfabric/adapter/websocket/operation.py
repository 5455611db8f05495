"""One operation of a socket, and the frames a listener writes for it (feedfabric.realtime.listener).

A live homeTimeline keeps neither a task nor a stream once its replay is sent
(feedfabric.schema.subscription hands it to a listener): its operation is
what remains, and every frame of it is the same text around the item's data,
split once when the stream's last result brings the operation's extensions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from feedfabric.adapter.execution.live import LiveRendering
from feedfabric.adapter.websocket import frames
from feedfabric.adapter.websocket.connection import Connection
from feedfabric.adapter.websocket.frames import Extensions, result_payload
from feedfabric.core import jsonwire
from feedfabric.realtime.item import TimelineItem
from feedfabric.realtime.listener import Listener

__all__ = ["Operation"]

DATA = '{"data":'  # how every payload opens: a frame's head ends with it


class Operation:
    """One running operation of a socket: its id (as JSON, for splicing), its task, and the text of its
    results' extensions. It is the operation's root value too: a LiveSink (feedfabric.realtime.listener),
    whose live homeTimeline items a listener may write, with this operation as its frames
    (feedfabric.realtime.listener.Frames), rendered as the engine said when it built the subscription
    (a LiveRoot: feedfabric.adapter.execution.subscriptions)."""

    __slots__ = (
        "conn",
        "extensions",
        "frame",
        "head",
        "id",
        "id_json",
        "limit",
        "live",
        "live_rendering",
        "rendering",
        "tail",
        "task",
    )
    listeners = 0  # operations of this process handed to a listener (a statistic)

    def __init__(self, operation_id: str, frame: Callable[[Operation, str], str] | None = None) -> None:
        self.id = operation_id
        self.id_json = frames.id_text(operation_id)
        self.task: asyncio.Task[None] | None = None
        self.extensions = Extensions()
        self.frame = frame
        self.conn: Connection | None = None
        self.limit = 0
        # How the engine renders this subscription's live items, set when it builds the subscription.
        self.live_rendering: Callable[[], LiveRendering] | None = None
        self.live: Listener | None = None
        self.rendering: LiveRendering | None = None
        self.head = self.tail = ""

    def live_listener(self) -> Listener | None:
        """A listener writing this subscription's live items, rendered as the engine said (once)."""
        make, self.live_rendering = self.live_rendering, None
        return None if make is None else self.listener(make())

    def listener(self, rendering: LiveRendering) -> Listener:
        """A listener writing this operation's frames. It holds its items until `go_live`: the frames'
        extensions are known when the stream's last result arrives."""
        self.rendering = rendering
        self.live = Listener(self, held=True)
        Operation.listeners += 1
        return self.live

    def go_live(self, extensions: dict[str, object] | None) -> None:
        assert self.live is not None and self.frame is not None
        ext = self.extensions.encode(extensions) if extensions else ""
        self.extensions.clear()
        # Each frame is the same text around the data: split once at a character JSON never leaves raw.
        self.head, self.tail = self.frame(self, DATA + "\x00" + (',"extensions":' + ext if ext else "") + "}").split(
            "\x00"
        )
        self.task = None
        self.live.go_live()

    def ready(self, item: TimelineItem) -> str | None:
        assert self.rendering is not None
        data = self.rendering.ready(item)
        return None if data is None else self.head + data + self.tail

    async def render(self, item: TimelineItem) -> str:
        assert self.rendering is not None
        rendered = await self.rendering.render(item)
        if isinstance(rendered, str):
            return self.head + rendered + self.tail
        # A result with errors: the same text around its members (`{"data":null,"errors":[...]`, unclosed).
        return self.head.removesuffix(DATA) + jsonwire.dumps_text(result_payload(rendered))[:-1] + self.tail

    def write(self, frame: str) -> None:
        assert self.conn is not None
        self.conn.post(frame, self.id)

    def end(self, code: int, reason: str) -> None:
        assert self.conn is not None
        self.conn.close_soon(code, reason)

    def finish(self, dropped: str | None = None) -> None:
        """Ends the operation: its listener (`dropped`: cut off, the reason) or its task."""
        if self.live is not None:
            self.live.close(dropped)
        if self.task is not None:
            self.task.cancel()
