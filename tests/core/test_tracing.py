"""A post's journey as one trace: the mutation, the relay, worker-events and realtime delivery."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core import tracing
from feedfabric.core.settings import Settings
from opentelemetry.trace import SpanKind

from tests.pipeline_support import eventually, relay, running
from tests.realtime_support import HOME_SUB, TRANSPORT_WS, free_port, serve, wait_subscribed, ws_client
from tests.tracing_support import events_runner, traced_process, traced_settings


@pytest.fixture
def traced(settings: Settings) -> Iterator[tracing.Tracing]:
    with traced_process(settings) as made:
        yield made


def spans_named(spans: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"].startswith(prefix)]


async def test_a_post_is_one_trace_from_the_mutation_through_relay_and_fan_out_to_the_socket(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, traced: tracing.Tracing
) -> None:
    assert traced.recent is not None
    async with (
        serve(settings, traced) as server,
        running(relay(settings, tracer=traced.tracer()).run, events_runner(settings, pool, redis, traced).run),
    ):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        await api.follow(bob, "alice")
        async with ws_client(server, TRANSPORT_WS, bob) as ws:
            await ws.subscribe(HOME_SUB)
            await wait_subscribed(server, 1)
            post_id = await api.post(alice, "followed from end to end")
            assert (await ws.next_data())["homeTimeline"]["post"]["id"] == post_id

        stored = await pool.fetchval(
            "SELECT traceparent FROM outbox WHERE event_type = 'PostCreated' AND payload->>'postId' = $1", post_id
        )
        trace_id = stored.split("-")[1]

        async def journey() -> dict[str, list[dict[str, Any]]]:
            assert traced.recent is not None
            spans = [s for s in traced.recent.spans() if s["traceId"] == trace_id]
            found = {
                "mutation": [s for s in spans if s["attributes"].get("graphql.operation.type") == "mutation"],
                "relay": spans_named(spans, "relay publish PostCreated"),
                "outbox wait": spans_named(spans, "outbox wait"),
                "broker": spans_named(spans, "broker"),
                "worker-events": spans_named(spans, "worker-events PostCreated"),
                "fan-out batch": spans_named(spans, "fan-out batch"),
                "delivery": spans_named(spans, "realtime deliver"),
                "asyncpg": [s for s in spans if s["attributes"].get("db.system") == "postgresql"],
            }
            return found if all(found.values()) else {}

        found = await eventually(journey)  # the group joins and rebalances first: slow on a busy host

    relay_span = found["relay"][0]
    worker = found["worker-events"][0]
    mutation = found["mutation"][0]
    # The relay continues the resolver that wrote the row; the worker and delivery continue the relay's record.
    assert relay_span["parentId"] == mutation["spanId"]
    assert found["outbox wait"][0]["parentId"] == mutation["spanId"]
    assert worker["parentId"] == relay_span["spanId"]
    assert found["delivery"][0]["parentId"] == relay_span["spanId"]
    assert worker["attributes"]["feedfabric.step"] == "consumer"
    assert worker["attributes"]["messaging.consumer.group.name"] == "worker-events"
    batch = found["fan-out batch"][0]
    assert batch["parentId"] == worker["spanId"]
    assert batch["attributes"]["feedfabric.fanout.followers"] == 1
    assert batch["attributes"]["feedfabric.fanout.inserts"] == 1
    assert found["delivery"][0]["attributes"]["feedfabric.realtime.subscribers"] >= 1
    assert mutation["attributes"]["graphql.operation.name"] == ""
    assert mutation["attributes"]["feedfabric.graphql.cost"] >= 1


async def test_an_exporter_that_is_down_costs_no_request(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    down = f"http://127.0.0.1:{free_port()}"
    exporting = settings.model_copy(
        update={
            "tracing_sample_ratio": 1.0,
            "tracing_recent_traces": 0,
            "otel_exporter_otlp_endpoint": down,
        }
    )
    made = tracing.setup(exporting, "feedfabric-test")
    assert made is not None and made.recent is None
    try:
        async with serve(exporting, made) as server:
            alice = await server.api.member("alice")
            for n in range(5):
                await server.api.post(alice, f"post {n}")
            response = await server.api.rest("GET", "/healthz")
            assert response.status_code == 200
    finally:
        made.shutdown()


async def test_tracing_is_off_without_a_destination_and_outbox_rows_then_carry_no_traceparent(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    assert not settings.feedfabric_dev_mode
    assert tracing.setup(settings, "feedfabric-api") is None
    async with serve(settings) as server:
        alice = await server.api.member("alice")
        await server.api.post(alice, "untraced")
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE traceparent IS NOT NULL") == 0
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE event_type = 'PostCreated'") == 1


def test_a_malformed_traceparent_continues_nothing() -> None:
    assert tracing.context_of("not-a-traceparent") is None
    assert tracing.context_of(None) is None
    assert tracing.context_of("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") is not None


async def test_the_dev_ring_writes_its_traces_where_the_dashboard_reads_them(settings: Settings) -> None:
    dev = settings.model_copy(update={"feedfabric_dev_mode": True})
    made = tracing.setup(dev, "feedfabric-relay")
    assert made is not None and made.recent is not None
    with made.tracer().start_as_current_span("relay publish PostCreated"):
        pass
    made.shutdown()
    written = tracing.read_recent(dev.feedfabric_data_dir / tracing.TRACES_DIR)
    assert [(s["name"], s["service"]) for s in written] == [("relay publish PostCreated", "feedfabric-relay")]


def test_spans_go_to_the_traces_path_of_the_otlp_endpoint(settings: Settings) -> None:
    base = settings.model_copy(update={"otel_exporter_otlp_endpoint": "http://collector:4318/"})
    assert tracing.traces_url(base) == "http://collector:4318/v1/traces"
    own = base.model_copy(update={"otel_exporter_otlp_traces_endpoint": "http://elsewhere:4318/spans"})
    assert tracing.traces_url(own) == "http://elsewhere:4318/spans"


def test_a_query_outside_traced_work_starts_no_trace(settings: Settings) -> None:
    made = tracing.setup(traced_settings(settings), "feedfabric-relay", write_recent=False)
    assert made is not None and made.recent is not None
    tracer = made.tracer()
    with tracer.start_as_current_span("SELECT", kind=SpanKind.CLIENT):
        pass
    with tracer.start_as_current_span("relay publish PostCreated", kind=SpanKind.PRODUCER):
        with tracer.start_as_current_span("UPDATE", kind=SpanKind.CLIENT):
            pass
    made.shutdown()
    assert sorted(s["name"] for s in made.recent.spans()) == ["UPDATE", "relay publish PostCreated"]
