"""A feed post's shared part completed once per post version, and reused across viewers and requests.

A home page of 20 posts costs graphql-core a completion per field per post
(about 360 field completions with Strawberry's resolve-info per field) although
most of what a post shows (its content, author, tags, media, counts) is the
same for every viewer. Here the executor's completion of a `Post` is split:

- the shared part: every field the selection reaches that is marked
  SAME_FOR_EVERY_VIEWER where it is declared and answered from the post
  itself (synchronous: FieldMarks.from_the_object),
  taking no arguments and no directives below the post, is completed once per
  (selection, post version) and kept in a bounded in-process cache;
- everything else (`viewerHasLiked`, `repostOf`, whose visibility is the
  viewer's, asynchronous fields such as `mentions` or an author's
  `followerCount`, any unmarked field) is completed per request, as before.

The post version is the value of everything the shared part reads: the post's
row, its author's display fields, its tags, media and counts (Post.shared_version).
So an edit, a like, a new comment, a display-name change or a visibility change
yields a new key; the old entry is never served again and ages out (first in,
first out past MAX_ENTRIES). Counts are as fresh as the page's own read: the
cache adds no lag (docs/api.md). A completion that reported a field error, or
did not finish synchronously, is not kept.

The hook is Strawberry's `execution_context_class`, whose class overrides
two of the executor's methods and calls two more (the pins and their reasons:
feedfabric.adapter.execution; tests/adapter/test_render_once.py compares
cached pages with uncached executions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLObjectType,
    GraphQLOutputType,
    InlineFragmentNode,
    SelectionSetNode,
    get_named_type,
)

from feedfabric.adapter.execution.marks import FieldMarks
from feedfabric.adapter.execution.subscriptions import SharedRenderingExecutionContext

MAX_ENTRIES = 20_000
"""Completed shared parts kept per process (about 1 kB each): a home page's 20 posts for 1,000 distinct pages."""

MAX_SHAPES = 1_000
"""Distinct shared selections kept alive (their nodes key the results); past it, both caches start over."""

RENDERED_TYPE = "Post"


@dataclass(frozen=True, slots=True)
class Plan:
    """One Post selection (in one operation) split into its shared and per-viewer response keys."""

    shape: tuple[object, ...]
    shared: dict[str, Any]
    viewer: dict[str, Any]
    order: tuple[str, ...]


class PostRenders:
    """The process's completed shared parts, by (selection shape, post version)."""

    def __init__(self, marks: FieldMarks, max_entries: int = MAX_ENTRIES) -> None:
        self.marks = marks
        self.max_entries = max_entries
        self.results: dict[tuple[object, ...], dict[str, Any]] = {}
        # Keeps each shape's field nodes alive, so the ids in a shape key are never reused by other nodes.
        self.shapes: dict[tuple[object, ...], tuple[FieldNode, ...]] = {}
        self.hits = 0
        self.misses = 0

    def remember_shape(self, shape: tuple[object, ...], nodes: tuple[FieldNode, ...]) -> None:
        if shape in self.shapes:
            return
        if len(self.shapes) >= MAX_SHAPES:
            self.shapes.clear()
            self.results.clear()
        self.shapes[shape] = nodes

    def get(self, key: tuple[object, ...]) -> dict[str, Any] | None:
        found = self.results.get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def keep(self, key: tuple[object, ...], value: dict[str, Any]) -> None:
        results = self.results
        if len(results) >= self.max_entries:
            del results[next(iter(results))]
        results[key] = value

    def clear(self) -> None:
        self.results.clear()
        self.shapes.clear()


class RenderOnceExecutionContext(SharedRenderingExecutionContext):
    """The served schema's execution context (feedfabric.adapter.execution.engine sets `marks` and `renders`)."""

    renders: PostRenders | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.post_plans: dict[tuple[object, ...], tuple[tuple[Any, ...], Plan | None]] = {}
        self.field_errors = 0

    def handle_field_error(self, *args: Any, **kwargs: Any) -> None:
        """Counted, so a shared part that reported an error is not kept."""
        self.field_errors += 1
        return super().handle_field_error(*args, **kwargs)

    def complete_object_value(
        self,
        return_type: GraphQLObjectType,
        field_details_list: Any,
        info: Any,
        path: Any,
        result: Any,
        position_context: Any,
    ) -> Any:
        renders = self.renders
        version = getattr(result, "shared_version", None) if return_type.name == RENDERED_TYPE else None
        if renders is None or version is None:
            return super().complete_object_value(return_type, field_details_list, info, path, result, position_context)
        plan = self._plan(renders, return_type, field_details_list)
        if plan is None:
            return super().complete_object_value(return_type, field_details_list, info, path, result, position_context)
        try:
            key = (plan.shape, version())
            shared = renders.get(key)
        except TypeError:  # a value of the version that does not hash: completed per request
            return super().complete_object_value(return_type, field_details_list, info, path, result, position_context)
        if shared is None:
            errors = self.field_errors
            completed = self.execute_fields(return_type, result, path, plan.shared, position_context)
            if self.is_awaitable(completed):
                return self._merged_later(plan, completed, return_type, result, path, position_context)
            shared = cast("dict[str, Any]", completed)
            if self.field_errors == errors:
                renders.keep(key, shared)
        if not plan.viewer:
            return dict(shared)
        own = self.execute_fields(return_type, result, path, plan.viewer, position_context)
        if self.is_awaitable(own):
            return self._own_later(plan, shared, own)
        return _merged(plan.order, shared, cast("dict[str, Any]", own))

    async def _own_later(self, plan: Plan, shared: dict[str, Any], own: Any) -> dict[str, Any]:
        return _merged(plan.order, shared, await own)

    async def _merged_later(
        self, plan: Plan, shared: Any, return_type: GraphQLObjectType, result: Any, path: Any, position_context: Any
    ) -> dict[str, Any]:
        """A shared part that did not finish synchronously is completed for this request only."""
        done = await shared
        if not plan.viewer:
            return dict(done)
        own = self.execute_fields(return_type, result, path, plan.viewer, position_context)
        return _merged(plan.order, done, await own if self.is_awaitable(own) else cast("dict[str, Any]", own))

    def _plan(self, renders: PostRenders, return_type: GraphQLObjectType, field_details_list: Any) -> Plan | None:
        """The split of this selection, once per operation: the posts of a list share their selection, and
        a subscription's events their operation's (each event collects its fields anew, from the same nodes)."""
        nodes = tuple(details.node for details in field_details_list)
        key = (return_type.name, *map(id, nodes))
        known = self.post_plans.get(key)
        if known is not None:  # the nodes are kept beside the plan, so their ids name them alone
            return known[1]
        plan = self._split(renders, return_type, field_details_list)
        self.post_plans[key] = (nodes, plan)
        return plan

    def _split(self, renders: PostRenders, return_type: GraphQLObjectType, field_details_list: Any) -> Plan | None:
        grouped, _defers, _forbidden = self.collect_subfields(return_type, field_details_list)
        shared: dict[str, Any] = {}
        viewer: dict[str, Any] = {}
        for response_key, details in grouped.items():
            target = shared if self._shareable(renders.marks, return_type, details) else viewer
            target[response_key] = details
        if not shared:
            return None
        nodes = tuple(d.node for details in shared.values() for d in details)
        shape: tuple[object, ...] = (
            return_type.name,
            *((key, *(id(d.node) for d in details)) for key, details in shared.items()),
        )
        renders.remember_shape(shape, nodes)
        return Plan(shape=shape, shared=shared, viewer=viewer, order=tuple(grouped))

    def _shareable(self, marks: FieldMarks, parent: GraphQLObjectType, details: Sequence[Any]) -> bool:
        for detail in details:
            node = detail.node
            if getattr(detail, "defer_usage", None) is not None or node.arguments:
                return False
            if not self._static_field(marks, parent, node):
                return False
        return True

    def _static_field(self, marks: FieldMarks, parent: GraphQLObjectType, node: FieldNode) -> bool:
        """A marked field of the object (or `__typename`) whose own sub-selection is static too."""
        name = node.name.value
        if name == "__typename":
            return True
        field = parent.fields.get(name)
        if field is None or not marks.from_the_object(parent.name, name):
            return False
        return node.selection_set is None or self._static(marks, field.type, node.selection_set)

    def _static(self, marks: FieldMarks, of: GraphQLOutputType, selections: SelectionSetNode) -> bool:
        """The sub-selection reads only marked fields of the object, with no argument or directive anywhere
        (so it completes the same whatever the operation's variables)."""
        parent = get_named_type(of)
        if not isinstance(parent, GraphQLObjectType):
            return False
        for selection in selections.selections:
            if selection.directives:
                return False
            if isinstance(selection, FieldNode):
                if selection.arguments or not self._static_field(marks, parent, selection):
                    return False
            elif isinstance(selection, InlineFragmentNode):
                condition = selection.type_condition
                if condition is not None and condition.name.value != parent.name:
                    return False
                if not self._static(marks, parent, selection.selection_set):
                    return False
            elif isinstance(selection, FragmentSpreadNode):
                fragment = self.fragment_definitions.get(selection.name.value)
                if fragment is None or fragment.type_condition.name.value != parent.name:
                    return False
                if not self._static(marks, parent, fragment.selection_set):
                    return False
            else:
                return False
        return True


def _merged(order: tuple[str, ...], shared: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """The response keys in the selection's order, as graphql-core would have completed them."""
    return {key: shared[key] if key in shared else own[key] for key in order if key in shared or key in own}
