"""A stalled event loop is noticed: logged with where it is stuck, counted, and a SIGTERM still ends it."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import time

import pytest
from feedfabric.http.watchdog import EXIT_ON_SIGTERM, LoopWatchdog
from prometheus_client import REGISTRY


def a_walk_that_does_not_await(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def stalls_counted() -> float:
    return REGISTRY.get_sample_value("feedfabric_event_loop_stalls_total") or 0.0


async def test_a_stall_is_logged_once_with_the_stuck_stack_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = LoopWatchdog(threshold_s=0.2, grace_s=5)
    watchdog.start()
    before = stalls_counted()
    try:
        await asyncio.sleep(0.05)
        with caplog.at_level(logging.ERROR, logger="feedfabric.watchdog"):
            a_walk_that_does_not_await(1.0)
            await asyncio.sleep(0.3)
    finally:
        await watchdog.stop()
    stalls = [r for r in caplog.records if "stalled" in r.getMessage()]
    assert len(stalls) == 1
    assert "a_walk_that_does_not_await" in stalls[0].getMessage()
    assert stalls_counted() == before + 1


async def test_a_loop_that_keeps_answering_is_never_reported(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = LoopWatchdog(threshold_s=0.2, grace_s=5)
    watchdog.start()
    try:
        with caplog.at_level(logging.ERROR, logger="feedfabric.watchdog"):
            for _ in range(10):
                a_walk_that_does_not_await(0.05)
                await asyncio.sleep(0.01)
    finally:
        await watchdog.stop()
    assert not [r for r in caplog.records if "stalled" in r.getMessage()]


STALLED_SERVER = textwrap.dedent(
    """
    import asyncio, signal
    from feedfabric.http.watchdog import LoopWatchdog

    async def main():
        # As uvicorn does: SIGTERM only sets a flag that the loop would read.
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        watchdog = LoopWatchdog(threshold_s=0.2, grace_s=1.0)
        watchdog.start()
        await asyncio.sleep(0.1)
        print("stalling", flush=True)
        while True:
            pass

    asyncio.run(main())
    """
)


def test_sigterm_during_a_stall_ends_the_process_within_the_grace() -> None:
    # As a context manager, so its pipe is closed however the test ends.
    with subprocess.Popen([sys.executable, "-c", STALLED_SERVER], stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None and process.stdout.readline().strip() == "stalling"
            time.sleep(0.5)
            sent = time.monotonic()
            process.terminate()
            code = process.wait(timeout=10)
            assert code == EXIT_ON_SIGTERM
            assert time.monotonic() - sent < 1.0 + 2.0
        finally:
            process.kill()
