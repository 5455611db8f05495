"""The outbox relay: the only producer to Kafka.

Ordering: a key's events share a shard (crc32(key) % OUTBOX_SHARDS), and a
shard is published by the one relay holding its session advisory lock. The
locks, the claims and the LISTEN all live on one dedicated connection, so a
relay that loses its connection loses its shards and its open claim together:
no other relay can publish a key's later events while its earlier ones are
still claimed. Relays count each other through a presence lock and each keeps
about its share of shards, taking over free ones periodically, so a dead
relay's shards move within a second or so.

Per batch: claim up to OUTBOX_BATCH_SIZE unpublished rows of owned shards in
ID order, send them all (acks=all), await every ack, stamp published_at. The
claim takes no row lock and opens no transaction (the shard's advisory lock
already makes this relay its rows' only claimant), and the stamp rides on the
next claim's statement when that claim follows at once (a full batch, or rows
already waiting): one Postgres round trip a batch under a steady stream, two
(claim, stamp) at a trickle. Produce-then-stamp means a crash in between
resends the batch: delivery is at-least-once and consumers absorb duplicates
by eventId. A failed send leaves that row and the key's
later rows of the batch unstamped, so the key is resent in order; the
producer is then recreated.

Broker data loss (cluster ID changed, a topic vanished, a partition's end
offset went backwards, or at start a topic missing or empty though the outbox
says events were published to it) raises the broker epoch, so consumers
rewind to the start of the new log, and unpublishes the retention window, so
the ordinary loop sends it again. aiokafka keeps one request in flight per
broker, so a partition's messages stay in send order even across retries.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from feedfabric.core import failpoints, metrics, tracing
from feedfabric.core.settings import Settings
from feedfabric.core.topics import all_topic_names, ensure_topics, topic_name
from feedfabric.db import pipeline as db
from feedfabric.db.outbox import NOTIFY_CHANNEL
from feedfabric.db.pool import init_connection

__all__ = ["Relay", "RelayTimings", "encode", "make_producer", "replay_since"]

log = logging.getLogger(__name__)
# Holds the relay's marker records (see _Kafka._place_marker); no consumer reads it.
MARKER_TOPIC = "feedfabric._relay-marker"

# Called after every ack of a batch arrived and before it is stamped: the
# seam where tests inject a crash.
AfterProduce = Callable[[Sequence[db.OutboxRow]], Awaitable[None]]
# How many claimed row IDs a relay remembers to tell a stale NOTIFY from a new row's (a few batches' worth).
_RECENT_CLAIMS = 4096


# A partition's record batch may hold a whole outbox batch of the largest events (a post's 50 mentions make
# about 2.5 kB): with aiokafka's 16 kB default, a hot key's rows filled it, and the relay's send loop then
# waited for a produce round trip mid-batch. Kept under the broker's default 1 MB message limit.
_BYTES_PER_EVENT = 4096
_MAX_RECORD_BATCH = 1_000_000


def make_producer(settings: Settings) -> AIOKafkaProducer:
    """All of a claimed batch is appended before the producer's sender runs (send() does not yield while the
    topic's metadata is known and the partition's batch has room), so a batch goes out as one produce
    request per broker: one produce round trip."""
    return AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap_servers or "",
        acks="all",
        client_id="feedfabric-relay",
        linger_ms=0,
        max_batch_size=min(_MAX_RECORD_BATCH, max(16384, settings.outbox_batch_size * _BYTES_PER_EVENT)),
    )


def encode(row: db.OutboxRow) -> bytes:
    return json.dumps(row.event().to_message(), separators=(",", ":")).encode()


@dataclass
class RelayTimings:
    shard_check_s: float = 1.0
    health_check_s: float = 5.0
    prune_every_s: float = 300.0
    reconnect_backoff_cap_s: float = 10.0


@dataclass
class Relay:
    settings: Settings
    after_produce: AfterProduce | None = None
    timings: RelayTimings = field(default_factory=RelayTimings)
    tracer: Tracer = tracing.NO_TRACER
    owned: set[int] = field(default_factory=set)
    published: int = 0
    replays: int = 0
    # Set at each replay: what a test (or an operator's script) waits on, where polling the count against a
    # clock failed under load.
    replayed: asyncio.Event = field(default_factory=asyncio.Event)
    # Batches claimed (with rows), and idle waits that ran their whole OUTBOX_IDLE_MS (no NOTIFY came): under
    # a steady stream the second stays at 0 (tests/workers/test_relay_batches.py; bench/write_path.py).
    batches: int = 0
    idle_timeouts: int = 0
    # Seams for tests and benchmarks: called with the relay's connection once it is set up (a query logger),
    # and the producer's factory.
    on_connect: Callable[[asyncpg.Connection], Awaitable[None]] | None = None
    producer_factory: Callable[[Settings], AIOKafkaProducer] = make_producer
    # IDs of rows this session claimed lately: a NOTIFY is delivered only once the relay's own claim transaction
    # ends, so the NOTIFY of a row the relay has just claimed and published used to wake it for an empty claim
    # (about every other claim at a few events a second: three round trips for nothing).
    _recently_claimed: deque[int] = field(default_factory=lambda: deque(maxlen=_RECENT_CLAIMS))
    _recent_set: set[int] = field(default_factory=set)
    # Rows published (every ack in) but not yet stamped: the next claim stamps them in its own statement when it
    # follows at once (a full batch, or rows already waiting); otherwise they are stamped before the idle wait.
    _unstamped: list[int] = field(default_factory=list)

    def _claimed_already(self, payload: str) -> bool:
        """True for the NOTIFY (`shard:id`) of a row this session has claimed; anything else wakes the relay."""
        _, sep, raw = payload.partition(":")
        return bool(sep) and raw.isdigit() and int(raw) in self._recent_set

    def _note_claimed(self, rows: Sequence[db.OutboxRow]) -> None:
        for row in rows:
            if len(self._recently_claimed) == self._recently_claimed.maxlen:
                self._recent_set.discard(self._recently_claimed[0])
            self._recently_claimed.append(row.id)
            self._recent_set.add(row.id)

    async def run(self, stop: asyncio.Event) -> None:
        """Publishes until `stop`; reconnects after losing Postgres or the broker."""
        failures = 0
        while not stop.is_set():
            try:
                await self._session(stop)
                return
            except Exception as exc:
                failures += 1
                delay = min(self.timings.reconnect_backoff_cap_s, 0.2 * 2 ** min(failures, 10))
                log.warning("relay: %s: %s; reconnecting in %.1fs", type(exc).__name__, exc, delay)
                self.owned.clear()
                await _sleep_unless(stop, delay)

    async def _session(self, stop: asyncio.Event) -> None:
        conn = await asyncpg.connect(
            self.settings.database_url or "", command_timeout=self.settings.database_command_timeout_seconds
        )
        await init_connection(conn)
        if self.on_connect is not None:
            await self.on_connect(conn)
        wake = asyncio.Event()
        self._recently_claimed.clear()
        self._recent_set.clear()

        def notified(_conn: object, _pid: int, _channel: str, payload: str) -> None:
            if not self._claimed_already(payload):
                wake.set()

        await conn.add_listener(NOTIFY_CHANNEL, notified)
        kafka = _Kafka(self.settings, self.producer_factory)
        try:
            await db.announce_relay(conn)
            await kafka.start()
            await self._check_at_start(conn, kafka)
            next_shards = next_health = 0.0
            next_prune = time.monotonic() + self.timings.prune_every_s / 10
            while not stop.is_set():
                now = time.monotonic()
                if now >= min(next_shards, next_health, next_prune):
                    # A shard given back must carry no unstamped row, or its next owner sends that row again.
                    await self._stamp(conn)
                if now >= next_shards:
                    await self._balance_shards(conn)
                    next_shards = now + self.timings.shard_check_s
                if now >= next_health:
                    await self._check_health(conn, kafka)
                    next_health = now + self.timings.health_check_s
                if now >= next_prune:
                    await self._prune(conn)
                    next_prune = now + self.timings.prune_every_s
                wake.clear()
                claimed = await self._publish_batch(conn, kafka) if self.owned else 0
                # A short batch waits for a NOTIFY, but not for one that already came: wake was cleared before
                # the claim, so a row committed after the claim's snapshot has set it, and the wait returns at once.
                if claimed < self.settings.outbox_batch_size and not wake.is_set():
                    await self._stamp(conn)  # a batch's stamp rides on the next claim only when it comes at once
                    if not await _wait_any(stop, wake, self.settings.outbox_idle_ms / 1000):
                        self.idle_timeouts += 1
            await self._stamp(conn)
        finally:
            self._unstamped = []  # not stamped: sent again, as after a crash between produce and stamp
            self.owned.clear()
            await kafka.stop()
            await conn.close(timeout=5)

    async def _publish_batch(self, conn: asyncpg.Connection, kafka: _Kafka) -> int:
        """One batch: the claim (stamping the previous batch's rows), one produce round trip; its rows are
        stamped by the next claim, or alone before the relay waits (`_stamp`).

        A crash before the stamp resends the batch: delivery is at-least-once either way.
        """
        stamping = self._unstamped
        rows = await db.claim(conn, sorted(self.owned), self.settings.outbox_batch_size, stamping)
        self._stamped(stamping)
        if not rows:
            return 0
        self.batches += 1
        self._note_claimed(rows)
        producer = await kafka.producer()
        blocked: set[str] = set()
        pending: list[tuple[db.OutboxRow, asyncio.Future[object] | None]] = []
        spans: dict[int, Span] = {}
        for row in rows:
            if row.key in blocked:
                pending.append((row, None))
                continue
            header = self._trace_row(row, spans)
            try:
                fut = await producer.send(
                    topic_name(self.settings, row.topic),
                    encode(row),
                    key=row.key.encode(),
                    headers=tracing.kafka_headers(header),
                )
            except Exception as exc:
                log.warning("relay: send of outbox row %d failed: %s", row.id, exc)
                blocked.add(row.key)
                fut = None
            pending.append((row, fut))
        await asyncio.gather(*(f for _, f in pending if f is not None), return_exceptions=True)
        stamped: list[int] = []
        acknowledged: list[Any] = []
        failed: set[str] = set()
        for row, fut in pending:
            if row.key in failed:
                continue
            failure = fut.exception() if fut is not None else None
            span = spans.pop(row.id, None)
            if fut is None or failure is not None:
                if failure is not None:
                    log.warning("relay: outbox row %d not acknowledged: %s", row.id, failure)
                if span is not None:
                    span.set_status(Status(StatusCode.ERROR, "not acknowledged; sent again later"))
                    span.end()
                failed.add(row.key)
                continue
            if span is not None:
                acked: Any = fut.result()
                span.set_attribute("messaging.destination.partition.id", str(acked.partition))
                span.set_attribute("messaging.kafka.offset", acked.offset)
                span.end()
            stamped.append(row.id)
            acknowledged.append(fut.result())
            if failpoints.logging_effects() and fut is not None:
                meta: Any = fut.result()
                failpoints.log_effect(
                    "produce",
                    id=row.id,
                    key=row.key,
                    version=row.version,
                    type=row.event_type,
                    topic=row.topic,
                    partition=meta.partition,
                    offset=meta.offset,
                )
        for span in spans.values():
            span.end()
        kafka.note_acknowledged(acknowledged)
        if self.after_produce is not None:
            await self.after_produce(rows)
        failpoints.crash_point("relay-after-produce")
        self._unstamped = stamped
        if failed:
            await kafka.reset_producer()
        return len(rows)

    async def _stamp(self, conn: asyncpg.Connection) -> None:
        """Stamps the rows published since the last claim, if any (one round trip)."""
        if self._unstamped:
            await db.stamp(conn, self._unstamped)
            self._stamped(self._unstamped)

    def _stamped(self, ids: list[int]) -> None:
        if ids:
            self.published += len(ids)
            metrics.OUTBOX_PUBLISHED.inc(len(ids))
        self._unstamped = []

    def _trace_row(self, row: db.OutboxRow, spans: dict[int, Span]) -> str | None:
        """The traceparent the record carries: its writer's trace, continued by a span for the time the row
        waited in the outbox and one for its publication (ended at the ack). Nothing when the writer was not
        traced; the writer's own traceparent, passed on, when this relay does not trace."""
        parent = tracing.context_of(row.traceparent)
        if parent is None:
            return None
        claimed_ns = time.time_ns()
        attributes: dict[str, str | int] = {"feedfabric.event.type": row.event_type, "feedfabric.event.id": row.id}
        if row.created_at is not None:
            waited = self.tracer.start_span(
                "outbox wait",
                context=parent,
                start_time=tracing.ns_of(row.created_at),
                attributes={**attributes, "feedfabric.step": "outbox wait"},
            )
            waited.end(end_time=claimed_ns)
        span = self.tracer.start_span(
            f"relay publish {row.event_type}",
            context=parent,
            kind=SpanKind.PRODUCER,
            start_time=claimed_ns,
            attributes={
                **attributes,
                "feedfabric.step": "relay",
                "messaging.system": "kafka",
                "messaging.destination.name": topic_name(self.settings, row.topic),
            },
        )
        if span.get_span_context().is_valid:
            spans[row.id] = span
        return tracing.traceparent_of(span, fallback=row.traceparent)

    async def _balance_shards(self, conn: asyncpg.Connection) -> None:
        """Holds about shards / live relays: takes free shards up to that, gives back the excess."""
        shards = self.settings.outbox_shards
        view = await db.lock_view(conn)
        target = math.ceil(shards / view.relays)
        for shard in range(shards):
            if len(self.owned) >= target:
                break
            if shard not in self.owned and shard not in view.held_by_others and await db.try_lock_shard(conn, shard):
                self.owned.add(shard)
        while len(self.owned) > target:
            shard = max(self.owned)
            await db.unlock_shard(conn, shard)
            self.owned.discard(shard)

    async def _prune(self, conn: asyncpg.Connection) -> None:
        """Keeps the pipeline's tables to their retention windows (any relay may do it; deletes are idempotent)."""
        pruned = await db.prune(conn, self.settings.outbox_retention_hours)
        forgotten = await db.prune_processed(conn, self.settings.processed_events_retention_hours)
        if pruned or forgotten:
            log.info("relay: pruned %d published rows and %d records of applied events", pruned, forgotten)

    async def _check_at_start(self, conn: asyncpg.Connection, kafka: _Kafka) -> None:
        created = set(await ensure_topics(self.settings))
        counts = await db.published_counts(conn)
        lost = []
        for base, published in counts.items():
            name = topic_name(self.settings, base)
            if published and (name in created or await kafka.total_end_offset(name) == 0):
                lost.append(base)
        if lost:
            await self._replay(conn, kafka, f"topics {', '.join(lost)} hold less than was published", lost)
        await kafka.remember_broker()

    async def _check_health(self, conn: asyncpg.Connection, kafka: _Kafka) -> None:
        reason = await kafka.data_loss()
        if reason:
            await ensure_topics(self.settings)
            await self._replay(conn, kafka, reason, None)
            await kafka.remember_broker()

    async def _replay(self, conn: asyncpg.Connection, kafka: _Kafka, reason: str, topics: list[str] | None) -> None:
        since = dt.datetime.now(dt.UTC) - dt.timedelta(hours=self.settings.outbox_retention_hours)
        async with conn.transaction():
            epoch = await db.raise_broker_epoch(conn)
            count = await db.unpublish_since(conn, since, topics)
        self.replays += 1
        self.replayed.set()
        log.warning(
            "relay: broker lost data (%s); republishing %d rows of the retention window (broker epoch %d)",
            reason,
            count,
            epoch,
        )
        kafka.forget_offsets()
        await kafka.reset_producer()


class _Kafka:
    """The relay's producer plus what it needs to notice a broker that lost its data."""

    def __init__(self, settings: Settings, producer_factory: Callable[[Settings], AIOKafkaProducer]) -> None:
        self.settings = settings
        self._producer_factory = producer_factory
        self._producer: AIOKafkaProducer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._offsets: AIOKafkaConsumer | None = None
        self._high: dict[TopicPartition, int] = {}
        self._cluster_id: str | None = None
        self._topics: set[str] = set()
        self._marker: tuple[TopicPartition, int] | None = None

    async def start(self) -> None:
        servers = self.settings.kafka_bootstrap_servers or ""
        self._admin = AIOKafkaAdminClient(bootstrap_servers=servers)
        await self._admin.start()
        self._offsets = AIOKafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
        await self._offsets.start()

    async def stop(self) -> None:
        for closer in (self._close_producer(), _close(self._offsets), _close(self._admin)):
            try:
                await closer
            except Exception:
                log.debug("relay: closing a Kafka client failed", exc_info=True)

    async def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            producer = self._producer_factory(self.settings)
            await producer.start()
            self._producer = producer
        return self._producer

    async def reset_producer(self) -> None:
        """After a fatal error the producer's state is suspect; the next batch gets a fresh one."""
        await self._close_producer()

    async def _close_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    def forget_offsets(self) -> None:
        self._high.clear()

    def note_acknowledged(self, acknowledged: Iterable[Any]) -> None:
        """Raises each partition's remembered end to just past the first record the broker acknowledged
        there, so a topic deleted and recreated empty before the next health check still reads as gone
        backwards. The first record's offset + 1 is a floor of the end on every broker, including those
        that report a batch's base offset + 1 as its end (see data_loss)."""
        first: dict[TopicPartition, int] = {}
        for meta in acknowledged:
            tp = TopicPartition(meta.topic, meta.partition)
            first[tp] = min(first.get(tp, meta.offset), meta.offset)
        for tp, offset in first.items():
            if offset >= 0 and self._high.get(tp, 0) < offset + 1:
                self._high[tp] = offset + 1

    async def _end_offsets(self, topics: list[str]) -> dict[TopicPartition, int]:
        assert self._admin is not None and self._offsets is not None
        if not topics:
            return {}
        described = await self._admin.describe_topics(topics)
        tps = [
            TopicPartition(t["topic"], p["partition"])
            for t in described
            if t["error_code"] == 0
            for p in t["partitions"]
        ]
        return dict(await self._offsets.end_offsets(tps)) if tps else {}

    async def total_end_offset(self, topic: str) -> int:
        return sum((await self._end_offsets([topic])).values())

    async def remember_broker(self) -> None:
        assert self._admin is not None
        self._cluster_id = (await self._admin.describe_cluster()).get("cluster_id")
        self._topics = set(await self._admin.list_topics()) & set(all_topic_names(self.settings))
        self._high = await self._end_offsets(sorted(self._topics))
        await self._place_marker()

    async def _place_marker(self) -> None:
        """Writes one record the relay alone knows of: a broker that restarted empty has lost it.

        Needed where the cluster ID survives a restart without data (Tansu keeps
        one) and new produces refill the topics before end offsets are compared.
        """
        topic = self.settings.kafka_topic_prefix + MARKER_TOPIC
        await ensure_topics(self.settings, [topic])
        sent = await (await self.producer()).send_and_wait(topic, b"relay-marker", partition=0)
        self._marker = (TopicPartition(sent.topic, sent.partition), sent.offset)

    async def data_loss(self) -> str | None:
        """Why the broker seems to have lost data since last looked at, or None.

        End offsets are compared with the ones seen at the previous check, not
        with produce acknowledgements: some brokers (Tansu) report a batch's
        base offset + 1 as the end, which is still monotonic.
        """
        assert self._admin is not None
        cluster_id = (await self._admin.describe_cluster()).get("cluster_id")
        if self._cluster_id is not None and cluster_id != self._cluster_id:
            return f"cluster ID changed from {self._cluster_id} to {cluster_id}"
        present = set(await self._admin.list_topics())
        vanished = self._topics - present
        if vanished:
            return f"topics vanished: {', '.join(sorted(vanished))}"
        self._topics |= present & set(all_topic_names(self.settings))
        if self._marker is not None:
            marker, offset = self._marker
            if (await self._end_offsets([marker.topic])).get(marker, 0) <= offset:
                return "the relay's marker record is gone"
        ends = await self._end_offsets(sorted(self._topics))
        behind = [tp for tp, end in ends.items() if end < self._high.get(tp, 0)]
        self._high.update(ends)
        if behind:
            return f"end offset went backwards on {behind[0].topic}[{behind[0].partition}]"
        return None


async def _close(client: AIOKafkaAdminClient | AIOKafkaConsumer | None) -> None:
    if client is None:
        return
    if isinstance(client, AIOKafkaAdminClient):
        await client.close()
    else:
        await client.stop()


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass


async def _wait_any(stop: asyncio.Event, wake: asyncio.Event, seconds: float) -> bool:
    """Waits for `stop` or `wake` at most `seconds`; False when the time ran out."""
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        done, _ = await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
    return bool(done)


async def replay_since(settings: Settings, since: dt.datetime) -> int:
    """`feedfabric replay`: unpublishes rows stamped since `since`; the running relays send them again."""
    conn = await asyncpg.connect(settings.database_url or "")
    try:
        count = await db.unpublish_since(conn, since)
        await db.wake_relays(conn)
        return count
    finally:
        await conn.close()
