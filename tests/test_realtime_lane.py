"""The direct lane: live items written to idle subscribers' sockets by the hub, as their tasks would have."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import asyncpg
import pytest
from feedfabric.app import FeedFabricGraphQL
from feedfabric.db import realtime as realtime_db
from feedfabric.realtime.delivery import TimelineItem
from feedfabric.realtime.hub import Channel
from feedfabric.settings import Settings

from tests.pipeline_support import relay, running
from tests.realtime_support import (
    HOME_SUB,
    PROTOCOLS,
    TRANSPORT_WS,
    bulk_posts,
    followers_watching,
    member_id,
    raw_next,
    serve,
    wait_subscribed,
    ws_client,
)


def _post_id(raw: str) -> str:
    return json.loads(raw)["payload"]["data"]["homeTimeline"]["post"]["id"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_hub_writes_to_idle_subscribers_exactly_what_strawberry_would(
    settings: Settings, protocol: str
) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        async with followers_watching(server, protocol) as (alice, (a, b, c)):
            await api.post(alice, "opens the lanes")  # each subscriber's first shared message
            for ws in (a, b, c):
                await raw_next(ws)
            assert server.hub.stats.direct == 0
            post_id = await api.post(alice, 'straight to the socket, caf\u00e9 \u2713 "quoted" ' + "x" * 200)
            raws = [await raw_next(ws) for ws in (a, b, c)]
            # One subscriber renders the item in its task; the hub writes it for the other two.
            assert server.hub.stats.direct == 2
    for raw in raws:
        message = json.loads(raw)
        assert message["payload"]["data"]["homeTimeline"]["post"]["id"] == post_id
        assert message["payload"]["data"]["homeTimeline"]["post"]["content"].startswith("straight to the socket, caf")
        assert "cost" in message["payload"]["extensions"]
        assert raw == FeedFabricGraphQL.encode_json(None, message)  # type: ignore[arg-type]


async def test_a_burst_reaches_every_subscriber_in_the_order_it_was_published(
    settings: Settings, pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        await api.member("alice")
        readers = [await api.member(name) for name in ("bob", "carol", "dave")]
        for reader in readers:
            await api.follow(reader, "alice")
        alice_id = await member_id(pool, "alice")
        published: list[str] = []  # the hub's order (a burst's posts cross partitions, so not theirs)
        publish_many = server.hub.publish_many

        async def recording(channel: Channel, member_ids: Any, item: Any) -> int:
            published.append(str(item.post.id))
            return await publish_many(channel, member_ids, item)

        monkeypatch.setattr(server.hub, "publish_many", recording)
        async with (
            ws_client(server, TRANSPORT_WS, readers[0]) as a,
            ws_client(server, TRANSPORT_WS, readers[1]) as b,
            ws_client(server, TRANSPORT_WS, readers[2]) as c,
        ):
            for ws in (a, b, c):
                await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 3)
            received: dict[int, list[str]] = {0: [], 1: [], 2: []}
            for size in (10, 70_000, 10):  # the middle round fills the sockets' buffers: some sends must wait
                burst = await bulk_posts(pool, alice_id, 12, size, settings.outbox_shards)
                for i, ws in enumerate((a, b, c)):
                    received[i] += [_post_id(await raw_next(ws)) for _ in burst]
            assert server.hub.stats.direct > 0
    assert sorted(published) == sorted(received[0])
    assert received[0] == received[1] == received[2] == published


async def test_the_lane_skips_an_item_the_stream_already_sent(settings: Settings, pool: asyncpg.Pool) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice = await api.member("alice")
        bob, carol = await api.member("bob"), await api.member("carol")
        for reader in (bob, carol):
            await api.follow(reader, "alice")
        async with ws_client(server, TRANSPORT_WS, bob) as b, ws_client(server, TRANSPORT_WS, carol) as c:
            for ws in (b, c):
                await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 2)
            await api.post(alice, "opens the lanes")
            for ws in (b, c):
                await raw_next(ws)
            post_id = uuid.UUID(await api.post(alice, "once"))
            for ws in (b, c):
                assert _post_id(await raw_next(ws)) == str(post_id)

            # The same item again, now rendered, as a redelivered event would bring it: the hub asks the
            # stream's seam filter and writes nothing.
            found = await realtime_db.posts_with_visibility(pool, [post_id])
            item = TimelineItem(post=found[post_id].post)
            members = [await member_id(pool, name) for name in ("bob", "carol")]
            for _ in range(2):
                await server.hub.publish_many(Channel.TIMELINE, members, item)
                await asyncio.sleep(0.05)
            direct = server.hub.stats.direct
            assert direct >= 1  # the second round found the item rendered and handed it to the lanes
            for ws in (b, c):
                assert await ws.nothing_within(0.3)
            after = await api.post(alice, "and the next one")
            for ws in (b, c):
                assert _post_id(await raw_next(ws)) == after
