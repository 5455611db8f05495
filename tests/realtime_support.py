"""A real uvicorn server for the app and a real WebSocket client speaking both subscription protocols."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import uvicorn
from feedfabric.adapter.serving import serve_options
from feedfabric.app import create_app
from feedfabric.core.ids import id_millis, new_id
from feedfabric.core.settings import Settings
from feedfabric.core.tracing import Tracing
from feedfabric.db.outbox import add_event
from feedfabric.realtime.consumer import RealtimeConsumer
from feedfabric.realtime.hub import Hub
from starlette.applications import Starlette
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.pipeline_support import HANG_GUARD_S
from tests.support import Api

TRANSPORT_WS = "graphql-transport-ws"
LEGACY_WS = "graphql-ws"
PROTOCOLS = (TRANSPORT_WS, LEGACY_WS)
EVENT_GUARD_S = HANG_GUARD_S
"""How long a socket's awaited message may take before the test fails instead of hanging: the pipeline's
guard (tests.pipeline_support), not a speed target; a test expecting silence says how long itself."""

HOME_SUB = """subscription($since: String) {
  homeTimeline(since: $since) { cursor post { id content author { username } } }
}"""
NOTIFY_SUB = """subscription { notificationAdded { id kind read actor { username } post { id } } }"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    app: Starlette
    url: str
    api: Api
    uvicorn_server: uvicorn.Server

    @property
    def connections(self) -> set[asyncio.Protocol]:
        """The protocol object of every open HTTP and WebSocket connection, as uvicorn tracks them."""
        return self.uvicorn_server.server_state.connections  # type: ignore[return-value]

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/graphql"

    @property
    def hub(self) -> Hub:
        return self.app.state.resources.hub  # type: ignore[no-any-return]

    @property
    def consumer(self) -> RealtimeConsumer:
        return self.app.state.resources.realtime_consumer  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def serve(settings: Settings, traced: Tracing | None = None) -> AsyncIterator[Server]:
    """The app under uvicorn on a free loopback port, in this event loop; ready once realtime is positioned."""
    app = create_app(settings, traced)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **serve_options())
    )
    task = asyncio.create_task(server.serve())
    try:
        deadline = time.monotonic() + EVENT_GUARD_S
        while not server.started:
            if task.done():
                task.result()
            if time.monotonic() > deadline:
                raise AssertionError("server did not start")
            await asyncio.sleep(0.02)
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            running = Server(app, url, Api(client, settings), server)
            await asyncio.wait_for(running.consumer.ready.wait(), EVENT_GUARD_S)
            yield running
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, EVENT_GUARD_S)


@dataclass
class WsClient:
    """One socket; `subscribe` starts an operation, `next_data` returns its next result's data."""

    conn: ClientConnection
    protocol: str
    ack: dict[str, Any] = field(default_factory=dict)
    _ids: int = 0

    async def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> str:
        self._ids += 1
        op = str(self._ids)
        kind = "subscribe" if self.protocol == TRANSPORT_WS else "start"
        await self.conn.send(
            json.dumps({"id": op, "type": kind, "payload": {"query": query, "variables": variables or {}}})
        )
        return op

    async def next_message(self, timeout: float = EVENT_GUARD_S) -> dict[str, Any]:
        while True:
            message = json.loads(await asyncio.wait_for(self.conn.recv(), timeout))
            if message.get("type") in ("ka", "ping", "pong"):
                continue
            return message  # type: ignore[no-any-return]

    async def next_data(self, timeout: float = EVENT_GUARD_S) -> dict[str, Any]:
        message = await self.next_message(timeout)
        assert message["type"] in ("next", "data"), message
        payload = message["payload"]
        assert not payload.get("errors"), payload
        return payload["data"]  # type: ignore[no-any-return]

    async def nothing_within(self, seconds: float) -> bool:
        try:
            message = await self.next_message(seconds)
        except TimeoutError:
            return True
        raise AssertionError(f"expected nothing, got {message}")


async def closed_with(ws: WsClient, within: float) -> tuple[int, str]:
    """Reads until the server closes the socket; its close code and reason."""
    deadline = time.monotonic() + within
    try:
        while True:
            await asyncio.wait_for(ws.conn.recv(), max(0.01, deadline - time.monotonic()))
    except ConnectionClosed as closed:
        assert closed.rcvd is not None, "the server did not close the socket"
        return closed.rcvd.code, closed.rcvd.reason


@contextlib.asynccontextmanager
async def ws_client(
    server: Server,
    protocol: str,
    token: str | None,
    *,
    header_token: str | None = None,
    **connect_kwargs: Any,
) -> AsyncIterator[WsClient]:
    headers = {"Authorization": f"Bearer {header_token}"} if header_token else None
    async with connect(
        server.ws_url,
        subprotocols=[protocol],
        additional_headers=headers,
        **connect_kwargs,  # type: ignore[list-item]
    ) as conn:
        payload = {"authorization": f"Bearer {token}"} if token else {}
        await conn.send(json.dumps({"type": "connection_init", "payload": payload}))
        client = WsClient(conn, protocol)
        message = json.loads(await asyncio.wait_for(conn.recv(), 5))
        assert message["type"] == "connection_ack", message
        yield client


async def wait_subscribed(server: Server, count: int, timeout: float = EVENT_GUARD_S) -> None:
    """Subscriptions register with the hub asynchronously; tests publish only after they did."""
    deadline = time.monotonic() + timeout
    while server.hub.subscriber_count() < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{server.hub.subscriber_count()} subscribers, wanted {count}")
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def followers_watching(server: Server, protocol: str) -> AsyncIterator[tuple[str, list[WsClient]]]:
    """`alice` (her token) and three followers' sockets, each subscribed to its home timeline."""
    api = server.api
    alice = await api.member("alice")
    readers = [await api.member(name) for name in ("bob", "carol", "dave")]
    for reader in readers:
        await api.follow(reader, "alice")
    async with (
        ws_client(server, protocol, readers[0]) as a,
        ws_client(server, protocol, readers[1]) as b,
        ws_client(server, protocol, readers[2]) as c,
    ):
        for ws in (a, b, c):
            await ws.subscribe(HOME_SUB)
        await wait_subscribed(server, 3)
        yield alice, [a, b, c]


def aliased_pages(aliases: int) -> str:
    """A query of `aliases` copies of the viewer's first 10 posts: with long posts, an answer as large as a
    test needs from a reader that does not read."""
    pages = " ".join(
        f"a{i}: viewer {{ posts(first: 10) {{ edges {{ node {{ content }} }} }} }}" for i in range(aliases)
    )
    return f"query {{ {pages} }}"


@dataclass
class StalledClient:
    """A WebSocket client that can stop reading entirely (the websockets client keeps reading into memory).

    Built on the websockets sans-I/O protocol over a plain stream with a small
    receive buffer, so once it stops reading, the server's socket backs up.
    """

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    proto: Any
    received: int = 0

    @classmethod
    async def open(cls, server: Server, protocol: str, token: str) -> StalledClient:
        from websockets.client import ClientProtocol
        from websockets.typing import Subprotocol
        from websockets.uri import parse_uri

        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        host, port = server.url.removeprefix("http://").split(":")
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        reader, writer = await asyncio.open_connection(sock=sock)
        proto = ClientProtocol(parse_uri(server.ws_url), subprotocols=[Subprotocol(protocol)], max_size=None)
        proto.send_request(proto.connect())
        client = cls(reader, writer, proto)
        client._flush()
        while proto.state.name == "CONNECTING":
            await client._read()
        await client.send({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
        while True:
            texts = await client._read()
            if any(json.loads(t)["type"] == "connection_ack" for t in texts):
                return client

    def _flush(self) -> None:
        self.writer.write(b"".join(self.proto.data_to_send()))

    async def send(self, message: dict[str, Any]) -> None:
        self.proto.send_text(json.dumps(message).encode())
        self._flush()
        await self.writer.drain()

    async def _read(self) -> list[str]:
        data = await self.reader.read(65536)
        if not data:
            self.proto.receive_eof()
        else:
            self.proto.receive_data(data)
        self._flush()  # pongs and close replies
        texts = []
        for event in self.proto.events_received():
            if getattr(event, "opcode", None) is not None and event.opcode.name == "TEXT":
                texts.append(event.data.decode())
        return texts

    async def messages(self) -> list[dict[str, Any]]:
        """The messages that one read of the socket completes (none while a frame is still partial)."""
        return [json.loads(text) for text in await self._read()]

    async def drain_until_closed(self, timeout: float = 20.0) -> tuple[int | None, str]:
        """Reads what was in flight, then returns the server's close code and reason."""
        deadline = time.monotonic() + timeout
        while self.proto.close_rcvd is None and not self.reader.at_eof():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("no close frame")
            self.received += len(await asyncio.wait_for(self._read(), remaining))
        close = self.proto.close_rcvd
        return (close.code, close.reason) if close is not None else (None, "")

    def close(self) -> None:
        self.writer.close()


async def bulk_posts(pool: asyncpg.Pool, author: uuid.UUID, count: int, size: int, shards: int) -> list[uuid.UUID]:
    """Large posts with their PostCreated events, committed at once, to flood a socket quickly."""
    ids = []
    async with pool.acquire() as conn, conn.transaction():
        for i in range(count):
            post_id = new_id()
            ids.append(post_id)
            await conn.execute(
                "INSERT INTO posts (id, author_id, content) VALUES ($1, $2, $3)", post_id, author, f"{i} " + "x" * size
            )
            await add_event(
                conn,
                "PostCreated",
                str(post_id),
                {
                    "postId": str(post_id),
                    "authorId": str(author),
                    "createdAtMs": id_millis(post_id),
                    "repostOf": None,
                    "mentionedIds": [],
                },
                shards=shards,
            )
    return ids


async def raw_next(ws: WsClient) -> str:
    """The next result message's text, exactly as the server sent it."""
    while True:
        raw = await asyncio.wait_for(ws.conn.recv(), EVENT_GUARD_S)
        if json.loads(raw)["type"] in ("next", "data"):
            return raw  # type: ignore[return-value]


async def member_id(pool: asyncpg.Pool, name: str) -> uuid.UUID:
    return await pool.fetchval("SELECT id FROM members WHERE external_id = $1", name)  # type: ignore[no-any-return]
