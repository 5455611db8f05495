"""A listener writes a live subscription's frames from the fan-out itself: in order, never waiting,
and a subscriber too far behind is cut off (feedfabric.realtime.listener)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from feedfabric.realtime.item import TimelineItem
from feedfabric.realtime.listener import INTERNAL_ERROR, TRY_AGAIN_LATER, Listener

from tests.factories import timeline_item


@dataclass
class _Frames:
    """A socket that takes every frame; an item is rendered once `rendered` allows it (for those not ready)."""

    ready_ids: set[int] = field(default_factory=set)
    rendered: asyncio.Event = field(default_factory=asyncio.Event)
    fail: bool = False
    limit: int = 4
    written: list[str] = field(default_factory=list)
    ended: list[tuple[int, str]] = field(default_factory=list)
    renders: int = 0

    def ready(self, item: TimelineItem) -> str | None:
        n = item.post.id.int
        return f"frame {n}" if n in self.ready_ids else None

    async def render(self, item: TimelineItem) -> str:
        self.renders += 1
        await self.rendered.wait()
        if self.fail:
            raise RuntimeError("rendering failed")
        self.ready_ids.add(item.post.id.int)
        return f"frame {item.post.id.int}"

    def write(self, frame: str) -> None:
        self.written.append(frame)

    def end(self, code: int, reason: str) -> None:
        self.ended.append((code, reason))


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_an_item_whose_rendering_is_finished_is_written_on_the_spot() -> None:
    frames = _Frames(ready_ids={1})
    listener = Listener(frames)
    listener.offer(timeline_item(1))
    assert frames.written == ["frame 1"] and frames.renders == 0


async def test_items_behind_one_being_rendered_wait_for_it_and_keep_their_order() -> None:
    frames = _Frames(ready_ids={2})
    listener = Listener(frames)
    listener.offer(timeline_item(1))
    listener.offer(timeline_item(2))  # ready, but behind 1
    await _settle()
    assert frames.written == []
    frames.rendered.set()
    await _settle()
    assert frames.written == ["frame 1", "frame 2"] and frames.renders == 1


async def test_a_held_listener_writes_nothing_until_it_goes_live_then_everything_in_order() -> None:
    frames = _Frames(ready_ids={1, 2})
    listener = Listener(frames, held=True)
    listener.offer(timeline_item(1))
    listener.offer(timeline_item(2))
    await _settle()
    assert frames.written == []
    listener.go_live()
    await _settle()
    listener.offer(timeline_item(3))
    frames.rendered.set()
    await _settle()
    assert frames.written == ["frame 1", "frame 2", "frame 3"]


async def test_items_the_stream_would_not_admit_are_not_written() -> None:
    frames = _Frames(ready_ids={1, 2})
    listener = Listener(frames)
    listener.admit = lambda item: item.post.id.int != 1
    listener.offer(timeline_item(1))
    listener.offer(timeline_item(2))
    assert frames.written == ["frame 2"]


async def test_a_subscriber_past_its_limit_is_cut_off_with_try_again_later() -> None:
    frames = _Frames(limit=2)
    listener = Listener(frames)
    released: list[str | None] = []
    listener.release = released.append
    for n in range(4):
        listener.offer(timeline_item(n))
    assert [code for code, _ in frames.ended] == [TRY_AGAIN_LATER]
    assert "since" in frames.ended[0][1]
    assert released and released[0] is not None and released[0].startswith("too slow")
    listener.offer(timeline_item(9))  # off the hub: nothing more is held for it
    assert len(frames.ended) == 1


async def test_a_rendering_that_fails_ends_this_subscriber_only_with_1011() -> None:
    frames = _Frames(fail=True)
    listener = Listener(frames)
    released: list[str | None] = []
    listener.release = released.append
    listener.offer(timeline_item(1))
    frames.rendered.set()
    await _settle()
    assert frames.ended == [(INTERNAL_ERROR, "Internal server error")] and released == ["failed"]


async def test_closing_a_listener_cancels_its_rendering_and_takes_it_off_the_hub_once() -> None:
    frames = _Frames()
    listener = Listener(frames)
    released: list[str | None] = []
    listener.release = released.append
    listener.offer(timeline_item(1))
    await _settle()
    listener.close()
    listener.close()
    frames.rendered.set()
    await _settle()
    assert frames.written == [] and released == [None]
