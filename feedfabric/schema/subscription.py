"""The Subscription root: homeTimeline, notificationAdded and notificationGroupUpdated over WebSocket.

get_context runs once per socket, so before each event is rendered the
context gets fresh DataLoaders (nothing cached across events), primed with
the rows the realtime consumer already hydrated for every recipient. They
are made only if the event is actually executed for this subscriber: an item
whose rendering is shared (feedfabric.adapter.execution) never needs them.

A homeTimeline over a transport that writes its own frames (a LiveSink, the
WebSocket adapter's operation) is handed to a listener after its replay
(feedfabric.realtime.listener): its live items are then rendered by the
engine's live renderer and written by the fan-out, and its stream ends with
HANDED_OVER.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from feedfabric.realtime.item import TimelineItem
from feedfabric.realtime.listener import HANDED_OVER, LiveSink
from feedfabric.resolvers import streams
from feedfabric.schema.cost import event_cost
from feedfabric.schema.notification_groups import NotificationGroup
from feedfabric.schema.types import ContextInfo, Notification, Post, post_of
from feedfabric.schema.viewer_marks import SAME_FOR_EVERY_VIEWER

__all__ = ["TimelineEvent"]


@strawberry.type
class TimelineEvent:
    cursor: str = strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    item: strawberry.Private[TimelineItem]

    @strawberry.field(
        description="The new home-feed item, hydrated as the home feed would show it.", metadata=SAME_FOR_EVERY_VIEWER
    )
    async def post(self, info: ContextInfo) -> Post:
        # A resolver, so an item rendered once for many subscribers (feedfabric.adapter.execution) is built once.
        return await post_of(info.context, self.item.post)


@strawberry.type
class Subscription:
    @strawberry.subscription(
        metadata=SAME_FOR_EVERY_VIEWER,
        description=(
            "New items for the viewer's home feed, as soon as they are posted. With\n"
            "`since` (a home-feed cursor), the visible items newer than it are sent\n"
            "first, oldest first, then live ones: a client that reconnects misses nothing\n"
            "and sees nothing twice. A `since` with more than "
            f"{streams.REPLAY_MAX} items newer than it is\n"
            "refused with BAD_USER_INPUT before anything is sent: reload the feed with\n"
            "`homeFeed`, then subscribe with the newest cursor it returned."
        ),
    )
    async def home_timeline(self, info: ContextInfo, since: str | None = None) -> AsyncGenerator[TimelineEvent, None]:
        ctx = info.context
        listener = info.root_value.live_listener if isinstance(info.root_value, LiveSink) else None
        async for item in streams.home_timeline(ctx, since, item_cost=event_cost(info), listener=listener):
            # Loaders primed lazily: a shared rendering (feedfabric.adapter.execution) never resolves a field.
            ctx.reset_loaders(item.prime)
            yield TimelineEvent(cursor=str(item.post.id), item=item)
        yield HANDED_OVER  # reached only when a listener took the live items

    @strawberry.subscription
    async def notification_added(self, info: ContextInfo) -> AsyncGenerator[Notification, None]:
        ctx = info.context
        async for row in streams.notifications(ctx):
            ctx.reset_loaders()
            yield Notification(row=row)

    @strawberry.subscription(description="The viewer's group, each time a notification joins or creates it.")
    async def notification_group_updated(self, info: ContextInfo) -> AsyncGenerator[NotificationGroup, None]:
        ctx = info.context
        async for group in streams.notification_groups(ctx):
            ctx.reset_loaders()
            yield NotificationGroup(row=group)
