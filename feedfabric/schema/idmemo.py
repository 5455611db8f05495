"""A bounded memo for keys made of object identities (the parser cache's AST nodes, schema types).

Hashing a document or a type by value costs more than the work memoised, so
the keys hold `id()`s; each entry keeps the objects its key names alive, so no
id in a live key can be reused by another object. Full, it starts over.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class IdMemo(Generic[V]):
    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._entries: dict[Hashable, tuple[Any, V]] = {}

    def get(self, key: Hashable, keep: Any, make: Callable[[], V]) -> V:
        """The value memoised under `key`, made (and `keep` held with it) on a miss."""
        hit = self._entries.get(key)
        if hit is None:
            value = make()
            if len(self._entries) >= self.limit:
                self._entries.clear()
            hit = self._entries[key] = (keep, value)
        return hit[1]
