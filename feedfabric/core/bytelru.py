"""A cache bounded in bytes, not entries: what a client can fill with texts of its choosing."""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["ByteBoundedLRU"]


class ByteBoundedLRU:
    """Texts by hash, least recently used dropped first once their bytes pass `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[str, str] = OrderedDict()

    def get(self, sha: str) -> str | None:
        text = self._entries.get(sha)
        if text is not None:
            self._entries.move_to_end(sha)
        return text

    def put(self, sha: str, text: str) -> None:
        previous = self._entries.pop(sha, None)
        if previous is not None:
            self.bytes -= _size(sha, previous)
        self._entries[sha] = text
        self.bytes += _size(sha, text)
        while self.bytes > self.max_bytes and self._entries:
            old_sha, old_text = self._entries.popitem(last=False)
            self.bytes -= _size(old_sha, old_text)

    def __len__(self) -> int:
        return len(self._entries)


def _size(sha: str, text: str) -> int:
    return len(sha) + len(text.encode("utf-8"))
