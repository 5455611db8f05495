"""Every consumer group continues the trace of the mutation that wrote its event: from Kafka or from the sweep."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis
from aiokafka import AIOKafkaProducer
from feedfabric.core import tracing
from feedfabric.core.events import POSTS, Event
from feedfabric.core.settings import Settings
from feedfabric.core.topics import ensure_topics
from feedfabric.db.outbox import add_event
from feedfabric.workers import applying, notifications
from feedfabric.workers.base import GroupSpec, WorkerContext
from feedfabric.workers.runner import GroupRunner

from tests import factories
from tests.pipeline_support import eventually, quick_join_consumer, running
from tests.tracing_support import traced_process


@pytest.fixture
def traced(settings: Settings) -> Iterator[tracing.Tracing]:
    with traced_process(settings) as made:
        yield made


def trace_id(traceparent: str | None) -> str:
    assert traceparent is not None
    return traceparent.split("-")[1]


def spans_of(traced: tracing.Tracing, trace: str) -> list[dict[str, Any]]:
    assert traced.recent is not None
    return [s for s in traced.recent.spans() if s["traceId"] == trace]


async def written_in_a_trace(pool: asyncpg.Pool, traced: tracing.Tracing, key: str) -> tuple[Event, str, str]:
    """A PostCreated written to the outbox under a traced span, as a mutation writes it; with its
    traceparent and the writer's span ID."""
    with traced.tracer().start_as_current_span("mutation") as writer:
        async with pool.acquire() as conn, conn.transaction():
            event_id = await add_event(conn, "PostCreated", key, {"postId": key})
            row = await conn.fetchrow("SELECT aggregate_version, traceparent FROM outbox WHERE id = $1", event_id)
    event = Event(event_id, "PostCreated", key, row["aggregate_version"], {"postId": key})
    return event, row["traceparent"], format(writer.get_span_context().span_id, "016x")


async def test_a_group_continues_a_records_trace_and_what_its_handler_writes_carries_it_on(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, traced: tracing.Tracing
) -> None:
    event, traceparent, _ = await written_in_a_trace(pool, traced, "post-traced-1")
    prepared: list[str | None] = []
    written: list[int] = []

    async def prepare(ctx: WorkerContext, events: Sequence[Event]) -> None:
        prepared.append(tracing.traceparent())

    async def handle(ctx: WorkerContext, conn: asyncpg.Connection, seen: Event) -> None:
        written.append(await add_event(conn, "NotificationCreated", "member-x", {"postId": seen.data["postId"]}))

    spec = GroupSpec("test-traced", (POSTS,), frozenset({"PostCreated"}), handle, prepare=prepare)
    await ensure_topics(settings)
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(
            settings.kafka_topic_prefix + POSTS,
            json.dumps(event.to_message()).encode(),
            key=event.key.encode(),
            partition=0,
            headers=tracing.kafka_headers(traceparent),
        )
    finally:
        await producer.stop()
    ctx = WorkerContext(settings=settings, pool=pool, redis=redis, tracer=traced.tracer())
    runner = GroupRunner(spec, ctx, poll_ms=50, consumer_factory=quick_join_consumer)

    async def handled() -> bool:
        return bool(written)

    async with running(runner.run):
        await eventually(handled)

    trace = trace_id(traceparent)
    spans = spans_of(traced, trace)
    [group] = [s for s in spans if s["name"] == "test-traced PostCreated"]
    assert group["attributes"]["feedfabric.step"] == "consumer"
    assert group["attributes"]["messaging.consumer.group.name"] == "test-traced"
    assert group["attributes"]["feedfabric.post.id"] == "post-traced-1"
    [broker] = [s for s in spans if s["name"] == "broker"]
    assert broker["attributes"]["messaging.consumer.group.name"] == "test-traced"
    # The batch preparation runs in the record's trace too, and the handler's own event carries it on.
    assert [trace_id(p) for p in prepared] == [trace]
    onward = await pool.fetchval("SELECT traceparent FROM outbox WHERE id = $1", written[0])
    assert onward.startswith(f"00-{trace}-{group['spanId']}-")


async def test_an_event_kafka_never_delivered_is_applied_by_the_sweep_in_its_writers_trace(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, traced: tracing.Tracing
) -> None:
    event, traceparent, writer = await written_in_a_trace(pool, traced, "post-traced-2")
    await pool.execute("UPDATE outbox SET published_at = now() - interval '1 minute' WHERE id = $1", event.event_id)
    seen: list[str | None] = []

    async def handle(ctx: WorkerContext, conn: asyncpg.Connection, applied: Event) -> None:
        seen.append(tracing.traceparent())

    spec = GroupSpec("test-swept", (POSTS,), frozenset({"PostCreated"}), handle)
    ctx = WorkerContext(
        settings=settings.model_copy(update={"consumer_sweep_after_s": 30.0}),
        pool=pool,
        redis=redis,
        tracer=traced.tracer(),
    )
    await applying.sweep(spec, ctx, None)

    trace = trace_id(traceparent)
    [group] = [s for s in spans_of(traced, trace) if s["name"] == "test-swept PostCreated"]
    assert group["parentId"] == writer
    assert group["attributes"]["feedfabric.step"] == "consumer"
    assert group["attributes"]["feedfabric.consumer.source"] == "outbox sweep"
    assert [trace_id(s) for s in seen] == [trace]


async def test_an_event_without_a_trace_makes_no_span(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, traced: tracing.Tracing
) -> None:
    async with pool.acquire() as conn, conn.transaction():
        event_id = await add_event(conn, "PostCreated", "post-untraced", {"postId": "post-untraced"})
    await pool.execute("UPDATE outbox SET published_at = now() - interval '1 minute' WHERE id = $1", event_id)
    applied: list[int] = []

    async def handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
        applied.append(event.event_id)

    spec = GroupSpec("test-untraced", (POSTS,), frozenset({"PostCreated"}), handle)
    ctx = WorkerContext(settings=settings, pool=pool, redis=redis, tracer=traced.tracer())
    await applying.sweep(spec, ctx, None)
    assert applied == [event_id]
    assert traced.recent is not None
    assert not [s for s in traced.recent.spans() if s["name"].startswith("test-untraced")]


async def test_worker_notifications_counts_what_it_told_and_its_notification_goes_on_in_the_trace(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, traced: tracing.Tracing
) -> None:
    author, liker = await factories.member(pool), await factories.member(pool)
    post_id = await factories.post(pool, author)
    with traced.tracer().start_as_current_span("mutation"):
        async with pool.acquire() as conn, conn.transaction():
            liked = await add_event(
                conn,
                "PostLiked",
                str(post_id),
                {"memberId": str(liker), "authorId": str(author), "postId": str(post_id)},
            )
    traceparent = await pool.fetchval("SELECT traceparent FROM outbox WHERE id = $1", liked)
    await pool.execute("UPDATE outbox SET published_at = now() - interval '1 minute' WHERE id = $1", liked)
    ctx = WorkerContext(
        settings=settings.model_copy(update={"consumer_sweep_after_s": 30.0}),
        pool=pool,
        redis=redis,
        tracer=traced.tracer(),
    )
    await applying.sweep(notifications.GROUP, ctx, None)

    trace = trace_id(traceparent)
    [group] = [s for s in spans_of(traced, trace) if s["name"] == "worker-notifications PostLiked"]
    assert group["attributes"]["feedfabric.notifications.created"] == 1
    told = await pool.fetchval(
        "SELECT traceparent FROM outbox WHERE event_type = 'NotificationCreated' AND payload->>'recipientId' = $1",
        str(author),
    )
    assert told.startswith(f"00-{trace}-{group['spanId']}-")  # realtime delivers it in the same trace
