"""Post, member and item IDs are UUIDv7: their order is creation order, so they double as cursors."""

from __future__ import annotations

import uuid

from uuid_utils import compat

from feedfabric.core.errors import BadInput


def new_id() -> uuid.UUID:
    return compat.uuid7()


def parse_id(value: str | uuid.UUID | None, what: str = "id") -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if not value or not isinstance(value, str) or len(value) > 64:
        raise BadInput(f"{what} is not a valid ID")
    try:
        return uuid.UUID(value)
    except ValueError:
        raise BadInput(f"{what} is not a valid ID") from None


def parse_optional_id(value: str | None, what: str = "id") -> uuid.UUID | None:
    return None if value is None else parse_id(value, what)


def id_millis(value: uuid.UUID) -> int:
    """The Unix-millisecond timestamp a UUIDv7 carries in its top 48 bits."""
    return value.int >> 80
