"""Results of one live item's rendering, shared by its subscribers (see feedfabric.schema.shared).

Kept on the item itself, so it lives exactly as long as some subscriber's
queue still holds the item; nothing to expire. Besides the result, the JSON
of its `data` is kept once encoded, so the subscribers that send the item
pre-encoded (feedfabric.realtime.live) encode it once between them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any


class _Rendering:
    """One operation's rendering of the item: in flight until `done` has the result (None: not shareable)."""

    __slots__ = ("data", "data_json", "done", "operation")

    def __init__(self, operation: Any, done: asyncio.Future[Any]) -> None:
        self.operation = operation
        self.done = done
        self.data_json: str | None = None
        self.data: bytes | None = None  # data_json, UTF-8


class SharedRenders:
    """Finished (or in-flight) results by operation and variables, and which operations may share."""

    def __init__(self) -> None:
        # Keyed by id(operation); the operation is kept beside the value and compared by identity,
        # so an id reused by another document after the first was freed is never mistaken for it.
        self._results: dict[tuple[int, str], _Rendering] = {}
        self._shareable: dict[int, tuple[Any, bool]] = {}
        # Subscribers waiting, unwoken, for the first rendering of a selection (feedfabric.realtime.lane).
        self._parked: dict[tuple[int, str], list[Any]] = {}

    def shareable(self, operation: Any, decide: Callable[[], bool]) -> bool:
        known = self._shareable.get(id(operation))
        if known is None or known[0] is not operation:
            known = (operation, decide())
            self._shareable[id(operation)] = known
        return known[1]

    async def render(self, operation: Any, variables: Mapping[str, Any], execute: Callable[[], Any]) -> Any:
        """The shared result for this operation and variables, executing it if no subscriber did yet.

        Later subscribers wait for an in-flight first rendering rather than start their own.
        """
        key = _key(operation, variables)
        entry = self._results.get(key)
        if entry is not None and entry.operation is operation:
            shared = await asyncio.shield(entry.done)
            # None: the first rendering failed or had errors, so each subscriber renders its own.
            return shared if shared is not None else await _maybe_await(execute())
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._results[key] = _Rendering(operation, done)
        result = None
        try:
            result = await _maybe_await(execute())
        finally:
            done.set_result(result if result is not None and not result.errors else None)
        return result

    async def data_json(self, operation: Any, variables: Mapping[str, Any], encode: Callable[[Any], str]) -> str | None:
        """The shared result's `data` as JSON, if a subscriber with this operation and variables rendered
        the item (waiting for a rendering in flight) without errors; None when each must render its own."""
        entry = self._results.get(_key(operation, variables))
        if entry is None or entry.operation is not operation:
            return None
        shared = entry.done.result() if entry.done.done() else await asyncio.shield(entry.done)
        if shared is None:
            return None
        if entry.data_json is None:
            entry.data_json = encode(shared.data)
        return entry.data_json

    def ready_data(self, operation: Any, key: tuple[int, str], encode: Callable[[Any], str]) -> bytes | None:
        """`data_json` encoded to UTF-8, without waiting: None unless the rendering is finished (and
        shareable). Encoded once for all the sockets it is written to (feedfabric.realtime.lane)."""
        entry = self._results.get(key)
        if entry is None or entry.operation is not operation or not entry.done.done():
            return None
        if entry.data is None:
            shared = entry.done.result()
            if shared is None:
                return None
            if entry.data_json is None:
                entry.data_json = encode(shared.data)
            entry.data = entry.data_json.encode()
        return entry.data

    def shared(self, operation: Any, variables: Mapping[str, Any]) -> bool:
        """Whether the item was rendered for this operation and variables once for all, without errors."""
        entry = self._results.get(_key(operation, variables))
        return (
            entry is not None and entry.operation is operation and entry.done.done() and entry.done.result() is not None
        )

    def park(self, key: tuple[int, str], subscriber: Any) -> bool:
        """Parks `subscriber` until the selection's first rendering; False (nothing parked) when nobody
        is rendering it yet, and the caller's subscriber becomes the one who does."""
        parked = self._parked.get(key)
        if parked is None:
            self._parked[key] = []
            return False
        parked.append(subscriber)
        return True

    def unpark(self, key: tuple[int, str]) -> list[Any]:
        """The subscribers parked on the selection; the next to ask renders it again."""
        return self._parked.pop(key, None) or []


def key_of(operation: Any, variables: Mapping[str, Any]) -> tuple[int, str]:
    """What a rendering is kept under: the operation and its variables."""
    return _key(operation, variables)


def _key(operation: Any, variables: Mapping[str, Any]) -> tuple[int, str]:
    return id(operation), json.dumps(variables, sort_keys=True, default=str) if variables else ""


async def _maybe_await(value: Any) -> Any:
    return await value if asyncio.isfuture(value) or asyncio.iscoroutine(value) else value
