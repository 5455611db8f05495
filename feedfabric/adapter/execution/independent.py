"""Whether an operation's selection reads nothing about the viewer, so that its result may be shared; or
nothing but the live item's `viewerHasLiked`, so that it may be shared by the recipients of one value."""

from __future__ import annotations

from typing import Any

from graphql import Executor, GraphQLNamedType, GraphQLObjectType, SelectionSetNode, get_named_type

from feedfabric.adapter.execution.marks import FieldMarks
from feedfabric.schema.selections import iter_fields

LIKED_PATH = ("homeTimeline", "post")
"""Where the one per-viewer field a live rendering may still share sits: the live item's own post, whose
`viewerHasLiked` the delivery reads for every recipient at once (feedfabric.realtime.item.viewer_liked)."""
LIKED_FIELD = ("Post", "viewerHasLiked")


def viewer_independent(executor: Executor[Any], marks: FieldMarks) -> bool:
    """True when every field the subscription's selection reaches is marked SAME_FOR_EVERY_VIEWER (an unmarked
    field, or one of an abstract type, makes it per subscriber)."""
    root = executor.schema.subscription_type
    return root is not None and _shareable(executor, marks, root, executor.operation.selection_set, None)


def liked_only(executor: Executor[Any], marks: FieldMarks) -> bool:
    """True when every field the selection reaches is marked, but for `viewerHasLiked` on the live item's post
    (LIKED_PATH): its result is then the same for every subscriber with the same value of that one field, since
    nothing else in it reads the viewer. Also true of a viewer-independent selection."""
    root = executor.schema.subscription_type
    return root is not None and _shareable(executor, marks, root, executor.operation.selection_set, LIKED_PATH)


def _shareable(
    executor: Executor[Any],
    marks: FieldMarks,
    parent: GraphQLNamedType | None,
    selections: SelectionSetNode,
    liked: tuple[str, ...] | None,
) -> bool:
    """`liked`: the rest of the path to the post whose `viewerHasLiked` is allowed (empty: this is that
    post's selection; None: not on the path)."""
    for selection, on in iter_fields(selections, executor.fragment_definitions, parent, executor.schema):
        name = selection.name.value
        if name == "__typename":
            continue
        if not isinstance(on, GraphQLObjectType):
            return False
        field = on.fields.get(name)
        if field is None:
            return False
        if not marks.same_for_every_viewer(on.name, name) and not (liked == () and (on.name, name) == LIKED_FIELD):
            return False
        if selection.selection_set is not None:
            below = liked[1:] if liked and liked[0] == name else None
            if not _shareable(executor, marks, get_named_type(field.type), selection.selection_set, below):
                return False
    return True
