"""What a subscription yields: the replay-then-live home timeline, new notifications, changed groups.

homeTimeline(since) subscribes to the hub *before* it runs the replay query,
so a post committed meanwhile is either in the replay or queued live, never
neither; live items the replay already sent (or older than `since`, which
the client has) are dropped at the seam, and a redelivered event is dropped
by a short memory of recent IDs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from feedfabric.db import posts as posts_db
from feedfabric.feeds import paging
from feedfabric.models import Notification, NotificationGroup
from feedfabric.realtime.delivery import TimelineItem
from feedfabric.realtime.hub import Channel, Hub, Subscriber, SubscriberDropped

if TYPE_CHECKING:
    from feedfabric.context import Context, Resources

REPLAY_PAGE = 100
RECENT_IDS = 512
# Policy violation: the client read too slowly. The close reason says so and how to resume.
SLOW_CLOSE_CODE = 1008


def hub_of(resources: Resources) -> Hub:
    """The process's hub, made in the app lifespan (one per process, never module state)."""
    return resources.hub


async def home_timeline(ctx: Context, since: str | None) -> AsyncIterator[TimelineItem]:
    member = ctx.viewer.require_member()
    after = paging.cursor(since)
    hub = hub_of(ctx.resources)
    with hub.subscribe(Channel.TIMELINE, member.id) as sub:
        sent: set[uuid.UUID] = set()
        if after is not None:
            cursor = after
            while True:
                page = await posts_db.home_after(ctx.pool, member.id, cursor, REPLAY_PAGE)
                for post in page:
                    sent.add(post.id)
                    yield TimelineItem(post=post)
                if len(page) < REPLAY_PAGE:
                    break
                cursor = page[-1].id
        recent = _Recent(RECENT_IDS)

        def admit(item: TimelineItem) -> bool:
            post_id = item.post.id
            return not (post_id in sent or (after is not None and post_id <= after)) and recent.first_time(post_id)

        while True:
            item = await _next(ctx, sub)
            if admit(item):
                yield item


async def notifications(ctx: Context) -> AsyncIterator[Notification]:
    member = ctx.viewer.require_member()
    hub = hub_of(ctx.resources)
    with hub.subscribe(Channel.NOTIFICATIONS, member.id) as sub:
        recent = _Recent(RECENT_IDS)
        while True:
            row: Notification = await _next(ctx, sub)
            if recent.first_time(row.id):
                yield row


async def notification_groups(ctx: Context) -> AsyncIterator[NotificationGroup]:
    """The viewer's groups as they change. A group is sent whole each time, so a redelivered event
    only repeats its current state and needs no memory of what was sent."""
    member = ctx.viewer.require_member()
    with hub_of(ctx.resources).subscribe(Channel.NOTIFICATION_GROUPS, member.id) as sub:
        while True:
            yield await _next(ctx, sub)


class _Recent:
    """The last `size` IDs seen. A set beside the deque: `in` on a full deque compared up to
    RECENT_IDS UUIDs for every event of every subscriber. The deque is made on the first event, so an
    idle subscription holds none (even an empty deque is a 760-byte block)."""

    __slots__ = ("_order", "_seen", "_size")

    def __init__(self, size: int) -> None:
        self._order: deque[uuid.UUID] | None = None
        self._seen: set[uuid.UUID] = set()
        self._size = size

    def first_time(self, key: uuid.UUID) -> bool:
        """True, and remembered, the first time `key` is seen."""
        if key in self._seen:
            return False
        if self._order is None:
            self._order = deque()
        self._order.append(key)
        self._seen.add(key)
        if len(self._order) > self._size:
            self._seen.discard(self._order.popleft())
        return True


async def _next(ctx: Context, sub: Subscriber) -> Any:
    try:
        return await sub.next()
    except SubscriberDropped as dropped:
        await disconnect(ctx, str(dropped))
        raise


async def disconnect(ctx: Context, reason: str) -> None:
    """Closes the subscriber's socket with the reason, then waits for the protocol handler to cancel us.

    Returning instead would make the handler send `complete` on a closed socket.
    """
    close = getattr(ctx.response, "close", None)
    if close is None or not callable(close):
        return  # not a WebSocket (e.g. subscription over HTTP): the error ends the stream
    await close(code=SLOW_CLOSE_CODE, reason=reason[:120])
    await asyncio.Event().wait()
