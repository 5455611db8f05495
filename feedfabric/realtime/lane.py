"""The direct lane: the hub writes a live item to an idle subscriber's socket itself.

With every message pre-encoded (feedfabric.realtime.live), what was left of
a delivered event's cost was mostly waking the subscriber's task: the
mailbox's waiter, an event-loop turn, and the resumption of the
subscription's chain of generators (Strawberry's stream, graphql-core's
map, the resolver, the replay-then-live stream) only to find that the
message was ready and to write it. A subscriber whose task sleeps in its
mailbox has sent everything it was given before, so the hub can write the
next message for it in its place without changing the order its client sees.

So a subscription's Lane, once its selection is known to be shared (after
its first pre-encoded message) and the stream is live, lets the hub:

- send the item at once when it is already rendered for that selection,
  through the stream's own seam filter (`admit`), so what the client gets
  is what the task would have sent, byte for byte;
- else, for the first such subscriber of the selection, queue it as before:
  its task renders the item (feedfabric.schema.shared), and when it asks for
  its next item, the subscribers parked meanwhile are sent theirs;
- and park the others: the item is queued without waking their task, and
  taken back out if they are still asleep when the rendering is done (any
  other case wakes them, and they take it the ordinary way).

Anything the lane cannot do at once (a paused socket, extension results not
settled, a selection rendered per viewer, a rendering with errors) leaves the
item in the mailbox, where the task handles it as it always did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from feedfabric.realtime.render import key_of

if TYPE_CHECKING:
    from feedfabric.realtime.delivery import TimelineItem
    from feedfabric.realtime.live import LiveOperation


class Lane:
    """One subscription's direct lane; small, since every subscription has one (idle ones included).

    The hub uses it only while `key` is set: the stream is live (its `admit` is set) and the selection
    has been sent pre-encoded once (`open`)."""

    __slots__ = ("_live", "_operation", "admit", "key")

    def __init__(self, live: LiveOperation) -> None:
        self._live = live
        self._operation: Any = None
        # The rendering this subscription shares (render.key_of), once the hub may use the lane.
        self.key: tuple[int, str] | None = None
        # The stream's seam filter, set when it goes live: True (and remembered) if the item is to be sent.
        self.admit: Callable[[TimelineItem], bool] | None = None

    def open(self, operation: Any, variables: Mapping[str, Any]) -> None:
        """The operation's selection has been sent pre-encoded once: it renders once for all."""
        if self.key is None:
            self._operation, self.key = operation, key_of(operation, variables)

    def rendered(self, item: TimelineItem) -> bytes | None:
        """The item's `data` for this selection, encoded, once some subscriber has rendered it without
        errors; None before that, or if it is not shared."""
        assert self.key is not None
        return item.renders.ready_data(self._operation, self.key, self._live.encode)

    def writable(self) -> bool:
        """The message can be written now, with nothing to await (see LiveOperation.can_send_now)."""
        return self._live.can_send_now()

    def send(self, item: TimelineItem, data: bytes) -> None:
        """Writes the item's message, unless the stream's seam filter would have skipped it. Only after
        `rendered` gave `data` and `writable()` said so, while the subscriber's task sleeps."""
        assert self.admit is not None
        if self.admit(item):
            self._live.send_now(data)

    def park(self, item: TimelineItem, subscriber: Any) -> bool:
        """Parks the subscriber until the item is rendered; False if it is the first, which renders it."""
        assert self.key is not None
        return item.renders.park(self.key, subscriber)

    def unpark(self, item: TimelineItem) -> list[Any]:
        assert self.key is not None
        return item.renders.unpark(self.key)
