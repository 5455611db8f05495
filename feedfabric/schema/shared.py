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
`execution_context_class` option.
"""

from __future__ import annotations

from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLNamedType,
    GraphQLObjectType,
    InlineFragmentNode,
    OperationType,
    SelectionSetNode,
    get_named_type,
)
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from feedfabric.realtime.render import SharedRenders
from feedfabric.schema.acyclic import weak_async_helpers
from feedfabric.schema.sharing import same_for_every_viewer


class SharedRenderingExecutionContext(StrawberryGraphQLCoreExecutionContext):
    """Strawberry's execution context, except that a subscription event carrying SharedRenders is
    executed once per viewer-independent selection and its result reused for the other subscribers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.async_helpers = weak_async_helpers(self)

    def execute_operation(self, serially: bool | None = None) -> Any:
        renders = getattr(getattr(self.root_value, "item", None), "renders", None)
        if (
            not isinstance(renders, SharedRenders)
            or self.operation.operation is not OperationType.SUBSCRIPTION
            or not renders.shareable(self.operation, lambda: _viewer_independent(self))
        ):
            return super().execute_operation(serially)
        return renders.render(
            self.operation,
            self.variable_values.coerced,
            lambda: super(SharedRenderingExecutionContext, self).execute_operation(serially),
        )


def _viewer_independent(executor: StrawberryGraphQLCoreExecutionContext) -> bool:
    root = executor.schema.subscription_type
    return root is not None and _shareable(executor, root, executor.operation.selection_set, frozenset())


def _shareable(
    executor: StrawberryGraphQLCoreExecutionContext,
    parent: GraphQLNamedType | None,
    selections: SelectionSetNode,
    seen: frozenset[str],
) -> bool:
    schema = executor.schema
    for selection in selections.selections:
        if isinstance(selection, FieldNode):
            name = selection.name.value
            if name == "__typename":
                continue
            if not isinstance(parent, GraphQLObjectType):
                return False
            field = parent.fields.get(name)
            if field is None or not same_for_every_viewer(field):
                return False
            if selection.selection_set is not None:
                if not _shareable(executor, get_named_type(field.type), selection.selection_set, seen):
                    return False
        elif isinstance(selection, InlineFragmentNode):
            on = schema.get_type(selection.type_condition.name.value) if selection.type_condition else parent
            if not _shareable(executor, on, selection.selection_set, seen):
                return False
        elif isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            fragment = executor.fragment_definitions.get(name)
            if fragment is None or name in seen:
                return False
            on = schema.get_type(fragment.type_condition.name.value)
            if not _shareable(executor, on, fragment.selection_set, seen | {name}):
                return False
    return True
