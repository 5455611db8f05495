"""Page sizes and cursors, validated the same way for GraphQL and REST."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from feedfabric.core.errors import BadInput
from feedfabric.core.ids import parse_id, parse_optional_id

__all__ = ["MAX_PAGE", "cursor", "is_page_size", "page_size"]

MAX_PAGE = 100


def is_page_size(size: object) -> bool:
    """Whether `size` is a page size a list serves (1..MAX_PAGE); the query cost relies on the same rule."""
    return isinstance(size, int) and not isinstance(size, bool) and 1 <= size <= MAX_PAGE


def page_size(first: int | None, default: int = 20) -> int:
    size = default if first is None else first
    if not is_page_size(size):
        raise BadInput(f"page size must be between 1 and {MAX_PAGE}")
    return size


def cursor(after: str | None) -> uuid.UUID | None:
    return parse_optional_id(after or None, "cursor")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def position_cursor(at: datetime, key: str) -> str:
    """An opaque keyset cursor for lists ordered by (time, key): microseconds since the epoch and the key."""
    return f"{(at - _EPOCH) // timedelta(microseconds=1)}.{key}"


def position(after: str | None) -> tuple[datetime, str] | None:
    """The (time, key) a position_cursor names, the key a member or item ID; BAD_USER_INPUT otherwise."""
    if not after:
        return None
    micros, _, key = after.partition(".")
    if not micros.isascii() or not micros.isdigit() or len(micros) > 18:
        raise BadInput("cursor is not valid")
    return _EPOCH + timedelta(microseconds=int(micros)), str(parse_id(key, "cursor"))
