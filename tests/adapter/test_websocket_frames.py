"""The frame rules and the send queue of the WebSocket adapter, without a server."""

from __future__ import annotations

import asyncio

import pytest
from feedfabric.adapter.websocket.connection import Connection
from feedfabric.adapter.websocket.frames import (
    MAX_CHARS_BEFORE_INIT,
    MAX_FRAMES_BEFORE_INIT,
    TRY_AGAIN_LATER,
    BeforeInit,
    Extensions,
    Malformed,
    MessageBudget,
    parse,
    payload_text,
)
from feedfabric.adapter.websocket.origins import Origins
from feedfabric.core import jsonwire, metrics
from graphql import GraphQLError
from strawberry.types.execution import ExecutionResult


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{x", "Message must be valid JSON"),
        ('{"type": "ping"', "Message must be valid JSON"),
        ("[1]", "Message must be a JSON object"),
        ('{"type": 1}', "Message type must be a string"),
        ('{"type": "subscribe", "id": 1, "payload": {"query": "{ a }"}}', "Message id must be a string"),
        ('{"type": "start", "id": "1", "payload": {"query": 5}}', "The payload's query must be a string"),
    ],
)
def test_a_frame_that_is_not_a_message_of_the_protocols_shape_is_malformed(text: str, reason: str) -> None:
    with pytest.raises(Malformed) as malformed:
        parse(text)
    assert str(malformed.value) == reason


def test_a_message_of_the_right_shape_parses() -> None:
    message = parse('{"type": "subscribe", "id": "1", "payload": {"query": "{ a }", "operationName": null}}')
    assert message["payload"]["query"] == "{ a }"


def test_before_init_a_socket_may_send_a_few_small_frames_only() -> None:
    few = BeforeInit()
    assert all(few.admit(10) is None for _ in range(MAX_FRAMES_BEFORE_INIT))
    assert "at most" in (few.admit(10) or "")
    small = BeforeInit()
    assert small.admit(MAX_CHARS_BEFORE_INIT) is None
    assert "characters" in (small.admit(1) or "")


def test_the_message_budget_refuses_past_a_seconds_frames() -> None:
    now = [0.0]
    budget = MessageBudget(10, clock=lambda: now[0])
    assert sum(budget.spend() for _ in range(30)) == 10
    now[0] += 0.5
    assert sum(budget.spend() for _ in range(30)) == 5


def test_each_operations_payload_carries_its_own_extensions() -> None:
    data = {"homeTimeline": {"cursor": "c", "post": {"id": "p", "content": 'caf\u00e9 "q"'}}}
    first, second = Extensions(), Extensions()
    texts = [
        payload_text(ExecutionResult(data=data, errors=None, extensions={"cost": {"n": n}}), ext)
        for n, ext in ((1, first), (2, second))
    ]
    assert [jsonwire.loads(t) for t in texts] == [{"data": data, "extensions": {"cost": {"n": n}}} for n in (1, 2)]


def test_a_result_with_errors_is_encoded_whole() -> None:
    result = ExecutionResult(data=None, errors=[GraphQLError("no", extensions={"code": "X"})], extensions=None)
    text = payload_text(result, Extensions())
    assert jsonwire.loads(text) == {"data": None, "errors": [{"message": "no", "extensions": {"code": "X"}}]}


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({}, True),
        ({"origin": "https://app.example:443", "host": "api.internal"}, True),
        ({"origin": "http://api.internal:8000", "host": "api.internal:8000"}, True),
        ({"origin": "https://evil.example", "host": "api.internal"}, False),
        ({"origin": "null", "host": "api.internal"}, False),
    ],
)
def test_only_listed_or_same_origins_may_open_a_socket(headers: dict[str, str], allowed: bool) -> None:
    assert Origins(["https://app.example", ""]).allows(headers) is allowed


class _BlockedSocket:
    """Starlette's WebSocket as far as Connection uses it, with a reader that stops reading: a send
    waits until `readable` is set, as uvicorn's does while the peer's window is full."""

    def __init__(self) -> None:
        self.readable = asyncio.Event()
        self.sent: list[str] = []
        self.closed: tuple[int, str] | None = None

    async def send_text(self, text: str) -> None:
        await self.readable.wait()
        self.sent.append(text)

    async def close(self, code: int, reason: str = "") -> None:
        self.closed = (code, reason)


async def test_a_reader_past_its_send_queue_is_closed_with_try_again_later() -> None:
    socket = _BlockedSocket()
    conn = Connection(socket, max_pending=3)  # type: ignore[arg-type]
    ended: list[bool] = []
    conn.on_close = lambda: ended.append(True)
    blocked = asyncio.create_task(conn.send("first"))
    await asyncio.sleep(0)
    for n in range(3):
        await conn.send(f"queued {n}")  # returns at once: queued behind the waiting write
    assert not conn.closed
    await conn.send("one too many")
    assert conn.closed and ended == [True]
    socket.readable.set()
    await blocked
    await conn.closed_down()
    assert socket.closed is not None and socket.closed[0] == TRY_AGAIN_LATER and "since" in socket.closed[1]
    assert socket.sent == ["first"]  # nothing queued is written once the socket is closing


async def test_writes_queued_behind_a_slow_one_go_out_in_order() -> None:
    socket = _BlockedSocket()
    conn = Connection(socket, max_pending=8)  # type: ignore[arg-type]
    blocked = asyncio.create_task(conn.send("a"))
    await asyncio.sleep(0)
    await conn.send("b")
    await conn.send("c")
    socket.readable.set()
    await blocked
    assert socket.sent == ["a", "b", "c"] and not conn.closed


async def test_posted_frames_never_wait_and_go_out_in_order_behind_a_waiting_write() -> None:
    socket = _BlockedSocket()
    conn = Connection(socket, max_pending=8)  # type: ignore[arg-type]
    conn.post("a")  # returns at once: a task of the connection's writes it
    conn.post("b")
    await asyncio.sleep(0)
    await conn.send("c")  # queued behind the posted write, which waits for the reader
    assert socket.sent == []
    socket.readable.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert socket.sent == ["a", "b", "c"] and not conn.closed


async def test_posting_past_the_send_queue_closes_with_try_again_later() -> None:
    socket = _BlockedSocket()
    conn = Connection(socket, max_pending=2)  # type: ignore[arg-type]
    for n in range(4):
        conn.post(str(n))
    assert conn.closed
    socket.readable.set()
    await conn.closed_down()
    assert socket.closed is not None and socket.closed[0] == TRY_AGAIN_LATER


def _unsent_closes() -> float:
    return metrics.DROPPED_SUBSCRIBERS.labels(reason="unsent_bytes")._value.get()


async def test_bytes_unsent_past_the_bound_close_with_try_again_later_and_are_counted() -> None:
    """Frames alone did not bound memory: a few large frames behind a reader that does not read are
    refused by their bytes, queued and in flight together."""
    socket = _BlockedSocket()
    conn = Connection(socket, max_pending=100, max_bytes=1_000)  # type: ignore[arg-type]
    before = _unsent_closes()
    blocked = asyncio.create_task(conn.send("a" * 600))  # in flight: the reader takes nothing
    await asyncio.sleep(0)
    await conn.send("b" * 300)  # queued: 900 bytes unsent
    assert not conn.closed and conn.unsent == 900
    conn.post("é" * 60)  # 120 bytes as UTF-8, though 60 characters: past the bound
    assert conn.closed
    socket.readable.set()
    await blocked
    await conn.closed_down()
    assert socket.closed is not None and socket.closed[0] == TRY_AGAIN_LATER
    assert "bytes unsent" in socket.closed[1] and "since" in socket.closed[1]
    assert socket.sent == ["a" * 600]
    assert _unsent_closes() == before + 1


async def test_one_frame_larger_than_the_bound_is_never_written() -> None:
    socket = _BlockedSocket()
    socket.readable.set()
    conn = Connection(socket, max_pending=100, max_bytes=1_000)  # type: ignore[arg-type]
    await conn.send("x" * 1_000)  # at the bound: written
    assert socket.sent == ["x" * 1_000] and conn.unsent == 0
    await conn.send("y" * 1_001)
    await conn.closed_down()
    assert socket.sent == ["x" * 1_000]
    assert socket.closed is not None and socket.closed[0] == TRY_AGAIN_LATER


async def test_frames_of_a_completed_operation_queued_behind_a_slow_reader_are_not_written() -> None:
    """graphql-transport-ws: nothing of an operation is sent once its `complete` is read, a result that
    waited in the queue included."""
    socket = _BlockedSocket()
    conn = Connection(socket, max_pending=8, max_bytes=10_000)  # type: ignore[arg-type]
    completed, running = "completed", "running"
    blocked = asyncio.create_task(conn.send("first"))
    await asyncio.sleep(0)
    await conn.send("result of the completed one", completed)
    conn.post("result of the running one", running)
    conn.drop(completed)
    assert conn.unsent == len("first") + len("result of the running one")
    socket.readable.set()
    await blocked
    await conn.drained()
    assert socket.sent == ["first", "result of the running one"]


async def test_an_operation_completed_while_its_own_write_waits_loses_only_its_own_frame() -> None:
    """An operation's task writes its result itself; the client completes it (the task is cancelled)
    while the write waits for the reader, with another subscription's items queued behind. Those still
    go out, and the bytes count comes back to 0: the cancelled task used to take the queue down with it
    (the items lost without a close, their bytes counted unsent for ever)."""
    socket = _BlockedSocket()
    conn = Connection(socket, max_pending=8, max_bytes=10_000)  # type: ignore[arg-type]
    writing = asyncio.create_task(conn.send("the completed one's result", "completed"))
    await asyncio.sleep(0)
    conn.post("live item 1", "live")
    conn.post("live item 2", "live")
    writing.cancel()  # the client's `complete`: Protocol.stop cancels the operation's task
    await asyncio.gather(writing, return_exceptions=True)
    socket.readable.set()
    await conn.drained()
    assert socket.sent == ["live item 1", "live item 2"]
    assert conn.unsent == 0 and not conn.closed
