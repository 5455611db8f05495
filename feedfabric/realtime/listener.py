"""A live homeTimeline subscription served by the fan-out itself: no task, no stream, no executor per item.

Once its replay is sent, a subscription whose selection reads nothing about
the viewer needs, per item, only an admission check (`since`, redelivery) and
a write of the bytes every such subscriber shares (feedfabric.adapter.execution).
The hub hands the item to `offer`, which does both on the spot when the
item's rendering is finished, the common case for every subscriber after the
first few of a post. Otherwise the item waits in a backlog, in order, that
one short-lived task renders (sharing the rendering with the other
subscribers of the selection) and writes. Past `limit` waiting items the
subscriber is too slow and `end` closes its socket with 1013, as the hub does
for a subscriber's full inbox; the client resumes with `since:`.

Writes never wait on the reader: `write` queues behind a write in progress
(the adapter's Connection.post), so one slow socket holds up nobody.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from feedfabric.realtime.item import TimelineItem

__all__ = ["HANDED_OVER", "INTERNAL_ERROR", "TRY_AGAIN_LATER", "Listener", "LiveSink"]

log = logging.getLogger(__name__)

TRY_AGAIN_LATER = 1013
INTERNAL_ERROR = 1011


class Frames(Protocol):
    """A listener's transport: an item's frame, and the socket's writes and close."""

    limit: int  # items a listener may hold back before its subscriber is too slow

    def ready(self, item: TimelineItem) -> str | None:
        """The item's frame when its shared rendering is finished, else None."""
        ...

    async def render(self, item: TimelineItem) -> str:
        """The item's frame, rendering it (or waiting for the rendering in flight)."""
        ...

    def write(self, frame: str) -> None:
        """Sends the frame without waiting (queued behind a write in progress)."""
        ...

    def end(self, code: int, reason: str) -> None:
        """Closes the socket."""
        ...


class Listener:
    """One subscription's admission and its frames' writes. `admit` comes from the stream that hands the
    subscription over (feedfabric.resolvers.streams), and `release` takes it off the hub."""

    __slots__ = ("_backlog", "_held", "_task", "admit", "frames", "release")

    def __init__(self, frames: Frames, *, held: bool = False) -> None:
        self.frames = frames
        self.admit: Callable[[TimelineItem], bool] = _admit_all
        self.release: Callable[[str | None], None] = _nothing
        # Held items wait, in order, until `go_live` (its owner cannot write frames yet).
        self._held = held
        self._backlog: deque[TimelineItem] | None = deque() if held else None
        self._task: asyncio.Task[None] | None = None

    def offer(self, item: TimelineItem) -> None:
        if not self.admit(item):
            return
        if self._backlog is None:
            frame = self.frames.ready(item)
            if frame is not None:
                self.frames.write(frame)
                return
            self._backlog = deque()
        self._backlog.append(item)
        limit = self.frames.limit
        if len(self._backlog) > limit:
            reason = f"too slow: {limit} events undelivered; resubscribe with since=<last cursor>"
            self.close(reason)
            self.frames.end(TRY_AGAIN_LATER, reason)
        elif self._task is None and not self._held:
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def go_live(self) -> None:
        """Writes the held items, then every item as it comes."""
        self._held = False
        if self._backlog is not None and self._task is None:
            if self._backlog:
                self._task = asyncio.get_running_loop().create_task(self._drain())
            else:
                self._backlog = None

    async def _drain(self) -> None:
        backlog = self._backlog
        frames = self.frames
        try:
            while backlog:
                item = backlog[0]
                frame = frames.ready(item) or await frames.render(item)
                backlog.popleft()
                frames.write(frame)
        except Exception:  # noqa: BLE001 - a rendering that failed outright ends this subscriber, nobody else's
            log.exception("live delivery failed")
            self.close("failed")
            frames.end(INTERNAL_ERROR, "Internal server error")
        finally:
            if self._backlog is backlog:
                self._backlog = None
                self._task = None

    def close(self, dropped: str | None = None) -> None:
        """Off the hub, its backlog dropped and its rendering cancelled: the operation ended, or its socket,
        or (`dropped`, the reason) the subscriber was cut off."""
        release, self.release = self.release, _nothing
        release(dropped)
        self._backlog = None
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()


@runtime_checkable
class LiveSink(Protocol):
    """A subscription's root value whose live items a listener may write (the WebSocket adapter's operation):
    the homeTimeline resolver hands its live items over when `live_listener` gives a listener."""

    def live_listener(self) -> Listener | None:
        """A listener writing this subscription's live items, at most once; None when none can be made."""
        ...


HANDED_OVER: Any = object()
"""The last event of a subscription stream whose live items a listener took: it executes to a result with no
data, which carries the operation's extensions to the transport, and it is never sent."""


def _admit_all(item: TimelineItem) -> bool:
    return True


def _nothing(dropped: str | None) -> None:
    return None
