"""A live operation's frames: the same text around each item's data or errors, its extensions included,
and nothing of them kept but that text (feedfabric.adapter.websocket.operation)."""

from __future__ import annotations

from typing import Any

from feedfabric.adapter.websocket.operation import Operation
from feedfabric.core import jsonwire
from feedfabric.realtime.item import TimelineItem
from graphql import GraphQLError
from strawberry.types.execution import ExecutionResult

from tests.factories import timeline_item

EXTENSIONS = {
    "cost": {"requestedQueryCost": 12, "maximumAvailable": 10_000},
    "rateLimit": {"limit": 600, "remaining": 598, "resetSeconds": 41, "costLimit": 60_000, "costRemaining": 59_976},
}


class _Rendering:
    """Item 1 is rendered and shared; any other fails with a field error (a result, not text)."""

    def ready(self, item: TimelineItem) -> str | None:
        return '{"homeTimeline":{"cursor":"c1"}}' if item.post.id.int == 1 else None

    async def render(self, item: TimelineItem) -> Any:
        return ExecutionResult(data=None, errors=[GraphQLError("gone", extensions={"code": "NOT_FOUND"})])


def _transport_frame(operation: Operation, payload: str) -> str:
    return '{"id":' + operation.id_json + ',"type":"next","payload":' + payload + "}"


def _live(extensions: Any) -> Operation:
    operation = Operation("op-7", _transport_frame)
    operation.listener(_Rendering())
    operation.go_live(extensions)
    return operation


def test_a_shared_items_frame_is_its_data_with_the_operations_id_and_extensions() -> None:
    frame = _live(EXTENSIONS).ready(timeline_item(1))
    assert frame is not None
    assert jsonwire.loads(frame) == {
        "id": "op-7",
        "type": "next",
        "payload": {"data": {"homeTimeline": {"cursor": "c1"}}, "extensions": EXTENSIONS},
    }


async def test_an_items_errors_go_out_with_the_same_extensions() -> None:
    frame = await _live(EXTENSIONS).render(timeline_item(2))
    assert jsonwire.loads(frame)["payload"] == {
        "data": None,
        "errors": [{"message": "gone", "extensions": {"code": "NOT_FOUND"}}],
        "extensions": EXTENSIONS,
    }


async def test_without_extensions_no_frame_carries_any() -> None:
    operation = _live(None)
    shared, failed = operation.ready(timeline_item(1)), await operation.render(timeline_item(2))
    assert shared is not None
    assert "extensions" not in jsonwire.loads(shared)["payload"]
    assert set(jsonwire.loads(failed)["payload"]) == {"data", "errors"}


def test_a_live_operation_keeps_its_extensions_only_in_its_frames_text() -> None:
    extensions = _live(EXTENSIONS).extensions
    assert (extensions.value, extensions.text) == (None, "")
