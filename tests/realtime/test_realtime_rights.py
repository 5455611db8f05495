"""An open WebSocket is held to its rights for its whole life, and both protocols serve every operation.

OPERATIONS.md: when a socket's token expires or its member is suspended, its
subscriptions end and the socket closes with 4403 within a few seconds.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from feedfabric.core.settings import Settings
from websockets.asyncio.client import connect

from tests.realtime_support import (
    EVENT_GUARD_S,
    HOME_SUB,
    LEGACY_WS,
    PROTOCOLS,
    TRANSPORT_WS,
    WsClient,
    closed_with,
    serve,
    wait_subscribed,
    ws_client,
)


@pytest.fixture
def quick(settings: Settings) -> Settings:
    return settings.model_copy(update={"ws_rights_check_seconds": 0.2, "max_subscriptions_per_connection": 2})


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_suspended_members_socket_is_closed_with_4403_and_its_subscriptions_end(
    quick: Settings, protocol: str
) -> None:
    async with serve(quick) as server:
        api = server.api
        admin = await api.member("root", admin=True)
        maya = await api.member("maya")
        async with ws_client(server, protocol, maya) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 1)
            await api.gql('mutation { suspendMember(externalUserId: "maya") { status } }', token=admin)
            code, reason = await closed_with(ws, within=5)
        assert (code, reason) == (4403, "Forbidden: account suspended")
        await wait_subscribed_down(server)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_suspension_answered_closes_the_members_sockets_on_that_process_at_once(
    settings: Settings, protocol: str
) -> None:
    """The sweep runs every 10 s here, yet the socket is closed as the suspension is answered: nothing
    reaches a suspended member from the process that suspended them."""
    slow_sweep = settings.model_copy(update={"ws_rights_check_seconds": 10.0})
    async with serve(slow_sweep) as server:
        api = server.api
        admin = await api.member("root", admin=True)
        maya = await api.member("maya")
        async with ws_client(server, protocol, maya) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 1)
            await api.gql('mutation { suspendMember(externalUserId: "maya") { status } }', token=admin)
            # Ended by the time the suspension is answered (an event, not a clock: the sweep would take 10 s).
            assert server.hub.subscriber_count() == 0
            code, reason = await closed_with(ws, within=EVENT_GUARD_S)
        assert (code, reason) == (4403, "Forbidden: account suspended")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_socket_whose_token_expires_is_closed_with_4403(quick: Settings, protocol: str) -> None:
    async with serve(quick) as server:
        await server.api.member("maya")
        short = server.api.token("maya", ttl=2)
        async with ws_client(server, protocol, short) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 1)
            code, reason = await closed_with(ws, within=6)
        assert (code, reason) == (4403, "Forbidden: token expired")
        await wait_subscribed_down(server)


async def test_a_member_in_good_standing_keeps_the_socket(quick: Settings) -> None:
    async with serve(quick) as server:
        maya = await server.api.member("maya")
        async with ws_client(server, TRANSPORT_WS, maya) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 1)
            assert await ws.nothing_within(1.0)
            assert server.hub.subscriber_count() == 1


async def wait_subscribed_down(server: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while server.hub.subscriber_count() > 0:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the subscription outlived its socket"
        await asyncio.sleep(0.02)


async def test_queries_and_mutations_are_served_over_the_legacy_protocol(quick: Settings) -> None:
    async with serve(quick) as server:
        maya = await server.api.member("maya")
        async with ws_client(server, LEGACY_WS, maya) as ws:
            await ws.subscribe("query { viewer { username } }")
            first = await ws.next_message()
            assert first["type"] == "data" and first["payload"]["data"] == {"viewer": {"username": "maya"}}
            assert (await ws.next_message())["type"] == "complete"
            await ws.subscribe('mutation { createPost(input: {content: "over the socket"}) { content } }')
            created = await ws.next_message()
            assert created["payload"]["data"] == {"createPost": {"content": "over the socket"}}, created
            assert (await ws.next_message())["type"] == "complete"
            await ws.subscribe("query { viewer { nope } }")
            refused = await ws.next_message()
            payload = refused["payload"]
            errors = payload.get("errors") or [payload]
            assert errors[0]["extensions"]["code"] == "BAD_USER_INPUT", refused


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_subscription_limit_error_carries_a_code(quick: Settings, protocol: str) -> None:
    async with serve(quick) as server:
        maya = await server.api.member("maya")
        async with ws_client(server, protocol, maya) as ws:
            for _ in range(2):
                await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 2)
            await ws.subscribe(HOME_SUB)
            message = await ws.next_message()
    assert message["type"] == "error" and message["id"] == "3", message
    payload = message["payload"]
    errors = payload if isinstance(payload, list) else [payload]
    assert errors[0]["extensions"]["code"] == "RATE_LIMITED"
    assert "Subscription limit reached" in json.dumps(errors)


@pytest.fixture
def impatient(settings: Settings) -> Settings:
    return settings.model_copy(update={"ws_init_timeout_seconds": 0.5})


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_socket_that_never_initialises_is_closed_with_4408(impatient: Settings, protocol: str) -> None:
    async with serve(impatient) as server, connect(server.ws_url, subprotocols=[protocol]) as conn:
        code, reason = await closed_with(WsClient(conn, protocol), within=5)
    assert (code, reason) == (4408, "Connection initialisation timeout")


async def test_an_initialised_socket_outlives_the_wait_for_initialisation(impatient: Settings) -> None:
    """On the legacy protocol, whose timer is ours (graphql-transport-ws's is Strawberry's)."""
    async with serve(impatient) as server:
        maya = await server.api.member("maya")
        async with ws_client(server, LEGACY_WS, maya) as ws:
            assert await ws.nothing_within(1.5)
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 1)
