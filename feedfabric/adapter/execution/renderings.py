"""Results of one live item's rendering, shared by its subscribers: a result cache kept on the item.

Kept on the item itself (TimelineItem.renders, under this class), so it lives
exactly as long as some subscriber's queue still holds the item; nothing to
expire.

A shared result is also kept as its data's JSON text, encoded once: a
subscriber whose transport can write it as it is (the WebSocket adapter's
operation, through a listener: feedfabric.realtime.listener) sends those bytes
with its own operation id and never executes the item, nor runs the
per-result steps of the schema (an error-free shared result has nothing for
them to do). Per subscriber, that leaves the stream's admission check
(feedfabric.resolvers.streams) and a write.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

from feedfabric.core import jsonwire
from feedfabric.realtime.item import TimelineItem

RenderKey = tuple[int, str]


class _Rendering:
    """One operation's rendering of the item: in flight until `done` has the result (None: not shareable)."""

    __slots__ = ("done", "operation", "text")

    def __init__(self, operation: object, done: asyncio.Future[Any]) -> None:
        self.operation = operation
        self.done = done
        self.text: str | None = None  # the shared result's data as JSON, once it is done without errors


class SharedRenders:
    """Finished (or in-flight) results by operation and variables, and which operations may share."""

    __slots__ = ("_results", "_shareable")

    @classmethod
    def of(cls, item: TimelineItem) -> SharedRenders:
        """The item's renderings, made by the first subscriber that renders it."""
        renders = item.renders
        found: SharedRenders | None = renders.get(cls)
        if found is None:
            found = renders[cls] = cls()
        return found

    def __init__(self) -> None:
        # Keyed by id(operation); the operation is kept beside the value and compared by identity,
        # so an id reused by another document after the first was freed is never mistaken for it.
        self._results: dict[tuple[int, str], _Rendering] = {}
        self._shareable: dict[int, tuple[object, bool]] = {}

    def shareable(self, operation: object, decide: Callable[[], bool]) -> bool:
        known = self._shareable.get(id(operation))
        if known is None or known[0] is not operation:
            known = (operation, decide())
            self._shareable[id(operation)] = known
        return known[1]

    def render(self, operation: object, variables: Mapping[str, object], execute: Callable[[], Any]) -> Any:
        """The shared result for this operation and variables, executing it if no subscriber did yet.

        Every later subscriber of the item comes here, so a finished rendering is handed back as it is,
        not awaited; a subscriber arriving while the first rendering is in flight waits for it rather
        than start its own.
        """
        return self.render_keyed(operation, render_key(operation, variables), execute)

    def render_keyed(self, operation: object, key: RenderKey, execute: Callable[[], Any]) -> Any:
        """`render` under a key made once per subscription (`render_key`, or `liked_key` of it)."""
        entry = self._results.get(key)
        if entry is None or entry.operation is not operation:
            # Registered now, before the rendering starts: a subscriber that comes meanwhile waits for it.
            entry = _Rendering(operation, asyncio.get_running_loop().create_future())
            self._results[key] = entry
            return self._render_first(entry, execute)
        if entry.done.done():
            shared = entry.done.result()
            # None: the first rendering failed or had errors, so each subscriber renders its own.
            return shared if shared is not None else execute()
        return self._after_first(entry, execute)

    async def _render_first(self, entry: _Rendering, execute: Callable[[], Any]) -> Any:
        done = entry.done
        result = None
        try:
            result = await _maybe_await(execute())
        finally:
            shared = result if result is not None and not result.errors else None
            if shared is not None:
                entry.text = jsonwire.dumps_text(shared.data)
            done.set_result(shared)
        return result

    def finished_text(self, operation: object, key: RenderKey) -> str | None:
        """The shared text without waiting: the text when the rendering is done (the common case, for every
        subscriber after the first few), else None. `key` is `render_key(operation, variables)`."""
        entry = self._results.get(key)
        if entry is None or entry.operation is not operation or not entry.done.done():
            return None
        return entry.text

    def in_flight(self, operation: object, key: RenderKey) -> asyncio.Future[Any] | None:
        """The rendering under way for this key, to wait for, else None (none yet, or done)."""
        entry = self._results.get(key)
        if entry is None or entry.operation is not operation or entry.done.done():
            return None
        return entry.done

    async def _after_first(self, entry: _Rendering, execute: Callable[[], Any]) -> Any:
        shared = await asyncio.shield(entry.done)
        return shared if shared is not None else await _maybe_await(execute())


def render_key(operation: object, variables: Mapping[str, object]) -> RenderKey:
    """A rendering's key: made once per subscription, not per item."""
    return id(operation), json.dumps(variables, sort_keys=True, default=str) if variables else ""


def liked_key(key: RenderKey, liked: bool) -> RenderKey:
    """The key of the rendering for the subscribers whose `viewerHasLiked` of the item is `liked`, of a
    selection that reads nothing else about the viewer (feedfabric.adapter.execution.live)."""
    return key[0], f"{key[1]}\x00liked={int(liked)}"


async def _maybe_await(value: Any) -> Any:
    return await value if asyncio.isfuture(value) or asyncio.iscoroutine(value) else value
