"""Feed-page posts completed straight from their prefetched values, without graphql-core's per-field machinery.

A home-feed page of 20 runs about 370 fields. Once FeedConnection.load has
loaded everything a post shows (`Post.loaded`), every one of them is a plain
read, yet graphql-core and Strawberry still spend an Info object, argument
parsing and a completion step on each: most of a GraphQL page's CPU, and the
reason it cost over three times the REST page. For a post whose whole
selection is such reads, this completes the subtree directly: the same
grouping of fields (graphql-core's own collect_subfields, so fragments,
aliases and @include/@skip behave as before), the same values, and the same
leaf serialisation (each scalar's and enum's `serialize`).

Anything else falls back to the normal execution of that post, which then
answers exactly as it always did: a field with arguments, a resolver that
wants `info` or is async, a field extension, a deferred fragment, a value the
prefetch did not cover, a null in a non-null position (whose error the normal
path reports), an abstract type. The fallback is decided before anything is
returned and nothing here has side effects, so falling back costs only the
time spent.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from graphql import (
    GraphQLBoolean,
    GraphQLID,
    GraphQLInt,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLString,
    Undefined,
    is_leaf_type,
)

from feedfabric.schema.idmemo import IdMemo

# A field's value from its object: None when the value cannot be read without running a resolver.
Reader = Callable[[Any], Any]


class Fallback(Exception):
    """This subtree needs the normal execution."""


_READERS: dict[tuple[type, str], Reader | None] = {}


def _reader(cls: type, name: str) -> Reader | None:
    """How to read GraphQL field `name` of a Strawberry object of class `cls`, or None (only a resolver can)."""
    key = (cls, name)
    if key in _READERS:
        return _READERS[key]
    found: Reader | None = None
    definition = getattr(cls, "__strawberry_definition__", None)
    for field in getattr(definition, "fields", ()):
        graphql_name = field.graphql_name or _camel(field.python_name)
        if graphql_name != name or field.extensions or field.permission_classes:
            continue
        resolver = field.base_resolver
        python_name = field.python_name
        if resolver is None:
            found = attrgetter(python_name)
        elif not resolver.arguments and resolver.info_parameter is None and not resolver.is_async:
            func = resolver.wrapped_func
            if callable(func) and not isinstance(func, (staticmethod, classmethod)):
                found = func
        break
    _READERS[key] = found
    return found


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def is_prefetched(source: Any) -> bool:
    """A post with its values loaded, or a feed connection / edge marked by FeedConnection.load."""
    return getattr(source, "loaded", None) is not None or getattr(source, "prefetched", False) is True


# One field of a plan: response key, field name, the completer of its value (None for __typename).
_Entry = tuple[str, str, Callable[[Any], Any] | None]
# The same, kept across operations: a leaf's completer is fixed by its type, an object's is made
# per operation (it collects its subfields with that operation's variables): None here, its type kept.
_Template = tuple[str, str, Callable[[Any], Any] | None, GraphQLOutputType | None]
# What rendering runs for each field of a source class: response key, field name, reader, completer.
_Row = tuple[str, str, Reader, Callable[[Any], Any]]


class _Plan:
    """A selection's fields for one operation, and for each class of source the rows that render them."""

    __slots__ = ("entries", "rows")

    def __init__(self, entries: list[_Entry]) -> None:
        self.entries = entries
        self.rows: dict[type, list[_Row]] = {}

    def rows_for(self, parent_type: GraphQLObjectType, cls: type) -> list[_Row]:
        rows: list[_Row] = []
        for key, name, complete in self.entries:
            if complete is None:
                rows.append((key, name, _constant(parent_type.name), _identity))
            else:
                rows.append((key, name, _reader(cls, name) or _unreadable, complete))
        self.rows[cls] = rows
        return rows


_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


class PrefetchedCompletion:
    """Mixed into the executor: `collect_subfields` is graphql-core's (memoised per selection).

    Each collected selection is turned into a plan once per operation (its
    fields' names and completers), then run for every post of the page. What
    a plan holds that does not depend on the operation's variables (the
    fields, the leaves' completers) is made once per selection and kept
    across operations (`_template`).
    """

    collect_subfields: Callable[..., Any]
    _prefetch_plans: dict[int, tuple[Any, _Plan | None]]

    def render_prefetched(self, parent_type: GraphQLObjectType, source: Any, grouped: Any) -> dict[str, Any]:
        """The completed value of `source`'s collected fields; raises Fallback when it cannot be done here."""
        return _render(parent_type, source, self._plan(parent_type, grouped))

    def _plan(self, parent_type: GraphQLObjectType, grouped: Any) -> _Plan:
        plans = self.__dict__.setdefault("_prefetch_plans", {})
        cached = plans.get(id(grouped))
        if cached is not None and cached[0] is grouped:
            if cached[1] is None:
                raise Fallback
            return cached[1]
        plan: _Plan | None
        try:
            entries: list[_Entry] = []
            for (key, name, leaf, field_type), details in zip(_template(parent_type, grouped), grouped.values()):
                if any(d.defer_usage is not None or d.fragment_variable_values is not None for d in details):
                    raise Fallback
                complete = leaf if leaf is not None or field_type is None else self._completer(field_type, details)
                entries.append((key, name, complete))
            plan = _Plan(entries)
        except Fallback:
            plan = None
        plans[id(grouped)] = (grouped, plan)  # the grouped set is kept alive, so its id is not reused
        if plan is None:
            raise Fallback
        return plan

    def _completer(self, return_type: GraphQLOutputType, details: Any) -> Callable[[Any], Any]:
        """The completion of an object value (or a list of them) of `return_type`, for this operation."""
        non_null = isinstance(return_type, GraphQLNonNull)
        inner: Any = return_type.of_type if non_null else return_type  # type: ignore[union-attr]

        if isinstance(inner, GraphQLList):
            return _list(_leaf(inner.of_type) or self._completer(inner.of_type, details), non_null)
        if isinstance(inner, GraphQLObjectType):
            plans: list[_Plan] = []  # collect_subfields depends on the type and the selection only
            # The executor keeps this completer (in its plans): a strong reference back would make a
            # cycle, and every operation's executor would wait for the cyclic collector to be freed.
            # A subscription's per-event executors are copies sharing the plans, so the one that made
            # this completer may be gone when another first needs its subfields: that one falls back.
            executor = weakref.ref(self)

            def complete_object(value: Any) -> Any:
                if value is None:
                    return _null(non_null)
                definition = getattr(type(value), "__strawberry_definition__", None)
                if definition is None or definition.name != inner.name:
                    raise Fallback
                if not plans:
                    owner = executor()
                    if owner is None:
                        raise Fallback
                    grouped, new_defer_usages, _forbidden = owner.collect_subfields(inner, details)
                    if new_defer_usages:
                        raise Fallback
                    plans.append(owner._plan(inner, grouped))
                return _render(inner, value, plans[0])

            return complete_object

        def abstract(value: Any) -> Any:
            if value is None:
                return _null(non_null)
            raise Fallback  # interfaces and unions: the normal path resolves the type

        return abstract


# Templates by (parent type, the collected fields' keys and AST nodes); None: this selection falls back.
_TEMPLATES: IdMemo[list[_Template] | None] = IdMemo(1024)


def _template(parent_type: GraphQLObjectType, grouped: Any) -> list[_Template]:
    """The operation-independent part of a selection's plan; the same document (the parser cache
    hands out one AST per query text) with the same @include/@skip outcome finds it again."""
    nodes = tuple(tuple(d.node for d in details) for details in grouped.values())
    key = (id(parent_type), tuple(grouped), tuple(tuple(map(id, group)) for group in nodes))
    entries = _TEMPLATES.get(key, (parent_type, nodes), lambda: _make_template(parent_type, grouped, nodes))
    if entries is None:
        raise Fallback
    return entries


def _make_template(parent_type: GraphQLObjectType, grouped: Any, nodes: tuple[Any, ...]) -> list[_Template] | None:
    entries: list[_Template] = []
    for response_key, group in zip(grouped, nodes):
        node = group[0]
        if node.arguments:
            return None
        name = node.name.value
        if name == "__typename":
            entries.append((response_key, name, None, None))
            continue
        field = parent_type.fields.get(name)
        if field is None:
            return None
        entries.append((response_key, name, _leaf(field.type), field.type))
    return entries


# Leaf completers by return type (a schema has a bounded number of them).
_LEAVES: IdMemo[Callable[[Any], Any] | None] = IdMemo(1024)


def _leaf(return_type: GraphQLOutputType) -> Callable[[Any], Any] | None:
    """graphql-core's completion of a scalar or enum value (or a list of them) of `return_type`; None for
    any other type.

    A page has a few hundred values, most of them strings, so each completer is one closure that
    handles null itself, and a built-in scalar's value of exactly its type is returned as it is
    (what its `serialize` would return) without the call.
    """
    return _LEAVES.get(id(return_type), return_type, lambda: _make_leaf(return_type))


def _make_leaf(return_type: GraphQLOutputType) -> Callable[[Any], Any] | None:
    non_null = isinstance(return_type, GraphQLNonNull)
    inner: Any = return_type.of_type if non_null else return_type  # type: ignore[union-attr]
    if isinstance(inner, GraphQLList):
        item = _leaf(inner.of_type)
        return _list(item, non_null) if item is not None else None
    if not is_leaf_type(inner):
        return None
    serialize = inner.serialize
    exact: type | None = _SELF_SERIALIZING.get(inner)
    names = _enum_names(inner)

    def complete_leaf(value: Any) -> Any:
        if value is None:
            return _null(non_null)
        if type(value) is exact and (exact is not int or _INT_MIN <= value <= _INT_MAX):
            return value
        if names and value in names:
            return names[value]
        serialized = serialize(value)
        if serialized is Undefined or serialized is None:
            raise Fallback
        return serialized

    return complete_leaf


def _render(parent_type: GraphQLObjectType, source: Any, plan: _Plan) -> dict[str, Any]:
    cls = type(source)
    rows = plan.rows.get(cls)
    if rows is None:
        rows = plan.rows_for(parent_type, cls)
    loaded = getattr(source, "loaded", None)
    if loaded is None:
        return {key: complete(read(source)) for key, _name, read, complete in rows}
    out: dict[str, Any] = {}
    get = loaded.get
    for key, name, read, complete in rows:
        value = get(name, _UNSET)
        out[key] = complete(read(source) if value is _UNSET else value)
    return out


_UNSET = object()


def _unreadable(source: Any) -> Any:
    raise Fallback  # only a resolver can answer this field


def _constant(value: Any) -> Reader:
    return lambda _source: value


def _identity(value: Any) -> Any:
    return value


# Built-in scalars whose serialize returns a value of exactly this type unchanged.
_SELF_SERIALIZING: dict[Any, type] = {GraphQLString: str, GraphQLID: str, GraphQLBoolean: bool, GraphQLInt: int}


_ENUM_NAMES: dict[Any, dict[Any, str]] = {}


def _enum_names(leaf: Any) -> dict[Any, str]:
    """A Strawberry enum's members by their GraphQL names: its serialize scans the values for each one."""
    names = _ENUM_NAMES.get(leaf)
    if names is None:
        wrapped = getattr(leaf, "wrapped_cls", None)
        by_value = {v.value: name for name, v in leaf.values.items()} if wrapped is not None else {}
        names = {member: by_value[member.value] for member in wrapped or () if member.value in by_value}
        _ENUM_NAMES[leaf] = names
    return names


def _list(item: Callable[[Any], Any], non_null: bool) -> Callable[[Any], Any]:
    def complete_list(value: Any) -> Any:
        if value is None:
            return _null(non_null)
        if not isinstance(value, list):
            raise Fallback
        return [item(v) for v in value]

    return complete_list


def _null(non_null: bool) -> None:
    if non_null:
        raise Fallback  # the normal path raises the non-null error
    return None
