"""A service's background task: started once, stopped by cancelling it and waiting until it has ended.

Several services of the API process run one loop beside the requests (the
primary watch, the replica monitor, the WebSocket rights sweep, the loop
watchdog's heartbeat, the feed log's writer, the realtime consumer), started
in the app's lifespan and stopped at its end. Stopping waits for the task, so
nothing of it runs on once its pools are closed, and a second start is a no-op.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["Background"]


class Background:
    """One named background task; `name` is the asyncio task's name (it shows in task dumps)."""

    __slots__ = ("_task", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Runs `run()` as the task, unless it runs already."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(run(), name=self.name)

    async def stop(self, grace_s: float = 0.0) -> None:
        """Ends the task: given `grace_s`, it may first end by itself (its owner has asked it to, and an
        error it ends with is raised here); then it is cancelled. It has ended when this returns."""
        task, self._task = self._task, None
        if task is None:
            return
        if grace_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), grace_s)
                return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
