"""Which fields read the same value for every viewer, declared on the field itself.

A live item's rendering is shared between its subscribers only when every
field their selection reaches says so (feedfabric.schema.shared). The mark
sits in the field's own declaration, `strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)`,
so whoever makes a field read the viewer sees it there, and a new field is
per viewer until someone marks it: it can never leak one viewer's data to another.
"""

from __future__ import annotations

from typing import Any

from graphql import GraphQLField
from strawberry.schema.schema_converter import GraphQLCoreConverter

_KEY = "feedfabric.same_for_every_viewer"
SAME_FOR_EVERY_VIEWER: dict[str, Any] = {_KEY: True}


def same_for_every_viewer(field: GraphQLField) -> bool:
    """The Strawberry field behind a served field carries the mark (absent on graphql-core's own fields)."""
    definition = (field.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    metadata = getattr(definition, "metadata", None) or {}
    return metadata.get(_KEY) is True
