"""A member holds at most WS_MAX_SOCKETS_PER_MEMBER open WebSockets, across every API instance.

The socket past the limit is closed with 1013 (Try Again Later) after its `connection_init`; the
legacy protocol first gets a `connection_error` coded RATE_LIMITED. A closed socket gives its place
back, the places are counted in Redis so two instances share them, and without Redis each process
still holds its own sockets to the limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from feedfabric.core.settings import Settings
from feedfabric.realtime import socket_leases
from feedfabric.realtime.sessions import Sessions
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.realtime_support import LEGACY_WS, PROTOCOLS, TRANSPORT_WS, Server, member_id, serve, ws_client

LIMIT = 2
REASON = "Too many open sockets: at most 2 per member; close one and retry"


@pytest.fixture
def capped(settings: Settings) -> Settings:
    return settings.model_copy(update={"ws_max_sockets_per_member": LIMIT})


async def refusal(server: Server, protocol: str, token: str) -> tuple[list[dict[str, Any]], int, str]:
    """Opens a socket and initialises it; what came before the server closed it, and the close."""
    async with connect(server.ws_url, subprotocols=[protocol]) as conn:
        await conn.send(json.dumps({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}}))
        messages = []
        try:
            while True:
                messages.append(json.loads(await asyncio.wait_for(conn.recv(), 5)))
        except ConnectionClosed as closed:
            assert closed.rcvd is not None, "the server did not close the socket"
            return messages, closed.rcvd.code, closed.rcvd.reason


@contextlib.asynccontextmanager
async def sockets(servers: list[Server], token: str, protocol: str = TRANSPORT_WS) -> AsyncIterator[None]:
    """One acknowledged socket per server in the list, all for the token's member."""
    async with contextlib.AsyncExitStack() as stack:
        for server in servers:
            await stack.enter_async_context(ws_client(server, protocol, token))
        yield


def sessions(server: Server) -> Sessions:
    return server.app.state.resources.sessions  # type: ignore[no-any-return]


async def until_open(server: Server, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(sessions(server)) != count:
        assert time.monotonic() < deadline, f"{len(sessions(server))} sockets open, wanted {count}"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_members_socket_past_the_limit_is_closed_with_try_again_later(capped: Settings, protocol: str) -> None:
    async with serve(capped) as server:
        maya = await server.api.member("maya")
        async with sockets([server, server], maya, protocol):
            messages, code, reason = await refusal(server, protocol, maya)
        assert (code, reason) == (1013, REASON)
        if protocol == LEGACY_WS:
            assert messages == [{"type": "connection_error", "payload": {"message": REASON, "code": "RATE_LIMITED"}}]
        else:
            assert messages == []


async def test_the_limit_is_each_members_own(capped: Settings) -> None:
    async with serve(capped) as server:
        maya, theo = await server.api.member("maya"), await server.api.member("theo")
        async with sockets([server, server], maya), sockets([server, server], theo):
            assert len(sessions(server)) == 2 * LIMIT


async def test_a_closed_socket_gives_its_place_back(capped: Settings) -> None:
    async with serve(capped) as server:
        maya = await server.api.member("maya")
        async with sockets([server], maya):
            async with sockets([server], maya):
                pass
            await until_open(server, 1)
            async with sockets([server], maya):
                assert len(sessions(server)) == LIMIT


@pytest.mark.redis_cluster
async def test_two_api_instances_share_a_members_places(capped: Settings, redis: Any) -> None:
    async with (
        serve(capped.model_copy(update={"feedfabric_instance": "a"})) as a,
        serve(capped.model_copy(update={"feedfabric_instance": "b"})) as b,
    ):
        maya = await a.api.member("maya")
        async with sockets([a], maya):
            async with sockets([b], maya):
                assert (await refusal(a, TRANSPORT_WS, maya))[1:] == (1013, REASON)
                assert (await refusal(b, TRANSPORT_WS, maya))[1:] == (1013, REASON)
            await until_open(b, 0)
            async with sockets([a], maya):
                key = socket_leases.lease_key(await member_id(a.app.state.resources.pool, "maya"))
                assert await redis.zcard(key) == LIMIT


async def test_without_redis_each_process_holds_its_sockets_to_the_limit(capped: Settings) -> None:
    unreachable = capped.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    async with serve(unreachable) as server:
        maya = await server.api.member("maya")
        async with sockets([server, server], maya):
            assert (await refusal(server, TRANSPORT_WS, maya))[1:] == (1013, REASON)


async def test_leases_of_an_instance_that_stopped_renewing_end(capped: Settings, redis: Any) -> None:
    async with serve(capped) as server:
        maya = await server.api.member("maya")
        maya_id = await member_id(server.app.state.resources.pool, "maya")
        long_ago = time.time() - socket_leases.LEASE_SECONDS - 1
        for token in ("gone-1", "gone-2"):
            assert await socket_leases.claim(redis, maya_id, token, LIMIT, now=long_ago)
        async with sockets([server, server], maya):
            assert len(sessions(server)) == LIMIT


async def test_renewal_puts_back_the_leases_redis_lost(capped: Settings, redis: Any) -> None:
    async with serve(capped) as server:
        maya = await server.api.member("maya")
        key = socket_leases.lease_key(await member_id(server.app.state.resources.pool, "maya"))
        async with sockets([server], maya):
            await redis.delete(key)
            await sessions(server).renew_leases(now=time.time() + socket_leases.LEASE_SECONDS)
            assert await redis.zcard(key) == 1
