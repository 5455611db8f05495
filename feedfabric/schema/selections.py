"""The one walk over a document's selections, and the bound that keeps every walk linear.

A fragment can spread another twice, so `fragment F1 on Query { ...F0 ...F0 }`
up to F20 is a 1 KB document whose fields, followed spread by spread, number
two million. Every analysis that runs before execution follows spreads:
graphql-core's validation rules, Strawberry's depth and alias limiters, the
cost, the rate limit's root-field count. So the document's *expanded size*
(its fields counted as a walker that follows every spread meets them) is
computed first, once per fragment, in time linear in the text, and a document
past MAX_EXPANDED_FIELDS is refused before anything else walks it
(feedfabric.schema.operation). Every later walk is bounded by that figure.
A fragment that spreads itself, directly or through fields and inline
fragments, is found before any of this (`has_fragment_cycle`, one visit of
each fragment's own selections): a walk that follows spreads level by level
would never end on it, so such a document meets graphql-core's own
NoFragmentCyclesRule alone and nothing else.
A document whose same-keyed fields would make validation's field-merging
rule compare more than MAX_MERGED_PAIRS pairs is refused there too: that
rule is quadratic in the fields that share a response key.

`iter_fields` is the walk itself, for the cost, the rate limit, shared
rendering and the feed page's prefetch: the fields of one selection set with
inline fragments and spreads flattened the way GraphQL collects them, each
named fragment once per selection set (a repeated spread merges into the
first), cycles cut.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLNamedType,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)

from feedfabric.schema.idmemo import IdMemo

__all__ = [
    "MAX_EXPANDED_FIELDS",
    "MAX_MERGED_PAIRS",
    "expanded_size",
    "has_fragment_cycle",
    "iter_fields",
    "merged_pairs",
]

# Fields of a document with its fragments expanded: the token limit's order of
# magnitude, so an ordinary document never meets it and a fan-out document is
# refused long before a walker would notice it (docs/api.md, "Fragment cycles and fan-out").
MAX_EXPANDED_FIELDS = 2_000
# Pairs of same-keyed fields (merged_pairs): graphql-core's
# OverlappingFieldsCanBeMerged compares them pairwise, and their merged
# sub-selections pairwise again, so 450 copies of `viewer { id }` kept
# validation busy for seconds. An ordinary document has about one pair per
# field (each field with itself); fragments that share fields add a few.
MAX_MERGED_PAIRS = 5_000

Fragments = Mapping[str, FragmentDefinitionNode]


def fragments_of(document: DocumentNode) -> dict[str, FragmentDefinitionNode]:
    return {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}


def has_fragment_cycle(document: DocumentNode) -> bool:
    """Whether some fragment reaches itself through spreads: each fragment's own selections are read
    once for the spreads they hold, then the spread graph is searched depth first, each node once."""
    fragments = fragments_of(document)
    spreads = {name: _spreads_in(fragment.selection_set) for name, fragment in fragments.items()}
    done: set[str] = set()
    for start in spreads:
        if start in done:
            continue
        on_path = {start}
        stack = [(start, iter(spreads[start]))]
        while stack:
            name, following = stack[-1]
            target = next(following, None)
            if target is None:
                stack.pop()
                on_path.discard(name)
                done.add(name)
            elif target in on_path:
                return True
            elif target in spreads and target not in done:
                on_path.add(target)
                stack.append((target, iter(spreads[target])))
    return False


def _spreads_in(selection_set: SelectionSetNode) -> list[str]:
    """The fragments spread anywhere inside this selection set, without following them."""
    names: list[str] = []
    pending = [selection_set]
    while pending:
        for selection in pending.pop().selections:
            if isinstance(selection, FragmentSpreadNode):
                names.append(selection.name.value)
            elif isinstance(selection, (FieldNode, InlineFragmentNode)) and selection.selection_set is not None:
                pending.append(selection.selection_set)
    return names


def iter_fields(
    selection_set: SelectionSetNode | None,
    fragments: Fragments,
    parent: GraphQLNamedType | None = None,
    schema: GraphQLSchema | None = None,
) -> Iterator[tuple[FieldNode, GraphQLNamedType | None]]:
    """Each field of the selection set with the type it is selected on (a fragment's type condition,
    resolved when a schema is given, else `parent`)."""
    if selection_set is not None:
        yield from _collect(selection_set, fragments, parent, schema, set())


def _collect(
    selection_set: SelectionSetNode,
    fragments: Fragments,
    parent: GraphQLNamedType | None,
    schema: GraphQLSchema | None,
    visited: set[str],
) -> Iterator[tuple[FieldNode, GraphQLNamedType | None]]:
    for selection in selection_set.selections:
        if isinstance(selection, FieldNode):
            yield selection, parent
        elif isinstance(selection, InlineFragmentNode):
            on = _type(schema, selection.type_condition.name.value, parent) if selection.type_condition else parent
            yield from _collect(selection.selection_set, fragments, on, schema, visited)
        elif isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            fragment = fragments.get(name)
            if fragment is None or name in visited:
                continue
            visited.add(name)
            on = _type(schema, fragment.type_condition.name.value, parent)
            yield from _collect(fragment.selection_set, fragments, on, schema, visited)


def _type(schema: GraphQLSchema | None, name: str, parent: GraphQLNamedType | None) -> GraphQLNamedType | None:
    return schema.get_type(name) if schema is not None else parent


def merged_pairs(document: DocumentNode) -> int:
    """How many pairs of same-keyed fields GraphQL's field-merging rule must compare, at most.

    Fields answering under one response key merge, and so do their sub-selections: k fields under one
    key are k * k comparisons, and the merged sub-selection of those k fields is compared the same way
    below. Walks every definition once through its merged selection sets, so it is linear in the
    expanded size; call it only on acyclic documents within MAX_EXPANDED_FIELDS. Past that many fields
    it stops and answers a figure over MAX_MERGED_PAIRS, so even a document that slipped past those
    checks is refused, not walked for good."""
    return _PAIRS.get(id(document), document, lambda: _merged_pairs(document))


_PAIRS: IdMemo[int] = IdMemo(1024)


def _merged_pairs(document: DocumentNode) -> int:
    fragments = fragments_of(document)
    total = 0
    pending: list[list[SelectionSetNode]] = [
        [d.selection_set]
        for d in document.definitions
        if isinstance(d, (OperationDefinitionNode, FragmentDefinitionNode))
    ]
    seen = 0
    while pending:
        groups: dict[str, list[FieldNode]] = {}
        for selection_set in pending.pop():
            for field, _ in iter_fields(selection_set, fragments):
                seen += 1
                if seen > MAX_EXPANDED_FIELDS:
                    return MAX_MERGED_PAIRS + 1
                groups.setdefault(field.alias.value if field.alias else field.name.value, []).append(field)
        for group in groups.values():
            total += len(group) * len(group)
            below = [f.selection_set for f in group if f.selection_set is not None]
            if below:
                pending.append(below)
    return total


def expanded_size(document: DocumentNode) -> int:
    """Fields of every definition with each spread replaced by its fragment, as a naive walker meets them.

    Each fragment's figure is computed once and reused, so this is linear in the document; a spread
    inside its own fragment (a cycle, which validation refuses) counts nothing here."""
    return _SIZES.get(id(document), document, lambda: _document_size(document))


_SIZES: IdMemo[int] = IdMemo(1024)


def _document_size(document: DocumentNode) -> int:
    fragments = fragments_of(document)
    sizes: dict[str, int] = {}
    total = 0
    for definition in document.definitions:
        if isinstance(definition, (OperationDefinitionNode, FragmentDefinitionNode)):
            total += _set_size(definition.selection_set, fragments, sizes)
    return total


def _set_size(selection_set: SelectionSetNode | None, fragments: Fragments, sizes: dict[str, int]) -> int:
    """Iterative over the selection set's own nesting, recursive only into fragments (each once)."""
    total = 0
    pending = [selection_set] if selection_set is not None else []
    while pending:
        current = pending.pop()
        for selection in current.selections:
            if isinstance(selection, FieldNode):
                total += 1
                if selection.selection_set is not None:
                    pending.append(selection.selection_set)
            elif isinstance(selection, InlineFragmentNode):
                pending.append(selection.selection_set)
            elif isinstance(selection, FragmentSpreadNode):
                total += _fragment_size(selection.name.value, fragments, sizes)
        if total > MAX_EXPANDED_FIELDS * 1_000_000:
            break  # already far past any bound; the exact figure does not matter
    return total


def _fragment_size(name: str, fragments: Fragments, sizes: dict[str, int]) -> int:
    known = sizes.get(name)
    if known is not None:
        return known
    fragment = fragments.get(name)
    if fragment is None:
        return 0
    sizes[name] = 0  # in progress: a cycle back to this fragment counts nothing
    sizes[name] = _set_size(fragment.selection_set, fragments, sizes)
    return sizes[name]
