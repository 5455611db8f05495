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
from typing import Any

from strawberry import Schema
from strawberry.types.base import StrawberryList, StrawberryObjectDefinition, StrawberryOptional, get_object_definition
from strawberry.types.private import is_private

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


Reader = Callable[[Any], object]
_READERS: dict[type, Reader] = {}
_BUILDING: set[type] = set()


def shared_values(obj: object) -> object:
    """What the object's fields marked SAME_FOR_EVERY_VIEWER and answered from the object (synchronous, no
    arguments) read, a nested object's by the same rule, as one hashable value: equal values complete
    equally for every viewer, so it is the key of a completion kept across requests."""
    return _reader_of(type(obj))(obj)


def _reader_of(cls: type) -> Reader:
    reader = _READERS.get(cls)
    if reader is None:
        if cls in _BUILDING:  # a type that reaches itself: its reader is looked up when it is read
            return shared_values
        _BUILDING.add(cls)
        try:
            reader = _READERS[cls] = _reader(cls)
        finally:
            _BUILDING.discard(cls)
    return reader


def _reader(cls: type) -> Reader:
    """Made once per class: what each marked field answered from the object reads. A plain attribute is
    read as it is (a nested object as its own shared values); a field computed by a resolver reads the
    object, so the object's private inputs (the row it was built from) stand for all such fields at once:
    cheaper than running every resolver, and they cover whatever a resolver takes from them."""
    definition = get_object_definition(cls, strict=True)
    plain: list[tuple[str, Callable[[Any], object] | None]] = []
    resolved = False
    for field in definition.fields:
        metadata: Mapping[str, Any] = field.metadata or {}
        if metadata.get(_KEY) is not True or field.is_async or field.arguments:
            continue
        if field.base_resolver is None:
            plain.append((field.python_name, _conversion(field.type)))
        else:
            resolved = True
    if resolved:
        plain += [(field.python_name, _hashable) for field in definition.fields if is_private(field.type)]
    as_is = [name for name, convert in plain if convert is None]
    rest = tuple((attrgetter(name), convert) for name, convert in plain if convert is not None)
    read_as_is = attrgetter(*as_is) if len(as_is) > 1 else None  # one C call for the plain attributes
    if len(plain) == 1:
        name, convert = plain[0]
        return attrgetter(name) if convert is None else lambda obj: convert(getattr(obj, name))
    if read_as_is is None:
        every = tuple((attrgetter(name), convert) for name, convert in plain)
        return lambda obj: tuple([get(obj) if convert is None else convert(get(obj)) for get, convert in every])
    if not rest:
        return read_as_is
    return lambda obj: (read_as_is(obj), *[convert(get(obj)) for get, convert in rest])


def _hashable(value: Any) -> object:
    """A private input as a hashable value: a dict (a row's columns) as its items, a list as a tuple."""
    if isinstance(value, dict):
        return tuple(value.items())
    if isinstance(value, list):
        return tuple(value)
    return value


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
        reader = _reader_of(of)
        # Null even where the type says not: a post's author gone between two reads (GraphQL nulls the post).
        return lambda value: None if value is None else reader(value)
    return None
