"""The subscriber inbox: bounded by the hub, and holding nothing while it is empty."""

from __future__ import annotations

import asyncio

import pytest
from feedfabric.realtime.mailbox import Mailbox


async def test_mailbox_is_fifo_wakes_its_reader_and_holds_nothing_once_drained() -> None:
    box: Mailbox[int] = Mailbox()
    reader = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    box.put(1)
    box.put(2)
    assert await reader == 1
    assert len(box) == 1 and await box.get() == 2
    assert len(box) == 0 and box._items is None
    box.put(3)
    box.clear()
    assert len(box) == 0
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(box.get(), 0.05)
    assert box._waiter is None  # a cancelled reader leaves no waiter behind


async def test_mailbox_refuses_a_second_reader() -> None:
    box: Mailbox[int] = Mailbox()
    first = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError):
        await box.get()
    first.cancel()
