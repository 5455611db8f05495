"""The consumer runner: one aiokafka consumer per group, offsets committed only after success.

A poll's events are applied in one transaction (workers/batches.py) when they
all decode and the batch needs no earlier event filled; otherwise, or when the
batch fails (nothing of it is written), record by record: decode (undecodable
→ dead letters), skip types the group does not take, then apply it once and in
its key's version order (workers/applying.py). A PermanentError parks the
record in dead letters (marked processed) and moves on. Any other error is transient: the partition is paused and rewound to the
failed record, and polled again after an exponential backoff capped at 30 s,
while the other partitions keep flowing and the consumer keeps its group
membership. Offsets are committed per partition after each polled chunk, on
revoke and on a clean stop.

Two repairs for a broker that loses data: when a relay raises the broker
epoch, every runner rewinds its partitions to the start of the new log (its
offsets point into the lost one); and every few seconds a sweep applies, from
the outbox, events published more than CONSUMER_SWEEP_AFTER_S ago that the
group has still not applied (a broker can lose records it acknowledged).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind

from feedfabric.core import failpoints, metrics, tracing
from feedfabric.core.events import Event
from feedfabric.core.settings import Settings
from feedfabric.core.topics import topic_name
from feedfabric.db import pipeline as db
from feedfabric.workers import applying, batches, spans
from feedfabric.workers.base import GroupSpec, PermanentError, WorkerContext

__all__ = ["GroupRunner", "run_groups"]

log = logging.getLogger(__name__)

ConsumerFactory = Callable[[Settings, str], AIOKafkaConsumer]


def default_consumer(settings: Settings, group_id: str) -> AIOKafkaConsumer:
    """fetch_max_wait_ms is short because some brokers (Tansu, the dev broker) hold a fetch for the
    whole wait even when data arrives sooner; Apache Kafka answers at once either way."""
    return AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers or "",
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=500,
        fetch_max_wait_ms=50,
        session_timeout_ms=settings.kafka_session_timeout_ms,
        heartbeat_interval_ms=min(settings.kafka_heartbeat_interval_ms, settings.kafka_session_timeout_ms // 3),
    )


@dataclass
class _Retry:
    offset: int
    attempt: int
    resume_at: float


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka ships no types: its classes are Any
    def __init__(self, runner: GroupRunner) -> None:
        self.runner = runner

    async def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        async with self.runner.lock:
            await self.runner.commit(set(revoked))
            for tp in revoked:
                self.runner.retries.pop(tp, None)

    async def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        return None


class GroupRunner:
    def __init__(
        self,
        spec: GroupSpec,
        ctx: WorkerContext,
        *,
        consumer_factory: ConsumerFactory = default_consumer,
        backoff_initial: float = 0.5,
        backoff_cap: float = 30.0,
        poll_ms: int = 500,
    ) -> None:
        self.spec = spec
        self.ctx = ctx
        self.group_id = ctx.settings.kafka_topic_prefix + spec.name
        self.consumer = consumer_factory(ctx.settings, self.group_id)
        self.backoff_initial = backoff_initial
        self.backoff_cap = backoff_cap
        self.poll_ms = poll_ms
        self.lock = asyncio.Lock()
        self.done: dict[TopicPartition, int] = {}
        self.retries: dict[TopicPartition, _Retry] = {}
        self.epoch: int | None = None
        self.epoch_check_s = 1.0
        self._next_epoch_check = 0.0
        self.sweep_every_s = 5.0
        self._next_sweep = time.monotonic() + self.sweep_every_s
        self.swept_to: dt.datetime | None = None
        self._polled_ns = 0

    async def run(self, stop: asyncio.Event) -> None:
        topics = [topic_name(self.ctx.settings, t) for t in self.spec.topics]
        self.consumer.subscribe(topics, listener=_Listener(self))
        await self.consumer.start()
        try:
            while not stop.is_set():
                await self._rewind_after_broker_loss()
                await self._sweep()
                self._resume_due()
                batch = await self.consumer.getmany(timeout_ms=self._poll_timeout(), max_records=500)
                if batch:
                    await self._handle_batch(batch, stop)
        finally:
            async with self.lock:
                await self.commit(None)
            await self.consumer.stop()

    async def _rewind_after_broker_loss(self) -> None:
        """Offsets held or committed before the broker lost its data point into a log that is gone."""
        now = time.monotonic()
        if now < self._next_epoch_check:
            return
        self._next_epoch_check = now + self.epoch_check_s
        try:
            epoch = await db.broker_epoch(self.ctx.pool)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.debug("%s: broker epoch unreadable: %s", self.spec.name, exc)
            return
        if self.epoch is not None and epoch > self.epoch:
            async with self.lock:
                assigned = self.consumer.assignment()
                self.done.clear()
                self.retries.clear()
                if assigned:
                    self.consumer.resume(*assigned)
                    await self.consumer.seek_to_beginning(*assigned)
            log.warning(
                "%s: broker epoch %d: the broker lost data; rewound %d partitions to the start",
                self.spec.name,
                epoch,
                len(assigned),
            )
        self.epoch = epoch

    def _poll_timeout(self) -> int:
        if not self.retries:
            return self.poll_ms
        wait = min(r.resume_at for r in self.retries.values()) - time.monotonic()
        return max(1, min(self.poll_ms, int(wait * 1000)))

    def _resume_due(self) -> None:
        now = time.monotonic()
        due = [tp for tp, r in self.retries.items() if r.resume_at <= now]
        if due:
            assigned = self.consumer.assignment()
            self.consumer.resume(*[tp for tp in due if tp in assigned])

    async def _handle_batch(self, batch: dict[TopicPartition, list[ConsumerRecord]], stop: asyncio.Event) -> None:
        self._polled_ns = time.time_ns()
        if self.spec.prepare is not None:
            wanted = [
                e for recs in batch.values() for r in recs if (e := _decode(r)) and e.type in self.spec.event_types
            ]
            if wanted:
                try:
                    with self._prepare_span(batch):
                        await self.spec.prepare(self.ctx, wanted)
                except Exception:
                    log.exception("%s: prepare failed; handlers run without it", self.spec.name)
        async with self.lock:
            assigned, paused = self.consumer.assignment(), self.consumer.paused()
            live = {tp: records for tp, records in batch.items() if records and tp in assigned and tp not in paused}
            if await self._apply_poll(live):
                for tp, records in live.items():
                    self.done[tp] = records[-1].offset + 1
                    self.retries.pop(tp, None)
            else:
                for tp, records in live.items():
                    for record in records:
                        if tp not in self.consumer.assignment() or tp in self.consumer.paused():
                            break
                        if not await self._process(tp, record):
                            break
                        self.done[tp] = record.offset + 1
            await self.commit(set(live))
            for tp, records in live.items():
                # A rebalance during the batch may have revoked tp; highwater() asserts on an unassigned one.
                if tp in self.consumer.assignment() and (high := self.consumer.highwater(tp)) is not None:
                    metrics.CONSUMER_LAG.labels(group=self.spec.name, topic=tp.topic, partition=str(tp.partition)).set(
                        max(high - records[-1].offset - 1, 0)
                    )

    async def _apply_poll(self, live: dict[TopicPartition, list[ConsumerRecord]]) -> bool:
        """The poll's events in one transaction (workers/batches.py); False: apply them one by one instead.

        Undecodable records go one by one (each is parked where it stands); so does a batch that declines
        or fails, which wrote nothing.
        """
        polled = [(tp, record, _decode(record)) for tp, records in live.items() for record in records]
        if not polled or any(event is None for _, _, event in polled):
            return False
        wanted = [(tp, r, e) for tp, r, e in polled if e is not None and e.type in self.spec.event_types]
        if wanted:
            try:
                applied = await batches.apply_batch(
                    self.spec, self.ctx, [e for _, _, e in wanted], lambda i: self._continued(*wanted[i])
                )
            except Exception as exc:
                log.info("%s: a batch of %d failed (%r); applying them one by one", self.spec.name, len(wanted), exc)
                return False
            if applied is None:
                return False
            for i, (tp, record, event) in enumerate(wanted):
                failpoints.log_effect(
                    "apply",
                    at_ns=applied.at_ns + i,
                    group=self.spec.name,
                    id=event.event_id,
                    key=event.key,
                    version=event.version,
                    type=event.type,
                    fresh=applied.fresh[i],
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=record.offset,
                )
            metrics.CONSUMER_BATCHED.labels(group=self.spec.name).inc(len(wanted))
        metrics.CONSUMER_HANDLED.labels(group=self.spec.name).inc(len(polled))
        return True

    async def _process(self, tp: TopicPartition, record: ConsumerRecord) -> bool:
        """True when the record is finished with (handled, redelivered, skipped or parked)."""
        event = _decode(record)
        try:
            if event is None:
                await self._dead_letter(record, "undecodable payload", None)
            elif event.type in self.spec.event_types:
                with self._continued(tp, record, event):
                    applied = await applying.apply_in_order(self.spec, self.ctx, event)
                failpoints.log_effect(
                    "apply",
                    at_ns=applied.at_ns,
                    group=self.spec.name,
                    id=event.event_id,
                    key=event.key,
                    version=event.version,
                    type=event.type,
                    fresh=applied.fresh,
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=record.offset,
                )
        except PermanentError as exc:
            try:
                await self._dead_letter(record, f"{type(exc).__name__}: {exc}", event)
            except Exception:
                log.exception("%s: dead-lettering failed", self.spec.name)
                return self._retry(tp, record)
        except Exception:
            log.exception("%s: %s[%d]@%d failed; will retry", self.spec.name, tp.topic, tp.partition, record.offset)
            return self._retry(tp, record)
        self.retries.pop(tp, None)
        metrics.CONSUMER_HANDLED.labels(group=self.spec.name).inc()
        return True

    @contextlib.contextmanager
    def _continued(self, tp: TopicPartition, record: ConsumerRecord, event: Event) -> Iterator[None]:
        """The event's trace goes on here: a span for its time in the broker (from the record's produce
        time to this poll) and the group's span around applying it (feedfabric.workers.spans)."""
        parent = tracing.context_of(tracing.header_of(record.headers))
        if parent is None:
            yield
            return
        tracer = self.ctx.tracer
        attributes = {
            "messaging.system": "kafka",
            "messaging.destination.name": tp.topic,
            "messaging.destination.partition.id": str(tp.partition),
            "messaging.kafka.offset": record.offset,
        }
        if record.timestamp and self._polled_ns:
            broker = tracer.start_span(
                "broker",
                context=parent,
                start_time=record.timestamp * 1_000_000,
                attributes={**spans.event_attributes(self.spec.name, event), **attributes, "feedfabric.step": "broker"},
            )
            broker.end(end_time=max(self._polled_ns, record.timestamp * 1_000_000))
        with spans.applying(tracer, self.spec.name, event, parent, attributes):
            yield

    def _prepare_span(
        self, batch: dict[TopicPartition, list[ConsumerRecord]]
    ) -> contextlib.AbstractContextManager[Any]:
        """The group's batch preparation (embedding a poll's texts at once) as one span, in the trace of the
        first traced record and linked to the others'; nothing when none is traced."""
        contexts = [
            c for recs in batch.values() for r in recs if (c := tracing.context_of(tracing.header_of(r.headers)))
        ]
        if not contexts:
            return contextlib.nullcontext()
        return self.ctx.tracer.start_as_current_span(
            f"{self.spec.name} prepare",
            context=contexts[0],
            kind=SpanKind.CONSUMER,
            links=[Link(trace.get_current_span(c).get_span_context()) for c in contexts[1:]],
            attributes={
                "messaging.consumer.group.name": self.spec.name,
                "messaging.batch.message_count": len(contexts),
            },
        )

    async def _sweep(self) -> None:
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.sweep_every_s
        try:
            self.swept_to = (await applying.sweep(self.spec, self.ctx, self.swept_to)).swept_to
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("%s: sweep failed (%s); it runs again", self.spec.name, exc)
        except Exception:
            log.exception("%s: sweep failed; it runs again", self.spec.name)

    def _retry(self, tp: TopicPartition, record: ConsumerRecord) -> bool:
        previous = self.retries.get(tp)
        attempt = previous.attempt + 1 if previous and previous.offset == record.offset else 1
        delay = min(self.backoff_cap, self.backoff_initial * 2 ** (attempt - 1))
        self.retries[tp] = _Retry(record.offset, attempt, time.monotonic() + delay)
        metrics.CONSUMER_RETRIES.labels(group=self.spec.name).inc()
        self.consumer.pause(tp)
        self.consumer.seek(tp, record.offset)
        return False

    async def _dead_letter(self, record: ConsumerRecord, error: str, event: Event | None) -> None:
        """Parks the record; a decodable event is also marked processed, so no later key fill retries it."""
        payload = record.value.decode("utf-8", "replace") if record.value is not None else ""
        key = record.key.decode("utf-8", "replace") if record.key is not None else None
        async with self.ctx.pool.acquire() as conn, conn.transaction():
            await db.add_dead_letter(
                conn, self.spec.name, record.topic, record.partition, record.offset, key, payload, error[:2000]
            )
            if event is not None:
                await db.mark_processed(conn, self.spec.name, event.event_id)
        metrics.DEAD_LETTERS.labels(group=self.spec.name).inc()
        log.warning(
            "%s: parked %s[%d]@%d in dead letters: %s",
            self.spec.name,
            record.topic,
            record.partition,
            record.offset,
            error,
        )

    async def commit(self, tps: set[TopicPartition] | None) -> None:
        """Commits finished offsets (of `tps`, or all); a failed commit only means a redelivery later."""
        assigned = self.consumer.assignment()
        offsets = {tp: o for tp, o in self.done.items() if (tps is None or tp in tps) and tp in assigned}
        for tp in [tp for tp in self.done if tp not in assigned]:
            del self.done[tp]
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except (CommitFailedError, IllegalStateError) as exc:
            log.warning("%s: commit after a rebalance failed (%s); the new owner redelivers", self.spec.name, exc)
        except KafkaError as exc:
            log.warning("%s: commit failed (%s); will retry with the next one", self.spec.name, exc)
            return
        for tp, o in offsets.items():
            if self.done.get(tp) == o:
                del self.done[tp]


def _decode(record: ConsumerRecord) -> Event | None:
    try:
        message = json.loads(record.value)
        key = record.key.decode() if record.key is not None else ""
        return Event.from_message(key, message)
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
        return None


async def run_groups(
    settings: Settings, specs: Sequence[GroupSpec], stop: asyncio.Event, traced: tracing.Tracing | None = None
) -> None:
    """Runs each group in its own consumer until `stop`; one Postgres pool and Redis client are shared."""
    from feedfabric.core.topics import ensure_topics
    from feedfabric.db.pool import PrimaryWatch, create_pool
    from feedfabric.db.redisclient import create_redis

    await ensure_topics(settings)
    pool = await create_pool(
        settings.database_url or "",
        min_size=1,
        max_size=max(4, 2 * len(specs)),
        command_timeout=settings.database_command_timeout_seconds,
    )
    primary_watch = PrimaryWatch(pool)
    primary_watch.start()
    redis = create_redis(settings, timeout_ms=settings.worker_redis_timeout_ms)
    if traced is not None:
        traced.instrument_redis(redis)
    try:
        runners = []
        for spec in specs:
            ctx = WorkerContext(settings=settings, pool=pool, redis=redis, tracer=tracing.tracer_of(traced))
            if spec.setup is not None:
                await spec.setup(ctx)
            runners.append(GroupRunner(spec, ctx))
        tasks = [asyncio.create_task(r.run(stop), name=r.group_id) for r in runners]
        if settings.maintain_interval_seconds > 0:
            tasks.append(asyncio.create_task(_maintain_periodically(pool, settings, stop), name="maintain"))
        if any(spec.name == "worker-engagement" for spec in specs):
            from feedfabric.workers import retrain

            tasks.append(
                asyncio.create_task(retrain.run(pool, stop, settings.ranker_retrain_min_rows), name="ranker-retrain")
            )
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await primary_watch.stop()
        await redis.aclose()
        await pool.close()


async def _maintain_periodically(pool: asyncpg.Pool, settings: Settings, stop: asyncio.Event) -> None:
    """One pass of `feedfabric maintain` every MAINTAIN_INTERVAL_SECONDS, the first one interval after start
    (so a restarting worker does not run it each time); a failed pass is logged and tried at the next."""
    from feedfabric.feeds.maintenance import maintain

    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), settings.maintain_interval_seconds)
        if stop.is_set():
            return
        try:
            await maintain(pool, settings)
        except Exception:
            log.exception("maintain: pass failed; the next runs in %.0fs", settings.maintain_interval_seconds)
