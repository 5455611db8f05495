"""Live homeTimeline items rendered for a listener, with the executor their subscription was started with.

A subscription handed to a listener (feedfabric.realtime.listener) keeps no
Strawberry stream: each live item is executed through graphql-core's public
per-event execution (`build_per_event_executor`, `execute_subscription_event`)
with the subscription's own executor, and the listener writes the text. A selection
that reads nothing about the viewer is rendered once for all its listeners; one
that reads only the item's `viewerHasLiked`, once per value of it (LikedRenderer).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Protocol, cast
from weakref import WeakValueDictionary

from graphql import ExecutionResult, execute_subscription_event
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from feedfabric.adapter.execution.independent import liked_only, viewer_independent
from feedfabric.adapter.execution.marks import FieldMarks
from feedfabric.adapter.execution.renderings import RenderKey, SharedRenders, liked_key, render_key
from feedfabric.core import jsonwire
from feedfabric.realtime.item import TimelineItem
from feedfabric.schema.errors import code_errors
from feedfabric.schema.subscription import TimelineEvent


class LiveRendering(Protocol):
    """A live selection's renderings, as a listener's transport asks for them."""

    def ready(self, item: TimelineItem) -> str | None:
        """The data's text of the item's finished shared rendering, else None."""
        ...

    async def render(self, item: TimelineItem) -> str | ExecutionResult:
        """Executes the item (sharing the rendering) and gives that text, or the result itself when it is not
        shared (it had errors)."""
        ...


class LiveRenderer:
    """Renders live items of one selection (operation and variables) with the executor its subscription
    was started with, through graphql-core's public per-event execution.

    With a `key`, the selection reads nothing about the viewer: its rendering is shared (SharedRenders)
    and one renderer serves every listener of it, with the first subscriber's executor, kept while any of
    them listens (the engine's `live_renderers` holds it weakly); whose executor it is does not show.
    Without one, the renderer is its subscriber's own, and each item is executed for that viewer: no
    Strawberry stream per subscription, and a post's shared part still completed once per version
    (feedfabric.adapter.execution.render_once)."""

    __slots__ = ("__weakref__", "executor", "key", "operation")

    def __init__(self, executor: StrawberryGraphQLCoreExecutionContext, key: RenderKey | None) -> None:
        self.executor = executor
        self.operation = executor.operation
        self.key = key

    def ready(self, item: TimelineItem) -> str | None:
        return None if self.key is None else SharedRenders.of(item).finished_text(self.operation, self.key)

    async def render(self, item: TimelineItem) -> str | ExecutionResult:
        """The item's data as text (the shared text, if any); the result itself if it had errors. A shared
        rendering under way is waited for, not joined through the executor: its context's loaders are the
        rendering's own until it is done."""
        if self.key is not None:
            renders = SharedRenders.of(item)
            rendering = renders.in_flight(self.operation, self.key)
            if rendering is not None:
                await asyncio.shield(rendering)
                text = renders.finished_text(self.operation, self.key)
                if text is not None:
                    return text
        result = await self.execute(item)
        if self.key is not None:
            text = SharedRenders.of(item).finished_text(self.operation, self.key)
            if text is not None:
                return text
        return _as_sent(result)

    async def execute(self, item: TimelineItem) -> ExecutionResult:
        """The item executed with this renderer's executor, its loaders fresh and primed (TimelineItem.prime)."""
        executor = self.executor
        executor.context_value.reset_loaders(item.prime)
        event = TimelineEvent(cursor=str(item.post.id), item=item)
        result: Any = execute_subscription_event(executor.build_per_event_executor(event))
        if inspect.isawaitable(result):
            result = await result
        return cast("ExecutionResult", result)


class LikedRenderer(LiveRenderer):
    """A subscriber's own renderer of a selection that reads about the viewer nothing but the live item's
    `viewerHasLiked` (independent.liked_only), splitting the item's recipients in two.

    The delivery read who of them likes the post in one statement (TimelineItem.viewer_liked), so the
    item's rendering depends on the subscriber only through that value: it is rendered once per value, by
    the first subscriber with it (with their own executor, exactly as their own execution would be), kept
    on the item under `liked_key`, and every other subscriber with the same value writes that text, as a
    shared selection's subscribers do. An item whose likers were not read is executed for this viewer."""

    __slots__ = ("keys", "member")

    def __init__(self, executor: StrawberryGraphQLCoreExecutionContext, key: RenderKey, member: int) -> None:
        super().__init__(executor, None)
        self.keys = (liked_key(key, False), liked_key(key, True))
        self.member = member

    def ready(self, item: TimelineItem) -> str | None:
        liked = item.viewer_liked(self.member)
        return None if liked is None else SharedRenders.of(item).finished_text(self.operation, self.keys[liked])

    async def render(self, item: TimelineItem) -> str | ExecutionResult:
        liked = item.viewer_liked(self.member)
        if liked is None:
            return await super().render(item)
        key = self.keys[liked]
        renders = SharedRenders.of(item)
        result: Any = renders.render_keyed(self.operation, key, lambda: self.execute(item))
        if inspect.isawaitable(result):
            result = await result
        text = renders.finished_text(self.operation, key)
        return text if text is not None else _as_sent(result)


def _as_sent(result: ExecutionResult) -> str | ExecutionResult:
    """An error-free result's data as text, else the result with its errors coded."""
    if not result.errors and result.data is not None:
        return jsonwire.dumps_text(result.data)
    return ExecutionResult(result.data, code_errors(result.errors) if result.errors else None)


def live_rendering(
    executor: StrawberryGraphQLCoreExecutionContext,
    marks: FieldMarks,
    renderers: WeakValueDictionary[RenderKey, LiveRenderer],
) -> LiveRendering:
    """The renderer of this subscription's selection: one for every listener of a selection that reads
    nothing about the viewer (kept in `renderers` while any listens); one of its own sharing its renderings
    by `viewerHasLiked` for a selection that reads nothing else about the viewer; else one of its own."""
    if not viewer_independent(executor, marks):
        member = executor.context_value.viewer_result.viewer.member
        if member is not None and liked_only(executor, marks):
            key = render_key(executor.operation, executor.variable_values.coerced)
            return LikedRenderer(executor, key, member.id.int)
        return LiveRenderer(executor, None)
    key = render_key(executor.operation, executor.variable_values.coerced)
    renderer = renderers.get(key)
    if renderer is None or renderer.operation is not executor.operation:
        renderer = renderers[key] = LiveRenderer(executor, key)
    return renderer
