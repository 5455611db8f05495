"""The in-process registry of live subscribers: which members are connected to this API process.

The realtime consumer publishes into it. A subscriber is one of two kinds.
Most live homeTimeline subscriptions are listeners (feedfabric.realtime.listener):
the item is handed to the listener on the spot, which writes the shared bytes
itself. The others drain their own bounded inbox in their own task, which
executes the item through the schema's stream. Publishing never awaits a
socket, so one slow socket cannot hold up the consumer or anyone else: a
subscriber whose inbox is full is dropped on the spot (its inbox emptied, so
memory stays bounded) and told why; the subscription then closes its socket
with that reason and the client resumes from its last cursor.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from feedfabric.core import metrics
from feedfabric.realtime.listener import Listener
from feedfabric.realtime.mailbox import Mailbox

__all__ = ["Channel", "Hub", "Subscriber", "SubscriberDropped"]

DEFAULT_QUEUE_SIZE = 256
# Members handed an item between two turns of the event loop during a fan-out.
PUBLISH_BATCH = 64


class Channel(Enum):
    TIMELINE = "timeline"
    NOTIFICATIONS = "notifications"
    NOTIFICATION_GROUPS = "notification_groups"


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
    listener: Listener | None = None

    async def next(self) -> Any:
        item = await self.queue.get()
        if isinstance(item, _Dropped):
            raise SubscriberDropped(item.reason)
        return item


@dataclass
class HubStats:
    published: int = 0
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
        members = self._subs[sub.channel]
        subs = members.get(sub.member_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del members[sub.member_id]

    @contextmanager
    def subscribe(self, channel: Channel, member_id: uuid.UUID) -> Iterator[Subscriber]:
        """The subscriber, on the hub until the block ends, unless it became a listener (which the
        listener's owner takes off with `Listener.close`)."""
        sub = self.add(channel, member_id)
        try:
            yield sub
        finally:
            if sub.listener is None:
                self.remove(sub)

    def listen(self, sub: Subscriber, listener: Listener) -> None:
        """From now on `listener` takes the subscriber's items as they are published, starting with those
        its inbox holds, in order."""
        sub.listener = listener
        listener.release = lambda reason: self._release(sub, reason)
        for item in sub.queue.drain():
            listener.offer(item)

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
            if sub.listener is not None:
                sub.listener.offer(item)
                delivered += 1
                continue
            if len(sub.queue) >= self.queue_size:
                self._drop(sub, f"too slow: {self.queue_size} events undelivered; resubscribe with since=<last cursor>")
                continue
            sub.queue.put(item)
            delivered += 1
        self.stats.published += delivered
        return delivered

    async def publish_many(self, channel: Channel, member_ids: Iterable[uuid.UUID], item: Any) -> int:
        """`publish` to each member, yielding to the event loop now and then: the first subscribers of a
        large fan-out start rendering (for everyone with their selection, feedfabric.adapter.execution)
        while the rest are being handed the item."""
        delivered = 0
        for count, member_id in enumerate(member_ids, 1):
            delivered += self.publish(channel, member_id, item)
            if count % PUBLISH_BATCH == 0:
                await asyncio.sleep(0)
        return delivered

    def _drop(self, sub: Subscriber, reason: str) -> None:
        self.remove(sub)
        sub.dropped = reason
        sub.queue.clear()
        sub.queue.put(_Dropped(reason))
        self._count_drop(reason)

    def _release(self, sub: Subscriber, dropped: str | None) -> None:
        """A listener's subscriber off the hub: its operation ended, or (`dropped`) it was cut off."""
        self.remove(sub)
        if dropped is not None:
            self._count_drop(dropped)

    def _count_drop(self, reason: str) -> None:
        self.stats.dropped_subscribers += 1
        metrics.DROPPED_SUBSCRIBERS.labels(reason="slow" if reason.startswith("too slow") else "other").inc()
