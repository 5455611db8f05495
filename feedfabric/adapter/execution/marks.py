"""What the engine asks of the schema: which fields read the same value for every viewer.

The marks are declared on the schema's fields (feedfabric.schema.viewer_marks, where
`ViewerMarks` answers this interface); the engine knows them only through it, so
the schema does not depend on the engine, and the app hands the one to the
other when it builds the schema (feedfabric.app).
"""

from __future__ import annotations

from typing import Protocol


class FieldMarks(Protocol):
    """The served schema's viewer marks, by GraphQL type and field name."""

    def same_for_every_viewer(self, type_name: str, field_name: str) -> bool:
        """The field reads the same value for every viewer: a live item's rendering may be shared."""
        ...

    def from_the_object(self, type_name: str, field_name: str) -> bool:
        """Marked, and answered synchronously from the object it is on: its completion may be reused for
        every request that sees the same object version."""
        ...
