"""The Subscription root: homeTimeline, notificationAdded and notificationGroupUpdated over WebSocket.

get_context runs once per socket, so before each event is rendered the
context gets fresh DataLoaders (nothing cached across events), primed with
the rows the realtime consumer already hydrated for every recipient. They
are made only if the event is actually executed for this subscriber: an item
whose rendering is shared (feedfabric.schema.shared) never needs them.

A homeTimeline over a transport that writes its own frames (a LiveSink, the
WebSocket adapter's operation) is handed to a listener after its replay
(feedfabric.realtime.listener): its live items are then rendered by a
LiveRenderer and written by the fan-out, and its stream ends with HANDED_OVER.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Callable
from typing import Any

import strawberry
from graphql import ExecutionResult, execute_subscription_event

from feedfabric.core import jsonwire
from feedfabric.realtime.delivery import TimelineItem
from feedfabric.realtime.listener import Listener
from feedfabric.realtime.render import LiveSink, RenderKey, render_key
from feedfabric.resolvers import streams
from feedfabric.schema.cost import event_cost
from feedfabric.schema.errors import code_errors
from feedfabric.schema.notification_groups import NotificationGroup
from feedfabric.schema.shared import HANDED_OVER, viewer_independent
from feedfabric.schema.sharing import SAME_FOR_EVERY_VIEWER
from feedfabric.schema.types import ContextInfo, Notification, Post, post_of


@strawberry.type
class TimelineEvent:
    cursor: str = strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    item: strawberry.Private[TimelineItem]

    @strawberry.field(
        description="The new home-feed item, hydrated as the home feed would show it.", metadata=SAME_FOR_EVERY_VIEWER
    )
    async def post(self, info: ContextInfo) -> Post:
        # A resolver, so an item rendered once for many subscribers (feedfabric.schema.shared) is built once.
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
        sink = info.root_value if isinstance(info.root_value, LiveSink) else None
        listener = None if sink is None else _listener(sink)
        async for item in streams.home_timeline(ctx, since, item_cost=event_cost(info), listener=listener):
            # Loaders primed lazily: a shared rendering (feedfabric.schema.shared) never resolves a field.
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


def _listener(sink: LiveSink) -> Callable[[], Listener | None]:
    """The sink's listener for this subscription, writing the renderings of its selection: one renderer for
    every listener of a selection that reads nothing about the viewer, else a renderer of its own."""

    def listener() -> Listener | None:
        executor, sink.executor = sink.executor, None
        if executor is None:
            return None
        if not viewer_independent(executor):
            return sink.listener(LiveRenderer(executor, None))
        key = render_key(executor.operation, executor.variable_values.coerced)
        renderers = executor.live_renderers
        renderer = renderers.get(key)
        if renderer is None or renderer.operation is not executor.operation:
            renderer = renderers[key] = LiveRenderer(executor, key)
        return sink.listener(renderer)

    return listener


class LiveRenderer:
    """Renders live items of one selection (operation and variables) with the executor its subscription
    was started with, through graphql-core's public per-event execution.

    With a `key`, the selection reads nothing about the viewer: its rendering is shared (feedfabric.schema.shared)
    and one renderer serves every listener of it, with the first subscriber's executor, kept while any of
    them listens (the schema's `live_renderers` holds it weakly); whose executor it is does not show.
    Without one, the renderer is its subscriber's own, and each item is executed for that viewer: no
    Strawberry stream per subscription, and a post's shared part still completed once per version
    (feedfabric.schema.render_once)."""

    __slots__ = ("__weakref__", "executor", "key", "operation")

    def __init__(self, executor: Any, key: RenderKey | None) -> None:
        self.executor = executor
        self.operation = executor.operation
        self.key = key

    def ready(self, item: TimelineItem) -> str | None:
        return None if self.key is None else item.renders.finished_text(self.operation, self.key)

    async def render(self, item: TimelineItem) -> str | ExecutionResult:
        """The item's data as text (the shared text, if any); the result itself if it had errors."""
        executor = self.executor
        executor.context_value.reset_loaders(item.prime)
        event = TimelineEvent(cursor=str(item.post.id), item=item)
        result: Any = execute_subscription_event(executor.build_per_event_executor(event))
        if inspect.isawaitable(result):
            result = await result
        if self.key is not None and (text := item.renders.finished_text(self.operation, self.key)) is not None:
            return text
        if not result.errors and result.data is not None:
            return jsonwire.dumps_text(result.data)
        return ExecutionResult(result.data, code_errors(result.errors) if result.errors else None)
