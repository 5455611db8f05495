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

from collections.abc import Callable
from typing import Any

from graphql import (
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    Undefined,
    is_leaf_type,
)

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
            found = lambda obj, attr=python_name: getattr(obj, attr)  # noqa: E731
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


class PrefetchedCompletion:
    """Mixed into the executor: `collect_subfields` is graphql-core's (memoised per selection)."""

    collect_subfields: Callable[..., Any]

    def render_prefetched(self, parent_type: GraphQLObjectType, source: Any, grouped: Any) -> dict[str, Any]:
        """The completed value of `source`'s collected fields; raises Fallback when it cannot be done here."""
        out: dict[str, Any] = {}
        loaded = getattr(source, "loaded", None)
        for key, details in grouped.items():
            first = details[0]
            node = first.node
            if node.arguments or any(
                d.defer_usage is not None or d.fragment_variable_values is not None for d in details
            ):
                raise Fallback
            name = node.name.value
            if name == "__typename":
                out[key] = parent_type.name
                continue
            field = parent_type.fields.get(name)
            if field is None:
                raise Fallback
            if loaded is not None and name in loaded:
                value = loaded[name]
            else:
                read = _reader(type(source), name)
                if read is None:
                    raise Fallback
                value = read(source)
            out[key] = self._complete(field.type, details, value)
        return out

    def _complete(self, return_type: GraphQLOutputType, details: Any, value: Any) -> Any:
        if isinstance(return_type, GraphQLNonNull):
            if value is None:
                raise Fallback  # the normal path raises the non-null error
            return_type = return_type.of_type
        if value is None:
            return None
        if isinstance(return_type, GraphQLList):
            if not isinstance(value, list):
                raise Fallback
            return [self._complete(return_type.of_type, details, item) for item in value]
        if is_leaf_type(return_type):
            serialized = return_type.serialize(value)  # type: ignore[union-attr]
            if serialized is Undefined or serialized is None:
                raise Fallback
            return serialized
        if isinstance(return_type, GraphQLObjectType):
            definition = getattr(type(value), "__strawberry_definition__", None)
            if definition is None or definition.name != return_type.name:
                raise Fallback
            grouped, new_defer_usages, _forbidden = self.collect_subfields(return_type, details)
            if new_defer_usages:
                raise Fallback
            return self.render_prefetched(return_type, value, grouped)
        raise Fallback  # interfaces and unions: the normal path resolves the type
