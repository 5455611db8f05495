"""A loop-stall watchdog: no request holds the event loop for long unnoticed.

An asyncio process serves every request on one thread, so one request that
computes without awaiting (a walk that never ends, a regular expression that
backtracks) stops every other request and `/healthz` with it. A heartbeat
task notes the time each time the loop gets to it; a thread of its own
checks the note. Once the loop has missed it for `threshold_s`, the thread
logs the loop thread's stack (where the stuck coroutine is running) once per
stall and counts the stall.

A SIGTERM during a stall would otherwise be ignored for good: uvicorn's handler
only sets a flag that the stalled loop never reads. So the watchdog chains
itself before whatever handler is installed, notes when the signal came, and
if the loop is still stalled `grace_s` later, ends the process as the signal
would have (exit status 128 + SIGTERM). A loop that is not stalled shuts down
the ordinary way.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from feedfabric.core import metrics
from feedfabric.core.background import Background

__all__ = ["EXIT_ON_SIGTERM", "LoopWatchdog"]

log = logging.getLogger("feedfabric.watchdog")

EXIT_ON_SIGTERM = 128 + signal.SIGTERM


@dataclass
class LoopWatchdog:
    threshold_s: float
    grace_s: float
    last_tick: float = field(default_factory=time.monotonic)
    sigterm_at: float | None = None
    _heartbeat: Background = field(default_factory=lambda: Background("loop-watchdog-heartbeat"))
    _thread: threading.Thread | None = None
    _stopped: threading.Event = field(default_factory=threading.Event)
    _loop_thread: int = 0
    _previous_handler: Any = None

    @property
    def interval_s(self) -> float:
        return min(self.threshold_s / 4, 0.25)

    def start(self) -> None:
        """Call from the loop's own thread, inside the running loop."""
        self._loop_thread = threading.get_ident()
        self.last_tick = time.monotonic()
        self._heartbeat.start(self._beat)
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()
        if threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, self._on_sigterm)

    async def stop(self) -> None:
        self._stopped.set()
        await self._heartbeat.stop()
        if self._previous_handler is not None and signal.getsignal(signal.SIGTERM) == self._on_sigterm:
            signal.signal(signal.SIGTERM, self._previous_handler)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5)

    async def _beat(self) -> None:
        while True:
            self.last_tick = time.monotonic()
            await asyncio.sleep(self.interval_s)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.sigterm_at = time.monotonic()
        previous = self._previous_handler
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)

    def _watch(self) -> None:
        reported_tick: float | None = None
        while not self._stopped.wait(self.interval_s):
            now = time.monotonic()
            stalled_for = now - self.last_tick
            if stalled_for < self.threshold_s:
                continue
            if reported_tick != self.last_tick:
                reported_tick = self.last_tick
                metrics.LOOP_STALLS.inc()
                log.error("event loop stalled for %.1f s; the loop thread is at:\n%s", stalled_for, self.loop_stack())
            if self.sigterm_at is not None and now - self.sigterm_at >= self.grace_s:
                log.error("SIGTERM %.1f s ago and the event loop is still stalled: exiting", now - self.sigterm_at)
                logging.shutdown()
                os._exit(EXIT_ON_SIGTERM)

    def loop_stack(self) -> str:
        frame = sys._current_frames().get(self._loop_thread)
        return "".join(traceback.format_stack(frame)) if frame is not None else "(the loop thread is gone)"
