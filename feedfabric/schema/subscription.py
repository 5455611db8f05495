"""The Subscription root: homeTimeline and notificationAdded over WebSocket.

get_context runs once per socket, so before each event is rendered the
context gets fresh DataLoaders (nothing cached across events), primed with
the rows the realtime consumer already hydrated for every recipient. They
are made only if the event is actually executed for this subscriber: an item
whose rendering is shared (feedfabric.schema.shared) never needs them, and
on a socket such an item is not executed at all but sent pre-encoded
(feedfabric.realtime.live).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from feedfabric.realtime import streams
from feedfabric.realtime.delivery import TimelineItem
from feedfabric.realtime.lane import Lane
from feedfabric.realtime.live import LIVE_OPERATION, send_shared
from feedfabric.schema.types import ContextInfo, Notification, Post


@strawberry.type
class TimelineEvent:
    post: Post = strawberry.field(description="The new home-feed item, hydrated as the home feed would show it.")
    cursor: str
    item: strawberry.Private[TimelineItem]


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description=(
            "New items for the viewer's home feed, as soon as they are posted. With\n"
            "`since` (a home-feed cursor), the visible items newer than it are sent\n"
            "first, oldest first, then live ones: a client that reconnects misses nothing\n"
            "and sees nothing twice."
        )
    )
    async def home_timeline(self, info: ContextInfo, since: str | None = None) -> AsyncGenerator[TimelineEvent, None]:
        ctx = info.context
        live = LIVE_OPERATION.get()
        lane = Lane(live) if live is not None else None
        async for item in streams.home_timeline(ctx, since, lane):
            if await send_shared(live, item.renders, info.operation, info.variable_values):
                if lane is not None:
                    lane.open(info.operation, info.variable_values)  # the hub may send the next ones itself
                continue  # another subscriber's rendering, sent pre-encoded (feedfabric.realtime.live)
            ctx.reset_loaders(item.prime)
            yield TimelineEvent(post=Post(row=item.post), cursor=str(item.post.id), item=item)
            if lane is not None and lane.key is None and item.renders.shared(info.operation, info.variable_values):
                await live.settle()  # type: ignore[union-attr]
                lane.open(info.operation, info.variable_values)  # this subscriber rendered it for all

    @strawberry.subscription
    async def notification_added(self, info: ContextInfo) -> AsyncGenerator[Notification, None]:
        ctx = info.context
        async for row in streams.notifications(ctx):
            ctx.reset_loaders()
            yield Notification(row=row)
