"""homeTimeline over a real server, real broker and real WebSocket clients, on both protocols."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any

import asyncpg
import pytest
from feedfabric.adapter.serving import WS_MAX_MESSAGE_BYTES
from feedfabric.adapter.websocket.frames import MessageBudget
from feedfabric.core.settings import Settings
from feedfabric.schema.documents import MAX_DOCUMENT_CHARS
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests import factories
from tests.pipeline_support import eventually, relay, running
from tests.realtime_support import (
    HOME_SUB,
    LEGACY_WS,
    PROTOCOLS,
    TRANSPORT_WS,
    StalledClient,
    WsClient,
    bulk_posts,
    closed_with,
    member_id,
    serve,
    wait_subscribed,
    ws_client,
)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_follower_receives_a_post_live(settings: Settings, protocol: str) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        await api.follow(bob, "alice")
        async with ws_client(server, protocol, bob) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 1)
            post_id = await api.post(alice, "hello, followers")
            data = await ws.next_data()
        event = data["homeTimeline"]
        assert event["post"] == {"id": post_id, "content": "hello, followers", "author": {"username": "alice"}}
        assert event["cursor"] == post_id


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_resubscribing_with_since_replays_exactly_the_missed_posts_then_goes_live(
    settings: Settings, protocol: str
) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        await api.follow(bob, "alice")
        async with ws_client(server, protocol, bob) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 1)
            first = await api.post(alice, "seen live")
            cursor = (await ws.next_data())["homeTimeline"]["cursor"]
        assert cursor == first
        await wait_subscribed(server, 0)

        seen = server.consumer.events_seen
        missed = [await api.post(alice, f"missed {i}") for i in range(3)]

        async def consumed() -> bool:  # their events reach the hub while nobody listens
            return server.consumer.events_seen >= seen + len(missed)

        await eventually(consumed)

        async with ws_client(server, protocol, bob) as ws:
            await ws.subscribe(HOME_SUB, {"since": cursor})
            replayed = [(await ws.next_data())["homeTimeline"] for _ in range(3)]
            assert [e["post"]["id"] for e in replayed] == missed
            assert [e["post"]["content"] for e in replayed] == ["missed 0", "missed 1", "missed 2"]
            assert [e["cursor"] for e in replayed] == missed
            live = await api.post(alice, "live again")
            assert (await ws.next_data())["homeTimeline"]["post"]["id"] == live
            assert await ws.nothing_within(0.7)  # no duplicate at the seam or after


async def test_replay_and_live_meet_without_gap_or_duplicate(settings: Settings, pool: asyncpg.Pool) -> None:
    """Posts keep arriving while the replay query runs: each is sent once, replay first, oldest first."""
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        await api.follow(bob, "alice")
        cursor = await api.post(alice, "before")
        before_resume = [await api.post(alice, f"old {i}") for i in range(5)]

        async def keep_posting() -> list[str]:
            return [await api.post(alice, f"during {i}") for i in range(10)]

        async with ws_client(server, TRANSPORT_WS, bob) as ws:
            poster = asyncio.create_task(keep_posting())
            await ws.subscribe(HOME_SUB, {"since": cursor})
            during = await poster
            got = [(await ws.next_data())["homeTimeline"]["post"]["id"] for _ in range(15)]
            assert await ws.nothing_within(0.7)
        assert sorted(got) == sorted(before_resume + during)
        assert len(set(got)) == len(got)
        assert got[:5] == before_resume


async def test_non_follower_receives_nothing(settings: Settings) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob, carol = await api.member("alice"), await api.member("bob"), await api.member("carol")
        await api.follow(bob, "alice")
        async with ws_client(server, TRANSPORT_WS, bob) as follower, ws_client(server, LEGACY_WS, carol) as stranger:
            await follower.subscribe(HOME_SUB)
            await stranger.subscribe(HOME_SUB)
            await wait_subscribed(server, 2)
            post_id = await api.post(alice, "for followers")
            assert (await follower.next_data())["homeTimeline"]["post"]["id"] == post_id
            assert await stranger.nothing_within(1.0)


async def test_followed_tag_delivers_and_own_posts_reach_the_author(settings: Settings) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        await api.gql('mutation { followTag(tag: "python") }', token=bob)
        async with ws_client(server, TRANSPORT_WS, bob) as tagged, ws_client(server, TRANSPORT_WS, alice) as author:
            await tagged.subscribe(HOME_SUB)
            await author.subscribe(HOME_SUB)
            await wait_subscribed(server, 2)
            post_id = await api.post(alice, "a #python post")
            assert (await tagged.next_data())["homeTimeline"]["post"]["id"] == post_id
            assert (await author.next_data())["homeTimeline"]["post"]["id"] == post_id


async def test_a_held_post_reaches_only_its_author(settings: Settings, pool: asyncpg.Pool) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        await api.follow(bob, "alice")
        alice_id = await member_id(pool, "alice")
        async with ws_client(server, TRANSPORT_WS, bob) as follower, ws_client(server, LEGACY_WS, alice) as author:
            await follower.subscribe(HOME_SUB)
            await author.subscribe(HOME_SUB)
            await wait_subscribed(server, 2)
            # Held before the realtime consumer hydrates it (moderation raced the post).
            held = await factories.post(pool, alice_id, status="held", shards=settings.outbox_shards)
            live = await api.post(alice, "a live one")
            # Two keys, two partitions: no order between them.
            got = {(await author.next_data())["homeTimeline"]["post"]["id"] for _ in range(2)}
            assert got == {str(held), live}
            assert (await follower.next_data())["homeTimeline"]["post"]["id"] == live
            assert await follower.nothing_within(0.7)


async def test_deletes_and_holds_are_not_new_items(settings: Settings) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        admin = await api.member("root", admin=True)
        await api.follow(bob, "alice")
        async with ws_client(server, TRANSPORT_WS, bob) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 1)
            post_id = await api.post(alice, "soon gone")
            assert (await ws.next_data())["homeTimeline"]["post"]["id"] == post_id
            await api.gql("mutation($id: ID!) { holdPost(id: $id) { id } }", {"id": post_id}, token=admin)
            await api.gql("mutation($id: ID!) { deletePost(id: $id) }", {"id": post_id}, token=alice)
            assert await ws.nothing_within(1.0)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_missing_or_bad_token_is_refused_with_4403(settings: Settings, protocol: str) -> None:
    async with serve(settings) as server:
        await server.api.member("alice")
        bad = server.api.token("alice")[:-4] + "AAAA"
        expired = server.api.token("alice", ttl=-10)
        for payload in (
            {},
            {"authorization": f"Bearer {bad}"},
            {"authorization": f"Bearer {expired}"},
            {"authorization": "Basic abc"},
        ):
            async with connect(server.ws_url, subprotocols=[protocol]) as conn:  # type: ignore[list-item]
                await conn.send(json.dumps({"type": "connection_init", "payload": payload}))
                messages = []
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        messages.append(json.loads(await asyncio.wait_for(conn.recv(), 5)))
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403, payload
                assert all(m["type"] != "connection_ack" for m in messages)
                if protocol == LEGACY_WS:
                    assert messages and messages[0]["type"] == "connection_error"


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("production", [False, True])
async def test_errors_over_a_socket_are_coded_and_suggest_fields_only_in_development(
    settings: Settings, protocol: str, production: bool
) -> None:
    async with serve(settings.model_copy(update={"feedfabric_production": production})) as server:
        bob = await server.api.member("bob")
        async with ws_client(server, protocol, bob) as ws:
            await ws.subscribe("subscription { homeTimelin { cursor } }")
            message = await ws.next_message()
    assert message["type"] == "error", message
    payload = message["payload"]  # graphql-transport-ws: a list of errors; graphql-ws: one error
    errors = payload if isinstance(payload, list) else [payload]
    assert [e["extensions"]["code"] for e in errors] == ["BAD_USER_INPUT"], message
    assert ("Did you mean" in json.dumps(message)) is not production


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_documents_refused_over_a_socket_spend_the_rate_limit(settings: Settings, protocol: str) -> None:
    limited = settings.model_copy(
        update={"rate_limit_operations": 3, "rate_limit_window_seconds": 1_000_000_000, "redis_timeout_ms": 10_000}
    )
    async with serve(limited) as server:
        bob = server.api.token("bob")  # no profile: nothing spent before the socket
        async with ws_client(server, protocol, bob) as ws:
            answers = []
            for document in ("subscription { homeTimeline(", "subscription { nope }", "{ a: nope b: nope }"):
                await ws.subscribe(document)
                answers.append(_error_codes(await ws.next_message()))
    # 1 (does not parse), then 1 root field, then 2: the third is past the budget of 3.
    assert answers == [["BAD_USER_INPUT"], ["BAD_USER_INPUT"], ["RATE_LIMITED"]]


def _operation(protocol: str, payload: Any, **fields: Any) -> dict[str, Any]:
    """A subscribe (graphql-transport-ws) or start (graphql-ws) message, with id "1" unless given."""
    kind = "subscribe" if protocol == TRANSPORT_WS else "start"
    return {"id": "1", "type": kind, "payload": payload, **fields}


def _error_codes(message: dict[str, Any]) -> list[str]:
    """The codes of an `error` message (graphql-transport-ws: a list; graphql-ws: one) or a result's errors."""
    payload = message["payload"]
    if message["type"] in ("next", "data"):
        errors = payload["errors"]
    else:
        assert message["type"] == "error", message
        errors = payload if isinstance(payload, list) else [payload]
    return [e["extensions"]["code"] for e in errors]


def _server_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Errors the request caused; the loop-stall watchdog reports the machine's load, not the request."""
    return [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.name != "feedfabric.watchdog"
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_message_that_is_not_a_json_object_is_closed_with_4400(settings: Settings, protocol: str) -> None:
    async with serve(settings) as server:
        maya = await server.api.member("maya")
        for message in ("[1, 2]", "null", '"hello"', "42"):
            async with ws_client(server, protocol, maya) as ws:
                await ws.conn.send(message)
                assert await closed_with(ws, within=5) == (4400, "Message must be a JSON object"), message


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_operation_message_of_the_wrong_shape_is_closed_with_4400(settings: Settings, protocol: str) -> None:
    query = "{ viewer { id } }"
    async with serve(settings) as server:
        maya = await server.api.member("maya")
        for message in (
            {key: value for key, value in _operation(protocol, {"query": query}).items() if key != "id"},
            _operation(protocol, {"query": query}, id=["1"]),
            _operation(protocol, {"query": query}, id=1),
            {key: value for key, value in _operation(protocol, None).items() if key != "payload"},
            _operation(protocol, None),
            _operation(protocol, "query"),
            _operation(protocol, {"query": 5}),
            _operation(protocol, {"query": query, "operationName": 5}),
            {"type": "complete" if protocol == TRANSPORT_WS else "stop"},
        ):
            async with ws_client(server, protocol, maya) as ws:
                await ws.conn.send(json.dumps(message))
                code, _ = await closed_with(ws, within=5)
                assert code == 4400, message


async def _answer(ws: WsClient, message: dict[str, Any]) -> dict[str, Any]:
    await ws.conn.send(json.dumps(message))
    return await ws.next_message()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_document_that_does_not_parse_gets_bad_user_input_over_a_socket(
    settings: Settings, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with serve(settings) as server:
        maya = await server.api.member("maya")
        async with ws_client(server, protocol, maya) as ws:
            for query in ("subscription {", "query {"):
                answer = await _answer(ws, _operation(protocol, {"query": query}))
                assert _error_codes(answer) == ["BAD_USER_INPUT"], answer
                assert "Syntax Error" in json.dumps(answer)
    assert _server_errors(caplog) == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_empty_query_or_unknown_operation_gets_bad_user_input_over_a_socket(
    settings: Settings, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with serve(settings) as server:
        maya = await server.api.member("maya")
        async with ws_client(server, protocol, maya) as ws:
            for payload in ({"query": ""}, {"query": "query A { viewer { id } }", "operationName": "B"}):
                answer = await _answer(ws, _operation(protocol, payload))
                assert _error_codes(answer) == ["BAD_USER_INPUT"], answer
    assert _server_errors(caplog) == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_variables_that_are_not_an_object_get_bad_user_input_over_a_socket(
    settings: Settings, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with serve(settings) as server:
        maya = await server.api.member("maya")
        async with ws_client(server, protocol, maya) as ws:
            for n, variables in enumerate(("x", [1], 3)):
                for query in ("{ viewer { id } }", "subscription { notificationAdded { id } }"):
                    message = _operation(protocol, {"query": query, "variables": variables}, id=f"{n}{query[0]}")
                    answer = await _answer(ws, message)
                    assert _error_codes(answer) == ["BAD_USER_INPUT"], answer
                    assert (await ws.next_message())["type"] == "complete"
    assert _server_errors(caplog) == []


async def test_token_in_the_upgrade_header_is_accepted(settings: Settings) -> None:
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        await api.follow(bob, "alice")
        async with ws_client(server, TRANSPORT_WS, None, header_token=bob) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 1)
            post_id = await api.post(alice, "via header")
            assert (await ws.next_data())["homeTimeline"]["post"]["id"] == post_id


async def test_a_slow_subscriber_is_cut_off_while_a_fast_one_keeps_receiving(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    settings = settings.model_copy(update={"realtime_queue_size": 16})
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        await api.member("alice")
        fast_token, slow_token = await api.member("fast"), await api.member("slow")
        await api.follow(fast_token, "alice")
        await api.follow(slow_token, "alice")
        alice_id = await member_id(pool, "alice")

        async with ws_client(server, TRANSPORT_WS, fast_token) as fast:
            slow = await StalledClient.open(server, TRANSPORT_WS, slow_token)
            await fast.subscribe(HOME_SUB)
            await slow.send({"id": "1", "type": "subscribe", "payload": {"query": HOME_SUB}})
            await wait_subscribed(server, 2)
            # From here the slow client reads nothing: the kernel buffers about 3 MB, then the server's send
            # blocks and its hub queue fills. 60 kB posts get there in a few rounds.

            received: list[str] = []
            posted: list[uuid.UUID] = []
            deadline = time.monotonic() + 60
            while server.hub.stats.dropped_subscribers == 0:
                assert time.monotonic() < deadline, "the slow subscriber was never cut off"
                # Rounds smaller than the queue: a burst alone never overflows a reader that keeps up.
                posted += await bulk_posts(pool, alice_id, 8, 60_000, settings.outbox_shards)
                # The fast one keeps up with everything, on time, however far behind the slow one is.
                while len(received) < len(posted):
                    received.append((await fast.next_data())["homeTimeline"]["post"]["id"])
            assert sorted(received) == sorted(str(p) for p in posted)
            assert server.hub.subscriber_count() == 1

            more = await bulk_posts(pool, alice_id, 3, 10, settings.outbox_shards)
            for _ in more:
                received.append((await fast.next_data())["homeTimeline"]["post"]["id"])
            assert set(received[-3:]) == {str(p) for p in more}

            # The slow one, reading at last, finds what was in flight and then the close with its reason.
            code, reason = await slow.drain_until_closed()
            slow.close()
            assert code == 1013
            assert "too slow" in reason
            assert 0 < slow.received < len(posted)


async def test_a_message_over_the_size_limit_closes_the_socket_with_1009(settings: Settings) -> None:
    """A socket's message is bounded as an HTTP body is, not by uvicorn's 16 MiB default."""
    async with serve(settings) as server:
        maya = await server.api.member("maya")
        async with ws_client(server, TRANSPORT_WS, maya) as ws:
            padding = "x" * WS_MAX_MESSAGE_BYTES
            payload = {"query": "{ viewer { id } }", "variables": {"pad": padding}}
            await ws.conn.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.conn.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


def test_the_message_budget_takes_a_seconds_burst_each_second_but_not_two_at_once() -> None:
    now = [0.0]
    budget = MessageBudget(100, clock=lambda: now[0])
    for at in (0.0, 0.98, 2.05, 2.97, 4.02):  # a burst a second, jittered across the seconds' edges
        now[0] = at
        assert all(budget.spend() for _ in range(80)), at
    now[0] += 0.01
    assert sum(budget.spend() for _ in range(200)) < 100


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_socket_sending_past_its_message_budget_is_closed_as_a_policy_violation(
    settings: Settings, protocol: str
) -> None:
    budget = 20
    async with serve(settings.model_copy(update={"ws_max_messages_per_second": budget})) as server:
        maya = await server.api.member("maya")
        async with ws_client(server, protocol, maya) as ws:
            message = {"type": "ping"} if protocol == TRANSPORT_WS else {"type": "stop", "id": "none"}
            for _ in range(budget * 3):
                await ws.conn.send(json.dumps(message))
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.conn.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_several_operations_without_an_operation_name_run_none_over_a_socket(
    settings: Settings, protocol: str
) -> None:
    async with serve(settings) as server:
        maya = await server.api.member("maya")
        document = (
            'mutation B { upsertProfile(username: "maya", displayName: "changed") { id } }'
            " query A { viewer { displayName } }"
        )
        async with ws_client(server, protocol, maya) as ws:
            answer = await _answer(ws, _operation(protocol, {"query": document}))
            assert _error_codes(answer) == ["BAD_USER_INPUT"], answer
            assert "operationName" in json.dumps(answer)
        viewer = await server.api.gql("{ viewer { displayName } }", token=maya)
        assert viewer["viewer"]["displayName"] != "changed"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_document_past_the_character_cap_is_refused_over_a_socket(settings: Settings, protocol: str) -> None:
    async with serve(settings) as server:
        maya = await server.api.member("maya")
        padded = "#" * MAX_DOCUMENT_CHARS + "\nsubscription { homeTimeline { post { id } } }"
        async with ws_client(server, protocol, maya) as ws:
            answer = await _answer(ws, _operation(protocol, {"query": padded}))
            assert _error_codes(answer) == ["BAD_USER_INPUT"], answer
            assert "characters" in json.dumps(answer)
