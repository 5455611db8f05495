"""Subscription events rendered once for every subscriber whose selection reads nothing about the viewer.

A new post reaches every connected follower as the same TimelineItem.
Executed per subscriber, each copy costs a full GraphQL execution, so a
post to a thousand followers would cost a thousand. Most selections (id,
content, the author's name, counts, media) read nothing about the viewer,
so the first subscriber's result is kept on the item, keyed by the
operation and its variables, and every later subscriber with the same
selection gets that result. A selection is shared only when every field it
reaches is marked SAME_FOR_EVERY_VIEWER where it is declared
(feedfabric.schema.sharing); `viewerHasLiked`, `viewerFollows`, `repostOf`
(whose visibility is the viewer's) and any unmarked field make it per
subscriber. Only results without errors are shared.

The hook is graphql-core's `execute_operation`, through Strawberry's
`execution_context_class` option. The executor a subscription is built with
(graphql-core's public `Executor.build`) is kept on its root value when that
is a LiveSink (the WebSocket adapter's operation): a listener renders live
items with it after the stream has ended (graphql-core's public
`build_per_event_executor` and `execute_subscription_event`), and
HANDED_OVER, the stream's last event, executes to nothing.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakValueDictionary

from graphql import (
    ExecutionResult,
    GraphQLNamedType,
    GraphQLObjectType,
    OperationType,
    SelectionSetNode,
    get_named_type,
)
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from feedfabric.realtime.render import LiveSink, SharedRenders
from feedfabric.schema.selections import iter_fields
from feedfabric.schema.sharing import ViewerMarks


class SharedRenderingExecutionContext(StrawberryGraphQLCoreExecutionContext):
    """Strawberry's execution context, except that a subscription event carrying SharedRenders is
    executed once per viewer-independent selection and its result reused for the other subscribers.

    `marks` is the served schema's, and `live_renderers` its live selections' renderers, by render key
    (feedfabric.schema.subscription; feedfabric.schema.build_schema makes one subclass per schema)."""

    marks: ViewerMarks
    live_renderers: WeakValueDictionary[Any, Any]

    @classmethod
    def build(cls, *args: Any, **kwargs: Any) -> Any:
        executor = super().build(*args, **kwargs)
        if (
            isinstance(executor, SharedRenderingExecutionContext)
            and executor.operation.operation is OperationType.SUBSCRIPTION
            and isinstance(executor.root_value, LiveSink)
        ):
            executor.root_value.executor = executor
        return executor

    def execute_operation(self, serially: bool | None = None) -> Any:
        if self.root_value is HANDED_OVER:
            return ExecutionResult(data=None)
        renders = getattr(getattr(self.root_value, "item", None), "renders", None)
        if (
            not isinstance(renders, SharedRenders)
            or self.operation.operation is not OperationType.SUBSCRIPTION
            or not renders.shareable(self.operation, lambda: viewer_independent(self))
        ):
            return super().execute_operation(serially)
        return renders.render(
            self.operation,
            self.variable_values.coerced,
            lambda: super(SharedRenderingExecutionContext, self).execute_operation(serially),
        )


HANDED_OVER: Any = object()
"""The last event of a subscription stream whose live items a listener writes: it executes to a result
with no data, which carries the operation's extensions to the transport, and it is never sent."""


def viewer_independent(executor: SharedRenderingExecutionContext) -> bool:
    """True when the operation's selection reads nothing about the viewer."""
    root = executor.schema.subscription_type
    return root is not None and _shareable(executor, root, executor.operation.selection_set)


def _shareable(
    executor: SharedRenderingExecutionContext,
    parent: GraphQLNamedType | None,
    selections: SelectionSetNode,
) -> bool:
    for selection, on in iter_fields(selections, executor.fragment_definitions, parent, executor.schema):
        name = selection.name.value
        if name == "__typename":
            continue
        if not isinstance(on, GraphQLObjectType):
            return False
        field = on.fields.get(name)
        if field is None or not executor.marks.same_for_every_viewer(on.name, name):
            return False
        if selection.selection_set is not None:
            if not _shareable(executor, get_named_type(field.type), selection.selection_set):
                return False
    return True
