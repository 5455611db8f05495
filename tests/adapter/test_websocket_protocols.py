"""Both subscription protocols' frame rules, and live results rendered once, against a real server."""

from __future__ import annotations

import asyncio
import json

import pytest
from feedfabric.adapter.websocket.frames import MAX_CHARS_BEFORE_INIT, MAX_FRAMES_BEFORE_INIT
from feedfabric.adapter.websocket.operation import Operation
from feedfabric.core.settings import Settings
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.pipeline_support import relay, running
from tests.realtime_support import (
    HOME_SUB,
    PROTOCOLS,
    TRANSPORT_WS,
    WsClient,
    closed_with,
    raw_next,
    serve,
    wait_subscribed,
    ws_client,
)


async def _close_code(conn: ClientConnection, within: float = 5) -> tuple[int, str]:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            await asyncio.wait_for(conn.recv(), within)
    assert closed.value.rcvd is not None, "the server did not close the socket"
    return closed.value.rcvd.code, closed.value.rcvd.reason


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_frame_that_is_not_json_closes_with_4400_before_and_after_init(
    settings: Settings, protocol: str
) -> None:
    async with serve(settings) as server:
        maya = await server.api.member("maya")
        for frame in ("{x", '{"type": "connection_init"', "\x00"):
            async with connect(server.ws_url, subprotocols=[protocol]) as conn:  # type: ignore[list-item]
                await conn.send(frame)
                assert await _close_code(conn) == (4400, "Message must be valid JSON"), frame
            async with ws_client(server, protocol, maya) as ws:
                await ws.conn.send(frame)
                assert await closed_with(ws, within=5) == (4400, "Message must be valid JSON"), frame


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_binary_frames_close_with_4400(settings: Settings, protocol: str) -> None:
    async with serve(settings) as server:
        async with connect(server.ws_url, subprotocols=[protocol]) as conn:  # type: ignore[list-item]
            await conn.send(b'{"type": "connection_init"}')
            assert (await _close_code(conn))[0] == 4400


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_frames_before_connection_init_are_bounded_in_number_and_size(settings: Settings, protocol: str) -> None:
    async with serve(settings) as server:
        async with connect(server.ws_url, subprotocols=[protocol]) as conn:  # type: ignore[list-item]
            for _ in range(MAX_FRAMES_BEFORE_INIT + 1):
                await conn.send('{"type": "ping"}')
            code, reason = await _close_code(conn)
            assert code == 1008 and "before connection_init" in reason
        async with connect(server.ws_url, subprotocols=[protocol]) as conn:  # type: ignore[list-item]
            padding = "x" * MAX_CHARS_BEFORE_INIT
            await conn.send(json.dumps({"type": "connection_init", "payload": {"pad": padding}}))
            code, reason = await _close_code(conn)
            assert code == 1008 and "characters" in reason


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_frame_spends_the_budget_before_it_is_parsed(settings: Settings, protocol: str) -> None:
    """With a budget of one frame a second, the init spends it: the next frame, even one that is not JSON,
    is refused for the budget (1008), not parsed (which would close with 4400)."""
    async with serve(settings.model_copy(update={"ws_max_messages_per_second": 1})) as server:
        maya = await server.api.member("maya")
        async with ws_client(server, protocol, maya) as ws:
            await ws.conn.send("{x")
            assert await closed_with(ws, within=5) == (1008, "Too many messages")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_socket_that_never_initialises_is_closed_with_4408(settings: Settings, protocol: str) -> None:
    async with serve(settings.model_copy(update={"ws_init_timeout_seconds": 0.3})) as server:
        async with connect(server.ws_url, subprotocols=[protocol]) as conn:  # type: ignore[list-item]
            assert await _close_code(conn) == (4408, "Connection initialisation timeout")


async def test_a_client_offering_neither_protocol_is_closed_with_4406(settings: Settings) -> None:
    async with serve(settings) as server:
        async with connect(server.ws_url, subprotocols=["graphql-sse"]) as conn:  # type: ignore[list-item]
            assert (await _close_code(conn))[0] == 4406


async def _raw_for(ws: WsClient, post_id: str) -> str:
    """The result message about this post, as sent (an earlier post may arrive live first: the relay lags)."""
    while True:
        raw = await raw_next(ws)
        if json.loads(raw)["payload"]["data"]["homeTimeline"]["post"]["id"] == post_id:
            return raw


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_shared_live_bytes_equal_a_per_subscriber_execution(settings: Settings, protocol: str) -> None:
    """Two followers get one rendering of a live post, encoded once; a third, replaying the same post
    with `since` (a replayed item is executed for its subscriber alone), gets the same data, byte for byte."""
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice = await api.member("alice")
        readers = [await api.member(name) for name in ("bob", "carol", "dave")]
        for reader in readers:
            await api.follow(reader, "alice")
        before = await api.post(alice, "before")
        async with ws_client(server, protocol, readers[0]) as a, ws_client(server, protocol, readers[1]) as b:
            listeners = Operation.listeners
            await a.subscribe(HOME_SUB)
            await b.subscribe(HOME_SUB)
            await wait_subscribed(server, 2)
            # Both live subscriptions are written by the fan-out (feedfabric.realtime.listener), not their streams.
            assert Operation.listeners == listeners + 2
            shared = await api.post(alice, 'shared, caf\u00e9 \u2713 "quoted"')
            live = [await _raw_for(ws, shared) for ws in (a, b)]
            again = await api.post(alice, "again")
            live_again = [await _raw_for(ws, again) for ws in (a, b)]
        async with ws_client(server, protocol, readers[2]) as c:
            await c.subscribe(HOME_SUB, {"since": before})
            replayed = await _raw_for(c, shared)
            replayed_again = await _raw_for(c, again)
    kind = "next" if protocol == TRANSPORT_WS else "data"
    for raw in (*live, replayed):
        message = json.loads(raw)
        assert message["type"] == kind and message["id"] == "1"
    # The data's text, as sent: everything up to the per-operation extensions (each member's rate limit).
    texts = [raw.split(',"extensions":')[0] for raw in (*live, replayed)]
    assert texts[0] == texts[1] == texts[2]
    texts_again = [raw.split(',"extensions":')[0] for raw in (*live_again, replayed_again)]
    assert texts_again[0] == texts_again[1] == texts_again[2]
    assert all('"extensions":{"cost"' in raw for raw in (*live, *live_again, replayed, replayed_again))
    assert json.loads(live[0])["payload"]["data"] == json.loads(replayed)["payload"]["data"]
