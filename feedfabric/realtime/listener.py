"""A live homeTimeline subscription served by the fan-out itself: no task, no stream, no executor per item.

Once its replay is sent, a subscription whose selection reads nothing about
the viewer needs, per item, only an admission check (`since`, redelivery) and
a write of the bytes every such subscriber shares (feedfabric.schema.shared).
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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from feedfabric.realtime.delivery import TimelineItem

log = logging.getLogger(__name__)

TRY_AGAIN_LATER = 1013
INTERNAL_ERROR = 1011

Admit = Callable[["TimelineItem"], bool]
Ready = Callable[["TimelineItem"], "str | None"]
Render = Callable[["TimelineItem"], Awaitable[str]]


class Listener:
    """One subscription's admission, its shared bytes or rendering, and its write.

    `ready(item)` is the frame of an item whose rendering is finished, else None; `render(item)` renders it
    (or waits for the rendering in flight) and returns the frame; `write` sends a frame without waiting.
    `admit` comes from the stream that hands the subscription over (feedfabric.resolvers.streams), and
    `release` takes it off the hub.
    """

    __slots__ = ("_backlog", "_held", "_task", "admit", "end", "limit", "ready", "release", "render", "write")

    def __init__(
        self,
        ready: Ready,
        render: Render,
        write: Callable[[str], None],
        end: Callable[[int, str], None],
        limit: int,
        *,
        held: bool = False,
    ) -> None:
        self.ready = ready
        self.render = render
        self.write = write
        self.end = end
        self.limit = limit
        self.admit: Admit = _admit_all
        self.release: Callable[[str | None], None] = _nothing
        # Held items wait, in order, until `go_live` (its owner cannot write frames yet).
        self._held = held
        self._backlog: deque[TimelineItem] | None = deque() if held else None
        self._task: asyncio.Task[None] | None = None

    def offer(self, item: TimelineItem) -> None:
        if not self.admit(item):
            return
        if self._backlog is None:
            frame = self.ready(item)
            if frame is not None:
                self.write(frame)
                return
            self._backlog = deque()
        self._backlog.append(item)
        if len(self._backlog) > self.limit:
            reason = f"too slow: {self.limit} events undelivered; resubscribe with since=<last cursor>"
            self.close(reason)
            self.end(TRY_AGAIN_LATER, reason)
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
        try:
            while backlog:
                item = backlog[0]
                frame = self.ready(item) or await self.render(item)
                backlog.popleft()
                self.write(frame)
        except Exception:  # noqa: BLE001 - a rendering that failed outright ends this subscriber, nobody else's
            log.exception("live delivery failed")
            self.close("failed")
            self.end(INTERNAL_ERROR, "Internal server error")
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


def _admit_all(item: TimelineItem) -> bool:
    return True


def _nothing(dropped: str | None) -> None:
    return None
