"""The hub's rules for handing a live item to a subscriber: queued for its task, or written past it.

The socket end is a recorder here (the lane's LiveOperation), so each rule can
be set up exactly; tests/test_realtime_lane.py runs the same path over real
sockets.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from feedfabric.realtime.hub import Channel, Hub, Subscriber, SubscriberDropped
from feedfabric.realtime.lane import Lane
from feedfabric.realtime.render import SharedRenders

OPERATION = object()  # a parsed operation: compared by identity
VARIABLES: dict[str, Any] = {}


@dataclass
class _Post:
    id: uuid.UUID = field(default_factory=uuid.uuid4)


@dataclass(eq=False)
class _Item:
    post: _Post = field(default_factory=_Post)
    renders: SharedRenders = field(default_factory=SharedRenders)


@dataclass
class _Result:
    data: Any
    errors: Any = None


@dataclass
class _Socket:
    """What a LiveOperation gives the lane: the encoder, whether it can write now, the write."""

    writable: bool = True
    sent: list[bytes] = field(default_factory=list)

    def encode(self, value: Any) -> str:
        return json.dumps(value)

    def can_send_now(self) -> bool:
        return self.writable

    def send_now(self, data: bytes) -> None:
        self.sent.append(data)


async def _render(item: _Item, data: Any) -> None:
    """As the first subscriber's execution does (feedfabric.schema.shared)."""
    await item.renders.render(OPERATION, VARIABLES, lambda: _Result(data))


def _subscriber(hub: Hub, member: uuid.UUID) -> tuple[Subscriber, _Socket]:
    sub = hub.add(Channel.TIMELINE, member)
    socket = _Socket()
    lane = Lane(socket)  # type: ignore[arg-type]
    seen: set[uuid.UUID] = set()

    def admit(item: Any) -> bool:
        first = item.post.id not in seen
        seen.add(item.post.id)
        return first

    lane.admit = admit
    lane.open(OPERATION, VARIABLES)
    sub.lane = lane
    return sub, socket


async def _asleep(
    hub: Hub, count: int
) -> tuple[list[uuid.UUID], list[tuple[Subscriber, _Socket]], list[asyncio.Task[Any]]]:
    """`count` members, each with one subscriber whose task sleeps in its mailbox."""
    members = [uuid.uuid4() for _ in range(count)]
    subs = [_subscriber(hub, m) for m in members]
    return members, subs, [await _waiting(sub) for sub, _ in subs]


def _publish(hub: Hub, members: list[uuid.UUID], item: _Item) -> None:
    for member in members:
        hub.publish(Channel.TIMELINE, member, item)


async def _waiting(sub: Subscriber) -> asyncio.Task[Any]:
    """The subscriber's task, asleep in its mailbox."""
    task = asyncio.ensure_future(sub.next())
    await asyncio.sleep(0)
    assert sub.queue.idle()
    return task


async def test_an_idle_subscriber_gets_a_rendered_item_written_without_its_task_waking() -> None:
    hub = Hub()
    member = uuid.uuid4()
    sub, socket = _subscriber(hub, member)
    task = await _waiting(sub)
    item = _Item()
    await _render(item, {"n": 1})
    assert hub.publish(Channel.TIMELINE, member, item) == 1
    assert socket.sent == [b'{"n": 1}']
    assert sub.queue.idle() and not task.done()
    task.cancel()


async def test_an_item_waits_behind_what_the_subscriber_has_not_taken_yet() -> None:
    hub = Hub()
    member = uuid.uuid4()
    sub, socket = _subscriber(hub, member)
    first, second = _Item(), _Item()
    for item in (first, second):
        await _render(item, {"id": str(item.post.id)})
    hub.publish(Channel.TIMELINE, member, first)  # the task is busy: queued
    task = asyncio.ensure_future(sub.next())
    hub.publish(Channel.TIMELINE, member, second)  # woken for `first`, not run yet: queued behind it
    assert socket.sent == []
    assert await task is first
    assert await sub.next() is second


async def test_a_paused_socket_gets_the_item_through_its_task() -> None:
    hub = Hub()
    member = uuid.uuid4()
    sub, socket = _subscriber(hub, member)
    task = await _waiting(sub)
    socket.writable = False
    item = _Item()
    await _render(item, {"n": 1})
    hub.publish(Channel.TIMELINE, member, item)
    assert await task is item
    assert socket.sent == []


async def test_the_first_subscriber_renders_and_the_parked_ones_are_written_when_it_moves_on() -> None:
    hub = Hub()
    members, subs, tasks = await _asleep(hub, 3)
    item = _Item()
    _publish(hub, members, item)
    await asyncio.sleep(0)
    assert [t.done() for t in tasks] == [True, False, False]  # only the renderer woke
    assert tasks[0].result() is item
    await _render(item, {"n": 1})
    renderer_next = asyncio.ensure_future(subs[0][0].next())  # done with it: the parked ones get it
    await asyncio.sleep(0)
    assert [socket.sent for _, socket in subs] == [[], [b'{"n": 1}'], [b'{"n": 1}']]
    assert not tasks[1].done() and not tasks[2].done()
    assert hub.stats.direct == 2
    for task in (renderer_next, *tasks[1:]):
        task.cancel()


async def test_parked_subscribers_take_the_item_themselves_when_no_shared_rendering_came() -> None:
    hub = Hub()
    members, subs, tasks = await _asleep(hub, 2)
    item = _Item()
    _publish(hub, members, item)
    assert await tasks[0] is item
    hub.remove(subs[0][0])  # leaves without rendering it (an error, a cancelled task)
    assert await asyncio.wait_for(tasks[1], 1) is item
    assert subs[1][1].sent == []


async def test_a_parked_subscriber_that_got_more_items_takes_them_all_in_order() -> None:
    hub = Hub()
    members, subs, tasks = await _asleep(hub, 2)
    first, second = _Item(), _Item()
    _publish(hub, members, first)
    hub.publish(Channel.TIMELINE, members[1], second)  # queued behind `first`, which wakes it
    await _render(first, {"n": 1})
    assert await tasks[1] is first
    assert await subs[1][0].next() is second
    assert subs[1][1].sent == []
    tasks[0].cancel()


async def test_an_item_the_stream_already_sent_is_not_written_again() -> None:
    hub = Hub()
    member = uuid.uuid4()
    sub, socket = _subscriber(hub, member)
    task = await _waiting(sub)
    item = _Item()
    await _render(item, {"n": 1})
    hub.publish(Channel.TIMELINE, member, item)
    hub.publish(Channel.TIMELINE, member, item)
    assert socket.sent == [b'{"n": 1}']
    task.cancel()


async def test_a_parked_subscriber_whose_socket_paused_meanwhile_takes_the_item_itself() -> None:
    hub = Hub()
    members, subs, tasks = await _asleep(hub, 2)
    item = _Item()
    _publish(hub, members, item)
    await _render(item, {"n": 1})
    subs[1][1].writable = False
    renderer_next = asyncio.ensure_future(subs[0][0].next())
    assert await asyncio.wait_for(tasks[1], 1) is item
    assert subs[1][1].sent == []
    renderer_next.cancel()


async def test_a_socket_that_fails_its_write_costs_the_other_recipients_nothing() -> None:
    hub = Hub()
    members, subs, tasks = await _asleep(hub, 3)

    def broken(data: bytes) -> None:
        raise ConnectionResetError("gone")

    subs[1][1].send_now = broken  # type: ignore[method-assign]
    item = _Item()
    await _render(item, {"n": 1})
    _publish(hub, members, item)
    assert [socket.sent for _, socket in subs] == [[b'{"n": 1}'], [], [b'{"n": 1}']]
    with pytest.raises(SubscriberDropped, match="connection failed"):
        await tasks[1]  # its task closes the socket with the reason
    assert not tasks[0].done() and not tasks[2].done()
    assert hub.subscriber_count() == 2
    for task in (tasks[0], tasks[2]):
        task.cancel()
