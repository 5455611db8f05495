"""Which fields read the same value for every viewer, declared on the field itself.

A live item's rendering is shared between its subscribers, and a feed post's
shared part is completed once per version, only when every field the
selection reaches says so (feedfabric.adapter.execution).
The mark sits in the field's own declaration,
`strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)`, so whoever makes a field
read the viewer sees it there, and a new field is per viewer until someone
marks it: it can never leak one viewer's data to another.

The mark is read through Strawberry's public `Schema.get_field_for_type`, by
the served type's and field's GraphQL names, once per field.

An object's shared version (`shared_values`, Post.shared_version) is derived
from the same marks: the values of every marked field answered from the
object, so a newly marked field is in the version from its first line, and a
version can never leave out something a shared completion shows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any, cast

from strawberry import Schema
from strawberry.types.base import StrawberryList, StrawberryObjectDefinition, StrawberryOptional, get_object_definition

_KEY = "feedfabric.same_for_every_viewer"
SAME_FOR_EVERY_VIEWER: dict[str, Any] = {_KEY: True}


class ViewerMarks:
    """The marks of one schema's fields. Made before the schema (its execution context class needs it), so
    the schema is attached once built (`attach`)."""

    def __init__(self) -> None:
        self.schema: Schema | None = None
        self._known: dict[tuple[str, str], bool] = {}

    def attach(self, schema: Schema) -> None:
        self.schema = schema
        self._known.clear()

    def same_for_every_viewer(self, type_name: str, field_name: str) -> bool:
        """The Strawberry field served as `type_name.field_name` carries the mark (graphql-core's own
        fields, such as `__typename`, and fields of no Strawberry object type carry none)."""
        key = (type_name, field_name)
        known = self._known.get(key)
        if known is None:
            known = self._find(type_name, field_name)
            self._known[key] = known
        return known

    def from_the_object(self, type_name: str, field_name: str) -> bool:
        """Marked, and answered from the object it is on (a synchronous field: the row it was built from).
        An asynchronous field loads something else (a member's follower count, a post's mentions), whose
        changes the object's version does not see, so it is never reused across requests."""
        key = (type_name, "\0" + field_name)
        known = self._known.get(key)
        if known is None:
            known = self.same_for_every_viewer(type_name, field_name) and not self._is_async(type_name, field_name)
            self._known[key] = known
        return known

    def _is_async(self, type_name: str, field_name: str) -> bool:
        assert self.schema is not None
        field = self.schema.get_field_for_type(field_name, type_name)
        return field is None or field.is_async

    def _find(self, type_name: str, field_name: str) -> bool:
        if self.schema is None:
            raise RuntimeError("ViewerMarks used before its schema was attached")
        if type_name.startswith("__") or field_name.startswith("__"):
            return False
        if not isinstance(self.schema.get_type_by_name(type_name), StrawberryObjectDefinition):
            return False
        field = self.schema.get_field_for_type(field_name, type_name)
        metadata: Mapping[str, Any] = field.metadata if field is not None and field.metadata else {}
        return metadata.get(_KEY) is True


Reader = Callable[[Any], tuple[object, ...]]
_READERS: dict[type, Reader] = {}


def shared_values(obj: object) -> tuple[object, ...]:
    """The values of the object's fields marked SAME_FOR_EVERY_VIEWER and answered from the object
    (synchronous, no arguments), a nested object's by the same rule, as one hashable tuple: equal tuples
    complete equally for every viewer, so it is the key of a completion kept across requests."""
    cls = type(obj)
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = _reader(cls)
    return reader(obj)


def _reader(cls: type) -> Reader:
    """Made once per class: a getter and a conversion per marked field, chosen by the field's type."""
    definition = get_object_definition(cls, strict=True)
    parts: list[tuple[str, Callable[[Any], Any] | None, Callable[[Any], object] | None]] = []
    for field in definition.fields:
        metadata: Mapping[str, Any] = field.metadata or {}
        if metadata.get(_KEY) is not True or field.is_async or field.arguments:
            continue
        resolver = field.base_resolver
        resolved = None if resolver is None else cast("Callable[[Any], Any]", resolver.wrapped_func)
        parts.append((field.python_name, resolved, _conversion(field.type)))
    plain_names = [name for name, resolved, convert in parts if not resolved and convert is None]
    plain = attrgetter(*plain_names) if len(plain_names) > 1 else None  # one C call for the plain attributes
    rest = tuple(
        (attrgetter(name) if not resolved else resolved, convert)
        for name, resolved, convert in parts
        if plain is None or resolved or convert is not None
    )
    if plain is None:
        return lambda obj: tuple([get(obj) if convert is None else convert(get(obj)) for get, convert in rest])
    if not rest:
        return plain
    return lambda obj: (plain(obj), *[get(obj) if convert is None else convert(get(obj)) for get, convert in rest])


def _conversion(of: object) -> Callable[[Any], object] | None:
    """How a value of the type becomes a hashable part of a version (None: it is one already): a list as a
    tuple, an object as its own shared values."""
    if isinstance(of, StrawberryOptional):
        optional = _conversion(of.of_type)
        if optional is None:
            return None
        return lambda value: None if value is None else optional(value)
    if isinstance(of, StrawberryList):
        each = _conversion(of.of_type)
        if each is None:
            return tuple
        return lambda values: tuple([each(value) for value in values])
    if isinstance(of, type) and get_object_definition(of) is not None:
        return shared_values
    return None
