"""Whether an operation's selection reads nothing about the viewer, so that its result may be shared."""

from __future__ import annotations

from typing import Any

from graphql import Executor, GraphQLNamedType, GraphQLObjectType, SelectionSetNode, get_named_type

from feedfabric.adapter.execution.marks import FieldMarks
from feedfabric.schema.selections import iter_fields


def viewer_independent(executor: Executor[Any], marks: FieldMarks) -> bool:
    """True when every field the subscription's selection reaches is marked SAME_FOR_EVERY_VIEWER (an unmarked
    field, or one of an abstract type, makes it per subscriber)."""
    root = executor.schema.subscription_type
    return root is not None and _shareable(executor, marks, root, executor.operation.selection_set)


def _shareable(
    executor: Executor[Any], marks: FieldMarks, parent: GraphQLNamedType | None, selections: SelectionSetNode
) -> bool:
    for selection, on in iter_fields(selections, executor.fragment_definitions, parent, executor.schema):
        name = selection.name.value
        if name == "__typename":
            continue
        if not isinstance(on, GraphQLObjectType):
            return False
        field = on.fields.get(name)
        if field is None or not marks.same_for_every_viewer(on.name, name):
            return False
        if selection.selection_set is not None:
            if not _shareable(executor, marks, get_named_type(field.type), selection.selection_set):
                return False
    return True
