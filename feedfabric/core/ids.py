"""Post, member and item IDs are UUIDv7: their order is creation order, so they double as cursors."""

from __future__ import annotations

import re
import uuid

from uuid_utils import compat

from feedfabric.core.errors import BadInput

__all__ = ["id_millis", "new_id", "parse_id", "parse_optional_id"]

# ASCII hex only, hyphenated as the API writes IDs or bare: uuid.UUID itself reads its digits with int(),
# which takes any script's digits ("١" x 32 is the nil UUID), underscores and surrounding spaces.
_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-?[0-9a-fA-F]{4}){3}-?[0-9a-fA-F]{12}")


def new_id() -> uuid.UUID:
    return compat.uuid7()


def parse_id(value: str | uuid.UUID | None, what: str = "id") -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str) or _UUID.fullmatch(value) is None:
        raise BadInput(f"{what} is not a valid ID")
    return uuid.UUID(value)


def parse_optional_id(value: str | None, what: str = "id") -> uuid.UUID | None:
    return None if value is None else parse_id(value, what)


def id_millis(value: uuid.UUID) -> int:
    """The Unix-millisecond timestamp a UUIDv7 carries in its top 48 bits."""
    return value.int >> 80
