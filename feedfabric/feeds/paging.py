"""Page sizes and cursors, validated the same way for GraphQL and REST."""

from __future__ import annotations

import uuid

from feedfabric.errors import BadInput
from feedfabric.ids import parse_optional_id

MAX_PAGE = 100


def page_size(first: int | None, default: int = 20) -> int:
    size = default if first is None else first
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_PAGE:
        raise BadInput(f"page size must be between 1 and {MAX_PAGE}")
    return size


def cursor(after: str | None) -> uuid.UUID | None:
    return parse_optional_id(after or None, "cursor")
