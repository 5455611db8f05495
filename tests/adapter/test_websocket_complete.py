"""A client's `complete` (graphql-ws: `stop`) ends its operation: no result of it is sent afterwards."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import pytest
from feedfabric.core.settings import Settings

from tests.pipeline_support import eventually
from tests.realtime_support import (
    PROTOCOLS,
    TRANSPORT_WS,
    Server,
    StalledClient,
    aliased_pages,
    bulk_posts,
    serve,
    ws_client,
)

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


BIG = aliased_pages(8)
"""8 aliases of 10 posts of 60 kB: a 4.8 MB answer that a reader who does not read leaves half written."""


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_result_waiting_behind_a_reader_that_does_not_read_is_dropped_by_its_complete(
    settings: Settings, pool: asyncpg.Pool, protocol: str
) -> None:
    """The race above, made certain: a large answer holds the socket (the reader takes nothing), the
    mutation commits and its result waits behind it, then the client completes the mutation. Nothing of
    it may go out once the reader reads again; the mutation itself stays done."""
    start, stop = ("subscribe", "complete") if protocol == TRANSPORT_WS else ("start", "stop")
    settings = settings.model_copy(update={"ws_max_unsent_bytes": 64 * 2**20})  # the answer is written, slowly
    async with serve(settings) as server:
        token = await server.api.member("hoarder")
        member_id = await pool.fetchval("SELECT id FROM members WHERE username = 'hoarder'")
        await bulk_posts(pool, member_id, 10, 60_000, settings.outbox_shards)
        reader = await StalledClient.open(server, protocol, token)
        try:
            await reader.send({"id": "big", "type": start, "payload": {"query": BIG}})
            await eventually(lambda: asyncio.sleep(0, _unwritten(server)))  # the answer is stuck in the socket
            mutation = 'mutation { createPost(input: {content: "behind the big one"}) { id } }'
            await reader.send({"id": "m", "type": start, "payload": {"query": mutation}})
            committed = "SELECT count(*) FROM posts WHERE content = 'behind the big one'"
            await eventually(lambda: pool.fetchval(committed))
            await reader.send({"id": "m", "type": stop})
            await reader.send({"id": "mark", "type": start, "payload": {"query": "{ viewer { id } }"}})
            seen: list[tuple[str, str]] = []
            while ("mark", "complete") not in seen:
                seen += [(m.get("id", ""), m["type"]) for m in await asyncio.wait_for(reader.messages(), 30)]
        finally:
            reader.close()
        assert [kind for op, kind in seen if op == "big"][:1] in (["next"], ["data"])  # it was sent, whole
        # graphql-transport-ws: nothing of it; the legacy protocol may answer a `stop` with `complete`.
        allowed = [[]] if protocol == TRANSPORT_WS else [[], ["complete"]]
        assert [kind for op, kind in seen if op == "m"] in allowed, seen
        assert await pool.fetchval(committed) == 1


def _unwritten(server: Server) -> int:
    """Bytes the server's sockets hold for peers that have not taken them (asyncio's write buffers)."""
    return sum(c.transport.get_write_buffer_size() for c in server.connections if getattr(c, "transport", None))
