"""Which fields read the same value for every viewer, declared on the field itself.

A live item's rendering is shared between its subscribers, and a feed post's
shared part is completed once per version, only when every field the
selection reaches says so (feedfabric.schema.shared, feedfabric.schema.render_once).
The mark sits in the field's own declaration,
`strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)`, so whoever makes a field
read the viewer sees it there, and a new field is per viewer until someone
marks it: it can never leak one viewer's data to another.

The mark is read through Strawberry's public `Schema.get_field_for_type`, by
the served type's and field's GraphQL names, once per field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strawberry import Schema
from strawberry.types.base import StrawberryObjectDefinition

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
