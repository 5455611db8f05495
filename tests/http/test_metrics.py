"""Each metric moves when its event happens (deltas: the default registry is shared by the whole run)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import redis.asyncio as aioredis
from feedfabric.core import metrics
from feedfabric.core.events import POSTS, Event
from feedfabric.core.settings import Settings
from feedfabric.ops.devstack import free_port
from feedfabric.workers import events
from feedfabric.workers.base import GroupSpec, PermanentError, WorkerContext
from prometheus_client.parser import text_string_to_metric_families

from tests.pipeline_support import eventually, group_runner, relay, running
from tests.support import HOME, Api


async def delta(name: str, labels: dict[str, str], action: Callable[[], Awaitable[Any]]) -> float:
    before = metrics.sample(name, labels)
    await action()
    return metrics.sample(name, labels) - before


def scrape(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_graphql_latency_by_operation_name(api: Api) -> None:
    labels = {"operation": "MetricProbe", "type": "query"}
    moved = await delta(
        "feedfabric_graphql_operation_duration_seconds_count",
        labels,
        lambda: api.raw("query MetricProbe { viewer { id } }"),
    )
    assert moved == 1
    anonymous = await delta(
        "feedfabric_graphql_operation_duration_seconds_count",
        {"operation": "anonymous", "type": "query"},
        lambda: api.raw("{ viewer { id } }"),
    )
    assert anonymous == 1


async def test_graphql_errors_by_code(api: Api) -> None:
    assert await delta("feedfabric_graphql_errors_total", {"code": "BAD_USER_INPUT"}, lambda: api.raw("{ nope }")) == 1
    assert await delta("feedfabric_graphql_errors_total", {"code": "UNAUTHENTICATED"}, lambda: api.raw(HOME)) == 1


async def test_home_feed_pages_by_source(api: Api) -> None:
    token = await api.member("reader")
    before = {
        s: metrics.sample("feedfabric_home_feed_pages_total", {"source": s})
        for s in ("redis", "postgres", "redis+postgres")
    }
    await api.gql(HOME, {"first": 5}, token=token)
    await api.rest("GET", "/userfeed/home", token=token)
    after = {s: metrics.sample("feedfabric_home_feed_pages_total", {"source": s}) for s in before}
    assert sum(after.values()) - sum(before.values()) == 2


async def test_metrics_endpoint_reads_outbox_and_dead_letters_from_postgres(api: Api, pool: asyncpg.Pool) -> None:
    await pool.execute("DELETE FROM outbox")
    await pool.execute(
        "INSERT INTO outbox (topic, key, shard, event_type, aggregate_version, payload, created_at) "
        "VALUES ('posts', 'k', 0, 'PostCreated', 1, '{}', now() - interval '42 seconds'), "
        "       ('posts', 'k', 0, 'PostCreated', 2, '{}', now())"
    )
    await pool.execute(
        'INSERT INTO dead_letters (group_name, topic, partition, "offset", payload, error) '
        "VALUES ('worker-metrics-test', 't', 0, 7, 'x', 'boom')"
    )
    response = await api.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = scrape(response.text)
    assert samples[("feedfabric_outbox_backlog", ())] == 2
    assert samples[("feedfabric_outbox_oldest_unpublished_age_seconds", ())] >= 42
    assert samples[("feedfabric_dead_letters_stored", (("group", "worker-metrics-test"),))] == 1
    await pool.execute("UPDATE outbox SET published_at = now()")
    samples = scrape((await api.client.get("/metrics")).text)
    assert samples[("feedfabric_outbox_backlog", ())] == 0
    assert samples[("feedfabric_outbox_oldest_unpublished_age_seconds", ())] == 0


async def test_every_metric_is_exported(api: Api) -> None:
    text = (await api.client.get("/metrics")).text
    names = {family.name for family in text_string_to_metric_families(text)}
    for expected in (
        "feedfabric_graphql_operation_duration_seconds",
        "feedfabric_graphql_errors",
        "feedfabric_graphql_query_cost",
        "feedfabric_rate_limited",
        "feedfabric_home_feed_pages",
        "feedfabric_fanout_inserts",
        "feedfabric_fanout_duration_seconds",
        "feedfabric_outbox_backlog",
        "feedfabric_outbox_oldest_unpublished_age_seconds",
        "feedfabric_outbox_published",
        "feedfabric_consumer_lag",
        "feedfabric_consumer_retries",
        "feedfabric_consumer_events",
        "feedfabric_dead_letters",
        "feedfabric_dead_letters_stored",
        "feedfabric_websocket_connections",
        "feedfabric_realtime_dropped_subscribers",
        "feedfabric_realtime_subscribers",
        "feedfabric_realtime_delivered",
        "feedfabric_redis_used_memory_bytes",
        "feedfabric_redis_maxmemory_bytes",
    ):
        assert expected in names, expected


async def test_fanout_inserts_and_duration(
    api: Api, settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    author = await api.member("author")
    for name in ("fan_a", "fan_b"):
        await api.follow(await api.member(name), "author")
    post_id = await api.post(author, "fan me out")
    ctx = WorkerContext(settings=settings, pool=pool, redis=redis)
    event = Event(1, "PostCreated", post_id, 1, {"postId": post_id})
    inserts = metrics.sample("feedfabric_fanout_inserts_total")
    durations = metrics.sample("feedfabric_fanout_duration_seconds_count")
    async with pool.acquire() as conn:
        await events.handle(ctx, conn, event)
    assert metrics.sample("feedfabric_fanout_inserts_total") - inserts == 3  # the author and two followers
    assert metrics.sample("feedfabric_fanout_duration_seconds_count") - durations == 1


async def test_relay_counts_published_rows(api: Api, settings: Settings) -> None:
    token = await api.member("publisher")
    before = metrics.sample("feedfabric_outbox_published_total")
    await api.post(token, "to the broker")
    async with running(relay(settings).run):
        await eventually(lambda: _grew("feedfabric_outbox_published_total", {}, before))


async def _grew(name: str, labels: dict[str, str], before: float, by: float = 1) -> bool:
    return metrics.sample(name, labels) - before >= by


async def test_consumer_retries_dead_letters_handled_and_lag(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    from aiokafka import AIOKafkaProducer
    from feedfabric.core.topics import ensure_topics

    group = f"test-metrics-{uuid.uuid4().hex[:6]}"
    attempts: list[int] = []

    async def handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
        if event.event_id == 1:
            attempts.append(1)
            # Each poll tries event 1 twice: in the poll's batch, then alone when the batch fails; so four
            # failures are two polls, each ending in a retry.
            if len(attempts) <= 4:
                raise ConnectionError("transient")
        if event.event_id == 2:
            raise PermanentError("never")

    await ensure_topics(settings)
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, acks="all")
    await producer.start()
    try:
        for event_id in (1, 2, 3):
            value = json.dumps(Event(event_id, "PostUpdated", "k", event_id, {}).to_message()).encode()
            await producer.send_and_wait(settings.kafka_topic_prefix + POSTS, value, key=b"k", partition=0)
    finally:
        await producer.stop()
    labels = {"group": group}
    before = {
        name: metrics.sample(name, labels)
        for name in (
            "feedfabric_consumer_retries_total",
            "feedfabric_dead_letters_total",
            "feedfabric_consumer_events_total",
        )
    }
    runner = group_runner(
        settings, pool, redis, GroupSpec(group, (POSTS,), frozenset({"PostUpdated"}), handle), backoff_initial=0.05
    )
    async with running(runner.run):
        await eventually(
            lambda: _grew("feedfabric_consumer_events_total", labels, before["feedfabric_consumer_events_total"], 3)
        )
    assert (
        metrics.sample("feedfabric_consumer_retries_total", labels) - before["feedfabric_consumer_retries_total"] == 2
    )
    assert metrics.sample("feedfabric_dead_letters_total", labels) - before["feedfabric_dead_letters_total"] == 1
    lag = metrics.sample(
        "feedfabric_consumer_lag", {"group": group, "topic": settings.kafka_topic_prefix + POSTS, "partition": "0"}
    )
    assert lag == 0


async def test_rate_limited_counter(api: Api, settings: Settings) -> None:
    from tests.schema.test_limits import STEADY_WINDOW, api_with

    async with api_with(settings, rate_limit_operations=1, rate_limit_window_seconds=STEADY_WINDOW) as limited:
        await limited.raw("{ viewer { id } }")
        assert await delta("feedfabric_rate_limited_total", {}, lambda: limited.raw("{ viewer { id } }")) == 1


def test_websocket_connections_gauge(settings: Settings) -> None:
    from feedfabric.app import create_app
    from feedfabric.core.auth import issue_token
    from starlette.testclient import TestClient

    token = issue_token(settings.jwt_secret, "socket_user")
    with TestClient(create_app(settings)) as client:
        client.post(
            "/graphql",
            headers={"Authorization": f"Bearer {token}"},
            json={"query": 'mutation { upsertProfile(username: "socket_user", displayName: "S") { id } }'},
        )
        before = metrics.sample("feedfabric_websocket_connections")
        with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
            ws.send_json({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
            assert ws.receive_json()["type"] == "connection_ack"
            assert metrics.sample("feedfabric_websocket_connections") == before + 1
        client.get("/healthz")  # let the server side finish the closed socket
        assert metrics.sample("feedfabric_websocket_connections") == before


def test_relay_and_worker_processes_serve_metrics(settings: Settings) -> None:
    port = free_port()
    metrics.serve(settings.model_copy(update={"metrics_port": port}))
    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    assert response.status_code == 200 and "feedfabric_consumer_lag" in response.text
    metrics.serve(settings.model_copy(update={"metrics_port": port}))  # a taken port is logged, not fatal


async def test_metrics_endpoint_reads_redis_memory_against_its_bound(api: Api, redis: aioredis.Redis) -> None:
    samples = scrape((await api.client.get("/metrics")).text)
    used = {labels: v for (name, labels), v in samples.items() if name == "feedfabric_redis_used_memory_bytes"}
    bounds = {labels: v for (name, labels), v in samples.items() if name == "feedfabric_redis_maxmemory_bytes"}
    assert used and set(used) == set(bounds)
    assert all(v > 0 for v in used.values())
    info = await redis.info("memory")
    expected_bounds = sorted(
        float(m["maxmemory"]) for m in (info.values() if all(isinstance(v, dict) for v in info.values()) else [info])
    )
    assert sorted(bounds.values()) == expected_bounds


async def test_live_subscribers_are_read_at_scrape(api: Api) -> None:
    samples = scrape((await api.client.get("/metrics")).text)
    assert samples[("feedfabric_realtime_subscribers", ())] == 0
    assert ("feedfabric_realtime_delivered_total", ()) in samples
