"""A subscriber's bounded inbox that costs next to nothing while it is empty.

Each connected subscriber has one, and most of them are idle most of the
time: asyncio.Queue keeps three deques, an Event and their blocks from the
moment it is made (about 3 to 4 kB a subscriber, measured with bench/realtime.py). A subscriber has
exactly one reader, its own subscription task, so a deque made on the first
item and let go when drained, plus one waiter future while the reader waits,
is all it needs. The bound is the hub's business (it drops a subscriber
whose inbox is full), so the inbox itself never refuses an item.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

__all__ = ["Mailbox"]

T = TypeVar("T")


class Mailbox(Generic[T]):
    """Single-reader FIFO: `put` never blocks; `get` waits for an item."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[T] | None = None
        self._waiter: asyncio.Future[None] | None = None

    def __len__(self) -> int:
        return len(self._items) if self._items is not None else 0

    def put(self, item: T) -> None:
        if self._items is None:
            self._items = deque()
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._items = None

    def drain(self) -> list[T]:
        """Every waiting item, oldest first, taken out."""
        items, self._items = self._items, None
        return list(items) if items else []

    async def get(self) -> T:
        while not self._items:
            if self._waiter is not None:
                raise RuntimeError("Mailbox has one reader; a second get() is waiting")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self._items.popleft()
        if not self._items:
            self._items = None  # a drained inbox holds no deque block
        return item
