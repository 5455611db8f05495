"""A client's `complete` (graphql-ws: `stop`) ends its operation: no result of it is sent afterwards."""

from __future__ import annotations

import asyncio
import json

import pytest
from feedfabric.core.settings import Settings

from tests.realtime_support import PROTOCOLS, TRANSPORT_WS, serve, ws_client

MUTATION = 'mutation { createPost(input: {content: "raced"}) { id } }'
RESULTS = ("next", "data", "error")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_no_result_follows_the_clients_complete(settings: Settings, protocol: str) -> None:
    """A mutation, then its `complete` 0 to 20 ms later, then a marker query. The socket reads frames in
    order, so the marker starts only after the complete was read: a result of the mutation that arrives
    after the marker's was sent after the complete, which the protocol forbids. One that arrives before
    may have gone out before the complete was read, which is allowed."""
    start, stop = ("subscribe", "complete") if protocol == TRANSPORT_WS else ("start", "stop")
    async with serve(settings) as server:
        token = await server.api.member("racer")
        async with ws_client(server, protocol, token) as ws:
            late = []
            for n in range(21):
                op, marker = f"m{n}", f"mark{n}"
                await ws.conn.send(json.dumps({"id": op, "type": start, "payload": {"query": MUTATION}}))
                if n:
                    await asyncio.sleep(n / 1000)
                await ws.conn.send(json.dumps({"id": op, "type": stop}))
                query = {"query": "{ viewer { id } }"}
                await ws.conn.send(json.dumps({"id": marker, "type": start, "payload": query}))
                marked = False
                while not marked:
                    message = await ws.next_message()
                    marked = message.get("id") == marker and message["type"] in RESULTS
                # Whatever of the mutation comes now was sent after its complete; the next trial's marker
                # bounds the wait, and the last one's is checked below.
                late += await _results_before_next_marker(ws, op, start, n)
            assert late == [], f"results sent after complete: {late}"


async def _results_before_next_marker(ws: object, op: str, start: str, n: int) -> list[str]:
    """Sends one more marker and collects results of `op` that arrive before its result."""
    from tests.realtime_support import WsClient

    assert isinstance(ws, WsClient)
    marker = f"after{n}"
    await ws.conn.send(json.dumps({"id": marker, "type": start, "payload": {"query": "{ viewer { id } }"}}))
    late = []
    while True:
        message = await ws.next_message()
        if message.get("id") == marker and message["type"] in RESULTS:
            return late
        if message.get("id") == op and message["type"] in RESULTS:
            late.append(op)
