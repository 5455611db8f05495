"""A live item renders once for every subscriber whose selection is viewer-independent, per viewer otherwise."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from feedfabric.core.settings import Settings
from feedfabric.realtime.item import TimelineItem

from tests.pipeline_support import relay, running
from tests.realtime_support import (
    PROTOCOLS,
    TRANSPORT_WS,
    followers_watching,
    raw_next,
    serve,
    wait_subscribed,
    ws_client,
)

PER_VIEWER = """subscription { homeTimeline { post { id author { username viewerFollows } } } }"""


@pytest.fixture
def executions(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """One entry per subscriber that executed an item itself (its loaders were made and primed)."""
    seen: list[Any] = []
    prime = TimelineItem.prime

    def counting(self: TimelineItem, loaders: Any) -> None:
        seen.append(self.post.id)
        prime(self, loaders)

    monkeypatch.setattr(TimelineItem, "prime", counting)
    return seen


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_same_selection_renders_once_for_all_its_subscribers(
    settings: Settings, protocol: str, executions: list[Any]
) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        async with followers_watching(server, protocol) as (alice, (a, b, c)):
            post_id = await api.post(alice, 'one rendering, caf\u00e9 \u2713 "quoted"')
            raws = [await raw_next(ws) for ws in (a, b, c)]
            second = await api.post(alice, "and again")
            again = [await raw_next(ws) for ws in (a, b, c)]
    expected = {
        "cursor": post_id,
        "post": {"id": post_id, "content": 'one rendering, caf\u00e9 \u2713 "quoted"', "author": {"username": "alice"}},
    }
    for raw in raws:
        message = json.loads(raw)
        assert message["type"] == ("next" if protocol == TRANSPORT_WS else "data") and message["id"] == "1"
        assert message["payload"]["data"]["homeTimeline"] == expected
        assert "cost" in message["payload"]["extensions"]
    assert [json.loads(raw)["payload"]["data"]["homeTimeline"]["post"]["id"] for raw in again] == [second] * 3
    assert len(executions) == 2  # one per item, not one per subscriber


async def test_viewer_dependent_selection_renders_per_viewer(settings: Settings, executions: list[Any]) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob, carol = await api.member("alice"), await api.member("bob"), await api.member("carol")
        await api.follow(bob, "alice")
        await api.gql('mutation { followTag(tag: "news") }', token=carol)
        async with ws_client(server, TRANSPORT_WS, bob) as follower, ws_client(server, TRANSPORT_WS, carol) as tagged:
            await follower.subscribe(PER_VIEWER)
            await tagged.subscribe(PER_VIEWER)
            await wait_subscribed(server, 2)
            await api.post(alice, "for #news readers")
            by_follower = (await follower.next_data())["homeTimeline"]["post"]["author"]
            by_tag_reader = (await tagged.next_data())["homeTimeline"]["post"]["author"]
    assert by_follower == {"username": "alice", "viewerFollows": True}
    assert by_tag_reader == {"username": "alice", "viewerFollows": False}
    assert len(executions) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_live_subscription_its_client_ends_leaves_the_hub_and_gets_nothing_more(
    settings: Settings, protocol: str
) -> None:
    """A subscription written by the fan-out (feedfabric.realtime.listener) has no stream left to cancel:
    the client's complete (graphql-transport-ws) or stop (graphql-ws) takes it off the hub itself."""
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        await api.follow(bob, "alice")
        async with ws_client(server, protocol, bob) as ws:
            op = await ws.subscribe("subscription { homeTimeline { post { id } } }")
            await wait_subscribed(server, 1)
            first = await api.post(alice, "seen")
            assert (await ws.next_data())["homeTimeline"]["post"]["id"] == first
            end = "complete" if protocol == TRANSPORT_WS else "stop"
            await ws.conn.send(json.dumps({"id": op, "type": end}))
            for _ in range(100):
                if server.hub.subscriber_count() == 0:
                    break
                await asyncio.sleep(0.02)
            assert server.hub.subscriber_count() == 0
            await api.post(alice, "not seen")
            assert await ws.nothing_within(1.0)
