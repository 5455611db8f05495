"""homeTimeline(since)'s replay is bounded: a backlog within REPLAY_MAX is sent whole, one past it is refused
before anything is sent, and what a replay sends spends its query cost from the rate limit."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import pytest
from feedfabric.app import schema
from feedfabric.core.settings import Settings
from feedfabric.resolvers.streams import REPLAY_MAX
from feedfabric.schema.core_schema import graphql_schema
from feedfabric.schema.cost import operation_cost
from graphql import parse

from tests import factories
from tests.realtime_support import HOME_SUB, PROTOCOLS, TRANSPORT_WS, Server, WsClient, member_id, serve, ws_client
from tests.support import Api

VIEWER = "{ viewer { id } }"


async def _reader_of(server: Server, pool: asyncpg.Pool) -> tuple[str, uuid.UUID]:
    """bob's token, following alice; alice's member ID (her posts are written straight to Postgres)."""
    await server.api.member("alice")
    bob = await server.api.member("bob")
    await factories.follow(pool, await member_id(pool, "bob"), await member_id(pool, "alice"))
    return bob, await member_id(pool, "alice")


async def _refusal(ws: WsClient) -> dict[str, Any]:
    """The one error of a subscription refused before it sent anything; then it completes, and nothing else comes."""
    message = await ws.next_message()
    assert message["type"] in ("next", "data"), message
    assert message["payload"]["data"] is None, message
    [error] = message["payload"]["errors"]
    assert (await ws.next_message())["type"] == "complete"
    assert await ws.nothing_within(0.3)
    return error  # type: ignore[no-any-return]


async def _replayed(ws: WsClient, count: int) -> list[uuid.UUID]:
    return [uuid.UUID((await ws.next_data())["homeTimeline"]["cursor"]) for _ in range(count)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_backlog_at_the_bound_is_replayed_whole_and_one_more_is_refused_before_anything_is_sent(
    settings: Settings, pool: asyncpg.Pool, protocol: str
) -> None:
    async with serve(settings) as server:
        bob, alice = await _reader_of(server, pool)
        cursor, *backlog = await factories.posts(pool, alice, 1 + REPLAY_MAX)
        async with ws_client(server, protocol, bob) as ws:
            await ws.subscribe(HOME_SUB, {"since": str(cursor)})
            assert await _replayed(ws, REPLAY_MAX) == backlog  # whole, oldest first
            assert await ws.nothing_within(0.3)

        await factories.posts(pool, alice, 1)
        for since in (str(cursor), "00000000-0000-7000-8000-000000000000"):  # one past the bound; all of history
            async with ws_client(server, protocol, bob) as ws:
                await ws.subscribe(HOME_SUB, {"since": since})
                error = await _refusal(ws)
                assert error["extensions"]["code"] == "BAD_USER_INPUT", error
                assert "homeFeed" in error["message"] and "newest cursor" in error["message"], error
                assert server.hub.subscriber_count() == 0  # the refused subscription holds nothing


async def _cost_remaining(api: Api, token: str) -> tuple[int, int]:
    """The cost budget left after a `{ viewer { id } }`, and what that query cost."""
    body = await api.raw(VIEWER, token=token)
    return body["extensions"]["rateLimit"]["costRemaining"], body["extensions"]["cost"]["requestedQueryCost"]


async def test_a_replay_spends_the_query_cost_of_each_item_it_sends_and_is_refused_past_the_budget(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    event_cost = operation_cost(graphql_schema(schema), parse(HOME_SUB), None, {"since": None})
    items = 10
    # A budget for one replay of `items` and a little more; a window the test cannot outlast.
    limited = settings.model_copy(update={"rate_limit_cost": 60, "rate_limit_window_seconds": 3600})
    async with serve(limited) as server:
        bob, alice = await _reader_of(server, pool)
        cursor, *backlog = await factories.posts(pool, alice, 1 + items)
        before, _ = await _cost_remaining(server.api, bob)
        async with ws_client(server, TRANSPORT_WS, bob) as ws:
            await ws.subscribe(HOME_SUB, {"since": str(cursor)})
            assert await _replayed(ws, items) == backlog
        after, viewer_cost = await _cost_remaining(server.api, bob)
        assert before - after == event_cost * (1 + items) + viewer_cost  # the subscribe's event, and each replayed
        assert event_cost <= after < event_cost * (1 + items)  # room for another subscribe, not for its replay

        async with ws_client(server, TRANSPORT_WS, bob) as ws:
            await ws.subscribe(HOME_SUB, {"since": str(cursor)})
            error = await _refusal(ws)
        assert error["extensions"]["code"] == "RATE_LIMITED", error
        assert f"replaying {items} items costs {event_cost * items}" in error["message"], json.dumps(error)
