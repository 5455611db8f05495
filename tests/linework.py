"""Work counted, not timed: the Python lines a block executes (any module), with a budget that stops it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


class WorkExceeded(AssertionError):
    pass


@contextmanager
def counting_lines(budget: int) -> Iterator[list[int]]:
    """Counts the Python lines executed inside the block (in any module), and stops the block with
    WorkExceeded as soon as they pass `budget`, so a walk that would never end fails instead."""
    count = [0]

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            count[0] += 1
            if count[0] > budget:
                raise WorkExceeded(f"more than {budget} lines")
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        yield count
    finally:
        sys.settrace(previous)
