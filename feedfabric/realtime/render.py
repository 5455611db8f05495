"""Results of one live item's rendering, shared by its subscribers (see feedfabric.schema.shared).

Kept on the item itself, so it lives exactly as long as some subscriber's
queue still holds the item; nothing to expire.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any


class _Rendering:
    """One operation's rendering of the item: in flight until `done` has the result (None: not shareable)."""

    __slots__ = ("done", "operation")

    def __init__(self, operation: Any, done: asyncio.Future[Any]) -> None:
        self.operation = operation
        self.done = done


class SharedRenders:
    """Finished (or in-flight) results by operation and variables, and which operations may share."""

    def __init__(self) -> None:
        # Keyed by id(operation); the operation is kept beside the value and compared by identity,
        # so an id reused by another document after the first was freed is never mistaken for it.
        self._results: dict[tuple[int, str], _Rendering] = {}
        self._shareable: dict[int, tuple[Any, bool]] = {}

    def shareable(self, operation: Any, decide: Callable[[], bool]) -> bool:
        known = self._shareable.get(id(operation))
        if known is None or known[0] is not operation:
            known = (operation, decide())
            self._shareable[id(operation)] = known
        return known[1]

    def render(self, operation: Any, variables: Mapping[str, Any], execute: Callable[[], Any]) -> Any:
        """The shared result for this operation and variables, executing it if no subscriber did yet.

        Every later subscriber of the item comes here, so a finished rendering is handed back as it is,
        not awaited; a subscriber arriving while the first rendering is in flight waits for it rather
        than start its own.
        """
        key = _key(operation, variables)
        entry = self._results.get(key)
        if entry is None or entry.operation is not operation:
            return self._render_first(key, operation, execute)
        if entry.done.done():
            shared = entry.done.result()
            # None: the first rendering failed or had errors, so each subscriber renders its own.
            return shared if shared is not None else execute()
        return self._after_first(entry, execute)

    async def _render_first(self, key: tuple[int, str], operation: Any, execute: Callable[[], Any]) -> Any:
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._results[key] = _Rendering(operation, done)
        result = None
        try:
            result = await _maybe_await(execute())
        finally:
            done.set_result(result if result is not None and not result.errors else None)
        return result

    async def _after_first(self, entry: _Rendering, execute: Callable[[], Any]) -> Any:
        shared = await asyncio.shield(entry.done)
        return shared if shared is not None else await _maybe_await(execute())


def _key(operation: Any, variables: Mapping[str, Any]) -> tuple[int, str]:
    return id(operation), json.dumps(variables, sort_keys=True, default=str) if variables else ""


async def _maybe_await(value: Any) -> Any:
    return await value if asyncio.isfuture(value) or asyncio.iscoroutine(value) else value
