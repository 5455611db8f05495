"""The realtime consumer inside each API process: Kafka → hydrate → the process's hub.

Its group is `realtime-<instance>` (FEEDFABRIC_INSTANCE, else a random ID), so
every API process reads every post and notification event and keeps what its
own connected members need. It starts at the latest offset: WebSocket delivery
is best effort, and a client that was away resumes with `since`. A failure
never stops the API; the consumer logs it and reconnects with a capped backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import asyncpg
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Tracer

from feedfabric.core import metrics, tracing
from feedfabric.core.background import Background
from feedfabric.core.events import MEMBERS, NOTIFICATIONS, POSTS, Event
from feedfabric.core.settings import Settings
from feedfabric.core.topics import ensure_topics, topic_name
from feedfabric.feeds.relations import RelationsCache
from feedfabric.realtime.delivery import RELATION_EVENTS, deliver
from feedfabric.realtime.hub import Hub

__all__ = ["RealtimeConsumer", "start_realtime"]

log = logging.getLogger(__name__)

# Posts and notifications to deliver; a member's relation changes to apply to live filters (delivery).
WANTED = frozenset({"PostCreated", "NotificationCreated", "NotificationGroupUpdated"}) | RELATION_EVENTS


def group_id(settings: Settings, instance: str) -> str:
    return f"{settings.kafka_topic_prefix}realtime-{instance}"


@dataclass
class RealtimeConsumer:
    settings: Settings
    pool: asyncpg.Pool
    hub: Hub
    instance: str = field(default="")
    poll_ms: int = 200
    tracer: Tracer = tracing.NO_TRACER
    # This process's relations (the API's Resources.relations), which the relation events keep current.
    relations: RelationsCache = field(default_factory=RelationsCache)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    events_seen: int = 0
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: Background = field(default_factory=lambda: Background("realtime-consumer"))

    def __post_init__(self) -> None:
        self.instance = self.instance or self.settings.feedfabric_instance or uuid.uuid4().hex[:12]

    def start(self) -> None:
        self._task.start(self._run)

    async def stop(self) -> None:
        """Asks the loop to end after its poll, and cancels it if it has not within 10 s."""
        self._stop.set()
        await self._task.stop(grace_s=10)

    async def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                await self._session()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the API keeps serving; realtime reconnects
                failures += 1
                delay = min(10.0, 0.2 * 2 ** min(failures, 8))
                log.warning("realtime consumer: %s: %s; reconnecting in %.1fs", type(exc).__name__, exc, delay)
                with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)

    async def _session(self) -> None:
        topics = [topic_name(self.settings, t) for t in (POSTS, NOTIFICATIONS, MEMBERS)]
        await ensure_topics(self.settings, topics)
        # Every API process reads every partition from the end: assigned by hand, the
        # group never joins or rebalances (the group name still identifies the reader).
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.kafka_bootstrap_servers or "",
            group_id=group_id(self.settings, self.instance),
            auto_offset_reset="latest",
            enable_auto_commit=False,
            max_poll_records=500,
            # Tansu (the dev broker) holds a fetch for its whole wait even when data arrives sooner, so the
            # wait bounds the latency every live item adds; the cost of a short one is idle fetch round trips.
            fetch_max_wait_ms=self.settings.realtime_fetch_wait_ms,
        )
        await consumer.start()
        try:
            await consumer.topics()
            partitions = [
                TopicPartition(topic, p) for topic in topics for p in sorted(consumer.partitions_for_topic(topic) or ())
            ]
            consumer.assign(partitions)
            await consumer.seek_to_end(*partitions)
            for tp in partitions:
                await consumer.position(tp)
            self.ready.set()
            while not self._stop.is_set():
                batch = await consumer.getmany(timeout_ms=self.poll_ms)
                decoded = [(e, r) for records in batch.values() for r in records if (e := _decode(r)) is not None]
                if not decoded:
                    continue
                events = [e for e, _ in decoded]
                self.events_seen += len(events)
                with self._delivery_span([r for _, r in decoded]) as span:
                    try:
                        delivered = await deliver(self.pool, self.hub, events, self.relations)
                        span.set_attribute("feedfabric.realtime.delivered", delivered)
                        metrics.REALTIME_DELIVERED.inc(delivered)
                    except Exception:  # noqa: BLE001 - best effort: skip the chunk, keep the consumer alive
                        log.exception("realtime: delivering %d events failed; skipped", len(events))
        finally:
            await consumer.stop()

    @contextlib.contextmanager
    def _delivery_span(self, records: list[ConsumerRecord]) -> Iterator[trace.Span]:
        """One span per delivered chunk, in the trace of its first traced event and linked to the others'."""
        contexts = [c for r in records if (c := tracing.context_of(tracing.header_of(r.headers))) is not None]
        if not contexts:
            yield trace.INVALID_SPAN
            return
        with self.tracer.start_as_current_span(
            "realtime deliver",
            context=contexts[0],
            kind=SpanKind.CONSUMER,
            links=[Link(trace.get_current_span(c).get_span_context()) for c in contexts[1:]],
            attributes={
                "feedfabric.step": "delivery",
                "feedfabric.realtime.events": len(records),
                "feedfabric.realtime.subscribers": self.hub.subscriber_count(),
                "messaging.consumer.group.name": group_id(self.settings, self.instance),
            },
        ) as span:
            yield span


def _decode(record: ConsumerRecord) -> Event | None:
    try:
        event = Event.from_message(record.key.decode() if record.key else "", json.loads(record.value))
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
        return None
    return event if event.type in WANTED else None


def start_realtime(
    settings: Settings,
    pool: asyncpg.Pool,
    hub: Hub,
    tracer: Tracer = tracing.NO_TRACER,
    relations: RelationsCache | None = None,
) -> RealtimeConsumer | None:
    """Called from the app lifespan: the consumer that feeds `hub`, when Kafka is set (without it
    subscriptions still replay from Postgres, but get no live items)."""
    if not settings.kafka_bootstrap_servers:
        log.warning("KAFKA_BOOTSTRAP_SERVERS is not set: subscriptions get no live items from this process")
        return None
    consumer = RealtimeConsumer(settings, pool, hub, tracer=tracer, relations=relations or RelationsCache())
    consumer.start()
    return consumer
