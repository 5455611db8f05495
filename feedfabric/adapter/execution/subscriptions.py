"""Subscription events rendered once for every subscriber whose selection reads nothing about the viewer.

A new post reaches every connected follower as the same TimelineItem.
Executed per subscriber, each copy costs a full GraphQL execution, so a
post to a thousand followers would cost a thousand. Most selections (id,
content, the author's name, counts, media) read nothing about the viewer,
so the first subscriber's result is kept on the item, keyed by the
operation and its variables, and every later subscriber with the same
selection gets that result. A selection is shared only when every field it
reaches is marked SAME_FOR_EVERY_VIEWER where it is declared
(feedfabric.schema.viewer_marks, read through FieldMarks); `viewerHasLiked`,
`viewerFollows`, `repostOf` (whose visibility is the viewer's) and any
unmarked field make it per subscriber. Only results without errors are shared.

The hook is graphql-core's `execute_operation`, through Strawberry's
`execution_context_class` option. A subscription whose root value takes live
renderings (a LiveRoot: the WebSocket adapter's operation) is given, when
graphql-core's public `Executor.build` makes its executor, the way to render
its live items with that executor (feedfabric.adapter.execution.live): a
listener renders them after the stream has ended, and HANDED_OVER, the
stream's last event, executes to nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Protocol, runtime_checkable
from weakref import WeakValueDictionary

from graphql import ExecutionResult, OperationType
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from feedfabric.adapter.execution.independent import viewer_independent
from feedfabric.adapter.execution.live import LiveRenderer, LiveRendering, live_rendering
from feedfabric.adapter.execution.marks import FieldMarks
from feedfabric.adapter.execution.renderings import RenderKey, SharedRenders
from feedfabric.realtime.item import TimelineItem
from feedfabric.realtime.listener import HANDED_OVER

__all__ = ["SharedRenderingExecutionContext"]


@runtime_checkable
class LiveRoot(Protocol):
    """A subscription's root value that takes the way to render its live items (the WebSocket adapter's
    operation): set when the subscription's executor is built, taken at most once."""

    live_rendering: Callable[[], LiveRendering] | None


class SharedRenderingExecutionContext(StrawberryGraphQLCoreExecutionContext):
    """Strawberry's execution context, except that a subscription event carrying a TimelineItem is
    executed once per viewer-independent selection and its result reused for the other subscribers.

    `marks` is the served schema's, and `live_renderers` its live selections' shared renderers, by render
    key (feedfabric.adapter.execution.engine makes one subclass per schema)."""

    marks: FieldMarks
    live_renderers: WeakValueDictionary[RenderKey, LiveRenderer]

    @classmethod
    def build(cls, *args: Any, **kwargs: Any) -> Any:
        executor = super().build(*args, **kwargs)
        if (
            isinstance(executor, SharedRenderingExecutionContext)
            and executor.operation.operation is OperationType.SUBSCRIPTION
            and isinstance(executor.root_value, LiveRoot)
        ):
            executor.root_value.live_rendering = partial(
                live_rendering, executor, executor.marks, executor.live_renderers
            )
        return executor

    def execute_operation(self, serially: bool | None = None) -> Any:
        if self.root_value is HANDED_OVER:
            return ExecutionResult(data=None)
        item = getattr(self.root_value, "item", None)
        if not isinstance(item, TimelineItem) or self.operation.operation is not OperationType.SUBSCRIPTION:
            return super().execute_operation(serially)
        renders = SharedRenders.of(item)
        if not renders.shareable(self.operation, lambda: viewer_independent(self, self.marks)):
            return super().execute_operation(serially)
        return renders.render(
            self.operation,
            self.variable_values.coerced,
            lambda: super(SharedRenderingExecutionContext, self).execute_operation(serially),
        )
