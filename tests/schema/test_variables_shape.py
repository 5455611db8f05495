"""Variables that are not an object are the client's error on every path, tracing on or off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from feedfabric.core import tracing
from feedfabric.core.settings import Settings

from tests.realtime_support import PROTOCOLS, serve, ws_client
from tests.tracing_support import traced_process

NOT_OBJECTS: list[Any] = ["x", [1], 7]


@pytest.fixture
def traced(settings: Settings) -> Iterator[tracing.Tracing]:
    with traced_process(settings) as made:
        yield made


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_socket_variables_that_are_not_an_object_are_bad_user_input_with_recent_traces_on(
    settings: Settings, traced: tracing.Tracing, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert traced.recent is not None  # the recent-traces view is on
    async with serve(settings, traced) as server:
        token = await server.api.member("shaper")
        async with ws_client(server, protocol, token) as ws:
            for variables in NOT_OBJECTS:
                kind = "subscribe" if protocol == "graphql-transport-ws" else "start"
                payload = {"query": "{ viewer { id } }", "variables": variables}
                await ws.conn.send(json.dumps({"id": str(variables), "type": kind, "payload": payload}))
                message = await ws.next_message()
                while message["type"] == "complete":
                    message = await ws.next_message()
                answer = message["payload"]
                errors = answer if isinstance(answer, list) else answer.get("errors", [answer])
                assert [e.get("extensions", {}).get("code") for e in errors] == ["BAD_USER_INPUT"], message
    assert "Traceback" not in caplog.text
