"""The in-process registry of live subscribers: which members are connected to this API process.

The realtime consumer publishes into it; each subscription drains its own
bounded queue, except that an idle subscriber's already rendered item is
written to its socket by the hub itself (feedfabric.realtime.lane).
Publishing never awaits a socket, so one slow socket cannot hold up the
consumer or anyone else: a subscriber whose queue is full is dropped on the
spot (its queue emptied, so memory stays bounded) and told why; the
subscription then closes its socket with that reason and the client resumes
from its last cursor.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import Any

from feedfabric import metrics
from feedfabric.realtime.mailbox import Mailbox

log = logging.getLogger(__name__)

DEFAULT_QUEUE_SIZE = 256


class Channel(Enum):
    TIMELINE = "timeline"
    NOTIFICATIONS = "notifications"


class SubscriberDropped(Exception):
    """The subscriber fell too far behind and was disconnected; `str()` is the reason the client gets."""


@dataclass(frozen=True)
class _Dropped:
    reason: str


@dataclass(eq=False)
class Subscriber:
    channel: Channel
    member_id: uuid.UUID
    queue: Mailbox[Any] = field(default_factory=Mailbox)
    dropped: str | None = None
    # Set by a live timeline stream whose items the hub may write itself (feedfabric.realtime.lane).
    lane: Any = None
    # While this subscriber renders an item others are parked on: sends it to them. Called when it
    # asks for its next item (it is done with this one) or leaves.
    release: Callable[[], None] | None = None

    def let_go(self) -> None:
        release, self.release = self.release, None
        if release is not None:
            release()

    async def next(self) -> Any:
        self.let_go()
        item = await self.queue.get()
        if isinstance(item, _Dropped):
            raise SubscriberDropped(item.reason)
        return item


@dataclass
class HubStats:
    published: int = 0
    direct: int = 0  # of them, written by the hub itself (feedfabric.realtime.lane)
    renderers: int = 0  # subscribers woken to render an item for the others of their selection
    dropped_subscribers: int = 0


@dataclass
class Hub:
    queue_size: int = DEFAULT_QUEUE_SIZE
    stats: HubStats = field(default_factory=HubStats)
    _subs: dict[Channel, dict[uuid.UUID, set[Subscriber]]] = field(default_factory=lambda: {c: {} for c in Channel})

    def add(self, channel: Channel, member_id: uuid.UUID) -> Subscriber:
        sub = Subscriber(channel, member_id)
        self._subs[channel].setdefault(member_id, set()).add(sub)
        return sub

    def remove(self, sub: Subscriber) -> None:
        sub.lane = None
        sub.let_go()
        members = self._subs[sub.channel]
        subs = members.get(sub.member_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del members[sub.member_id]

    @contextmanager
    def subscribe(self, channel: Channel, member_id: uuid.UUID) -> Iterator[Subscriber]:
        sub = self.add(channel, member_id)
        try:
            yield sub
        finally:
            self.remove(sub)

    def connected(self, channel: Channel) -> list[uuid.UUID]:
        """Members with at least one live subscriber on this channel (the consumer queries only among them)."""
        return list(self._subs[channel])

    def is_connected(self, channel: Channel, member_id: uuid.UUID) -> bool:
        return member_id in self._subs[channel]

    def subscriber_count(self, channel: Channel | None = None) -> int:
        channels = [channel] if channel else list(Channel)
        return sum(len(s) for c in channels for s in self._subs[c].values())

    def publish(self, channel: Channel, member_id: uuid.UUID, item: Any) -> int:
        """Queues `item` for every subscriber of the member on the channel; returns how many got it."""
        subs = self._subs[channel].get(member_id)
        if not subs:
            return 0
        delivered = 0
        for sub in list(subs):
            if len(sub.queue) >= self.queue_size:
                self._drop(sub, f"too slow: {self.queue_size} events undelivered; resubscribe with since=<last cursor>")
                continue
            self._hand(sub, item)
            delivered += 1
        self.stats.published += delivered
        return delivered

    async def publish_many(self, channel: Channel, member_ids: Iterable[uuid.UUID], item: Any) -> int:
        """`publish` to each member. When one of them was woken to render the item for the others
        (feedfabric.realtime.lane), it gets its turn right away: the rest then find the item rendered
        and are written at once, rather than parked until every recipient has been handed it."""
        delivered = 0
        for member_id in member_ids:
            renderers = self.stats.renderers
            delivered += self.publish(channel, member_id, item)
            if self.stats.renderers != renderers:
                await asyncio.sleep(0)
        return delivered

    def _hand(self, sub: Subscriber, item: Any) -> None:
        """Queues the item, or writes it past the subscriber's sleeping task (feedfabric.realtime.lane).

        This runs for every recipient of every item, so the common cases come first and cheaply:
        no lane; a lane and the item rendered; the item not rendered yet, when the first subscriber
        is woken to render it and the rest are parked (checked for being writable when sent).
        """
        queue = sub.queue
        lane = sub.lane
        if lane is None or lane.key is None or not queue.idle():
            queue.put(item)
            return
        data = lane.rendered(item)
        if data is not None:
            if lane.writable():
                self._write(sub, lane, item, data)
            else:
                queue.put(item)
        elif lane.park(item, sub):
            queue.put(item, wake=False)
        else:
            sub.release = partial(self._unpark, lane, item)
            self.stats.renderers += 1
            queue.put(item)

    def _unpark(self, lane: Any, item: Any) -> None:
        """The item's first subscriber is done with it: the parked ones are sent it if it was rendered
        for them and they still sleep; otherwise they are woken and take it as usual."""
        for sub in lane.unpark(item):
            other, queue = sub.lane, sub.queue
            data = other.rendered(item) if other is not None and queue.waiting_on(item) else None
            if data is not None and other.writable():
                queue.clear()
                self._write(sub, other, item, data)
            else:
                queue.wake()

    def _write(self, sub: Subscriber, lane: Any, item: Any, data: bytes) -> None:
        """One socket's write, which must not cost the other recipients theirs: a socket that fails it is
        broken, so the subscriber is dropped (its task closes the socket) and the client resumes from its
        last cursor, as after any disconnect."""
        try:
            lane.send(item, data)
        except Exception as error:  # noqa: BLE001 - one subscriber's socket, not the delivery
            log.warning("realtime: writing to a subscriber's socket failed (%s); dropping it", type(error).__name__)
            self._drop(sub, "the connection failed; resubscribe with since=<last cursor>")
            return
        self.stats.direct += 1

    def _drop(self, sub: Subscriber, reason: str) -> None:
        self.remove(sub)
        sub.dropped = reason
        sub.queue.clear()
        sub.queue.put(_Dropped(reason))
        self.stats.dropped_subscribers += 1
        metrics.DROPPED_SUBSCRIBERS.labels(reason="slow" if reason.startswith("too slow") else "other").inc()
