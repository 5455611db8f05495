"""Subscription events rendered once for every subscriber whose selection cannot differ by viewer.

A new post reaches every connected follower as the same TimelineItem. Executed
per subscriber, each copy cost a full GraphQL execution (~1.3 ms on the
benchmark box), so 1,000 followers meant over a second of CPU per post. Most
selections (id, content, author's name, counts, media) read nothing about the
viewer, so the first subscriber's result is kept on the item, keyed by the
operation and its variables, and every later subscriber with the same
selection gets that result. Selections that touch a viewer-dependent field
(`viewerHasLiked`, `viewerFollows`, `repostOf` whose visibility is the
viewer's, anything not listed in SHAREABLE) are executed per subscriber as
before. Only results without errors are shared.
"""

from __future__ import annotations

from typing import Any

from graphql import (
    GraphQLNamedType,
    GraphQLObjectType,
    OperationType,
    SelectionSetNode,
    get_named_type,
)
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from feedfabric.realtime.render import SharedRenders
from feedfabric.schema.acyclic import weak_async_helpers
from feedfabric.schema.prefetched import Fallback, PrefetchedCompletion, is_prefetched
from feedfabric.schema.selections import iter_fields

# Fields whose value is the same for every viewer who receives the item (the
# delivery already filtered who may see it). Anything else makes the selection
# per viewer.
SHAREABLE: dict[str, frozenset[str]] = {
    "Subscription": frozenset({"homeTimeline"}),
    "TimelineEvent": frozenset({"post", "cursor"}),
    "Post": frozenset(
        {
            "id",
            "content",
            "status",
            "createdAt",
            "updatedAt",
            "tags",
            "likeCount",
            "commentCount",
            "author",
            "mentions",
            "media",
        }
    ),
    "Member": frozenset(
        {
            "id",
            "externalId",
            "username",
            "displayName",
            "avatarUrl",
            "status",
            "followerCount",
            "followingCount",
        }
    ),
    "Media": frozenset({"id", "status", "contentType", "width", "height", "url", "score", "rejectReason"}),
}


class SharedEventExecutor(PrefetchedCompletion, StrawberryGraphQLCoreExecutionContext):
    """Strawberry's executor, except that subscription events carrying SharedRenders reuse them, and
    feed-page posts whose values are all prefetched are completed directly (feedfabric.schema.prefetched)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.async_helpers = weak_async_helpers(self)

    def execute_collected_subfields(
        self,
        parent_type: GraphQLObjectType,
        source_value: Any,
        path: Any,
        grouped_field_set: Any,
        new_defer_usages: Any,
        position_context: Any,
    ) -> Any:
        if not new_defer_usages and is_prefetched(source_value):
            try:
                return self.render_prefetched(parent_type, source_value, grouped_field_set)
            except Fallback:
                pass
        return super().execute_collected_subfields(
            parent_type, source_value, path, grouped_field_set, new_defer_usages, position_context
        )

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
            lambda: super(SharedEventExecutor, self).execute_operation(serially),
        )


def _viewer_independent(executor: StrawberryGraphQLCoreExecutionContext) -> bool:
    root = executor.schema.subscription_type
    return root is not None and _shareable(executor, root, executor.operation.selection_set)


def _shareable(
    executor: StrawberryGraphQLCoreExecutionContext,
    parent: GraphQLNamedType | None,
    selections: SelectionSetNode,
) -> bool:
    for selection, on in iter_fields(selections, executor.fragment_definitions, parent, executor.schema):
        name = selection.name.value
        if name == "__typename":
            continue
        if not isinstance(on, GraphQLObjectType) or name not in SHAREABLE.get(on.name, ()):
            return False
        if selection.selection_set is not None:
            child = get_named_type(on.fields[name].type)
            if not _shareable(executor, child, selection.selection_set):
                return False
    return True
