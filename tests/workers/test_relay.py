"""The outbox relay: nothing lost, nothing doubled in a timeline, per-key order across relays."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.settings import Settings
from feedfabric.core.topics import ensure_topics
from feedfabric.db.outbox import add_event
from feedfabric.db.pipeline import OutboxRow
from feedfabric.feeds import timelines
from feedfabric.workers import events
from feedfabric.workers.relay import Relay, replay_since

from tests import factories as f
from tests.pipeline_support import FAST, HANG_GUARD_S, eventually, group_runner, read_topic, relay, running


class Killed(BaseException):
    """The relay process dying: nothing after it runs, the claim transaction is rolled back."""


async def _unpublished(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL"))


async def test_relay_killed_between_produce_and_stamp_loses_nothing_and_doubles_nothing(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    author = await f.member(pool)
    fan = await f.member(pool)
    await f.follow(pool, fan, author)
    posts = [await f.post(pool, author) for _ in range(5)]

    crashed = asyncio.Event()

    async def crash(rows: Sequence[OutboxRow]) -> None:
        crashed.set()
        raise Killed

    with pytest.raises(Killed):
        async with running(relay(settings, after_produce=crash).run):
            # However long the relay takes to reach the broker and produce, it dies right after.
            await asyncio.wait_for(crashed.wait(), 30)
    assert await _unpublished(pool) == 5
    produced_before = len(await read_topic(settings, "feedfabric.posts", 5))
    assert produced_before == 5

    runner = group_runner(settings, pool, redis, events.GROUP)
    async with running(relay(settings).run, runner.run):
        await eventually(lambda: _is_zero(pool))
        await eventually(lambda: pool.fetchval("SELECT count(*) = 5 FROM processed_events"))
    messages = await read_topic(settings, "feedfabric.posts", 10)
    assert len(messages) == 10  # every event went out twice...
    assert sorted(Counter(m["eventId"] for _, m in messages).values()) == [2] * 5
    expected = [str(p) for p in reversed(posts)]
    assert await timelines.timeline_ids(redis, fan) == expected  # ...and each is in the timeline once
    assert await timelines.timeline_ids(redis, author) == expected


async def _is_zero(pool: asyncpg.Pool) -> bool:
    return await _unpublished(pool) == 0


async def test_two_relays_publish_every_row_in_key_order_while_50_writers_hammer_10_keys(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    settings = settings.model_copy(update={"outbox_batch_size": 20})
    keys = [f"hot-{i}" for i in range(10)]
    per_writer = 20

    async def writer(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(per_writer):
            async with pool.acquire() as conn, conn.transaction():
                await add_event(conn, "PostUpdated", rng.choice(keys), {"n": seed}, shards=settings.outbox_shards)
            await asyncio.sleep(rng.random() * 0.005)

    first, second = relay(settings), relay(settings)
    async with running(first.run, second.run):
        await asyncio.gather(*(writer(i) for i in range(50)))
        await eventually(lambda: _is_zero(pool))
    total = 50 * per_writer
    assert first.published > 0 and second.published > 0
    assert first.published + second.published == total

    messages = await read_topic(settings, "feedfabric.posts", total)
    seen: set[int] = set()
    versions: dict[str, list[int]] = defaultdict(list)
    for key, message in messages:
        if message["eventId"] not in seen:
            seen.add(message["eventId"])
            versions[key].append(message["version"])
    assert len(seen) == total
    for key, got in versions.items():
        assert got == list(range(1, len(got) + 1)), key


async def test_replay_republishes_rows_stamped_since_a_time(settings: Settings, pool: asyncpg.Pool) -> None:
    import datetime as dt

    async with pool.acquire() as conn:
        for i in range(3):
            await add_event(conn, "PostUpdated", f"k{i}", {}, shards=settings.outbox_shards)
    async with running(relay(settings).run):
        await eventually(lambda: _is_zero(pool))
        count = await replay_since(settings, dt.datetime.now(dt.UTC) - dt.timedelta(hours=1))
        assert count == 3
        await eventually(lambda: _is_zero(pool))
    assert len(await read_topic(settings, "feedfabric.posts", 6)) == 6


async def test_relay_replays_the_window_when_the_broker_lost_a_topic(settings: Settings, pool: asyncpg.Pool) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    async with pool.acquire() as conn:
        for i in range(3):
            await add_event(conn, "PostUpdated", f"k{i}", {}, shards=settings.outbox_shards)
    the_relay = relay(settings)
    async with running(the_relay.run):
        await eventually(lambda: _is_zero(pool))
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
        await admin.start()
        try:
            await admin.delete_topics([settings.kafka_topic_prefix + "feedfabric.posts"])
        finally:
            await admin.close()
        await asyncio.wait_for(the_relay.replayed.wait(), HANG_GUARD_S)  # the event, not a clock
        await eventually(lambda: _is_zero(pool))
    assert len(await read_topic(settings, "feedfabric.posts", 3)) == 3


async def test_a_topic_recreated_empty_before_the_next_health_check_reads_as_lost(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """The broker forgets a topic and something (a client's metadata request, an operator) creates it again
    right after the relay's produce, before any health check has seen the new end offsets: the offsets the
    broker acknowledged tell the relay the topic went backwards."""
    from aiokafka.admin import AIOKafkaAdminClient

    topic = settings.kafka_topic_prefix + "feedfabric.posts"

    async def forget_and_recreate(rows: Sequence[OutboxRow]) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
        await admin.start()
        try:
            await admin.delete_topics([topic])
        finally:
            await admin.close()
        await eventually(lambda: _created_again(settings, topic))

    async with pool.acquire() as conn:
        for i in range(3):
            await add_event(conn, "PostUpdated", f"k{i}", {}, shards=settings.outbox_shards)
    once = _Once(forget_and_recreate)
    the_relay = relay(settings, after_produce=once)
    async with running(the_relay.run):
        await asyncio.wait_for(the_relay.replayed.wait(), HANG_GUARD_S)
        await eventually(lambda: _is_zero(pool))
    assert len(await read_topic(settings, "feedfabric.posts", 3)) == 3


async def _created_again(settings: Settings, topic: str) -> bool:
    """Creates the topic anew once the broker no longer holds it."""
    try:
        return topic in await ensure_topics(settings, [topic])
    except Exception:
        return False  # the deletion is still under way


class _Once:
    def __init__(self, hook: Callable[[Sequence[OutboxRow]], Awaitable[None]]) -> None:
        self.hook: Callable[[Sequence[OutboxRow]], Awaitable[None]] | None = hook

    async def __call__(self, rows: Sequence[OutboxRow]) -> None:
        hook, self.hook = self.hook, None
        if hook is not None:
            await hook(rows)


def _pruning_relay(settings: Settings) -> Relay:
    return relay(settings, timings=dataclasses.replace(FAST, prune_every_s=0.1))


async def test_published_rows_are_pruned_after_the_retention_period(settings: Settings, pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        for i in range(4):
            await add_event(conn, "PostUpdated", f"k{i}", {}, shards=settings.outbox_shards)
    async with running(relay(settings).run):
        await eventually(lambda: _is_zero(pool))
    await pool.execute("UPDATE outbox SET published_at = now() - interval '100 hours' WHERE key IN ('k0', 'k1')")
    async with running(_pruning_relay(settings).run):
        await eventually(lambda: pool.fetchval("SELECT count(*) = 2 FROM outbox"))
    assert sorted(r[0] for r in await pool.fetch("SELECT key FROM outbox")) == ["k2", "k3"]


async def test_a_key_pruned_from_the_outbox_has_its_applied_versions_forgotten(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with pool.acquire() as conn:
        for key in ("gone", "gone", "kept", "kept"):
            await add_event(conn, "PostUpdated", key, {}, shards=settings.outbox_shards)
    await pool.execute(
        "INSERT INTO consumer_key_versions (group_name, key, version)"
        " VALUES ('g', 'gone', 2), ('g', 'kept', 2), ('h', 'gone', 1)"
    )
    async with running(relay(settings).run):
        await eventually(lambda: _is_zero(pool))
    # One of "kept"'s rows ages out too: the key still has an event in the outbox, so its version stays.
    await pool.execute(
        "UPDATE outbox SET published_at = now() - interval '100 hours'"
        " WHERE key = 'gone' OR (key = 'kept' AND aggregate_version = 1)"
    )
    async with running(_pruning_relay(settings).run):
        await eventually(lambda: pool.fetchval("SELECT count(*) = 1 FROM outbox"))
    rows = await pool.fetch("SELECT group_name, key FROM consumer_key_versions ORDER BY 1, 2")
    assert [tuple(r) for r in rows] == [("g", "kept")]


async def test_records_of_applied_events_outlive_the_broker_and_outbox_retention(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    assert settings.processed_events_retention_hours == 2 * max(
        settings.kafka_retention_hours, settings.outbox_retention_hours
    )
    horizon = settings.processed_events_retention_hours
    await pool.execute(
        "INSERT INTO processed_events (group_name, event_id, processed_at) VALUES"
        " ('g', 1, now() - make_interval(hours => $1 + 1)), ('g', 2, now() - make_interval(hours => $1 - 1)),"
        " ('h', 1, now())",
        horizon,
    )
    async with running(_pruning_relay(settings).run):
        await eventually(lambda: pool.fetchval("SELECT count(*) = 2 FROM processed_events"))
    rows = await pool.fetch("SELECT group_name, event_id FROM processed_events ORDER BY 1, 2")
    assert [tuple(r) for r in rows] == [("g", 2), ("h", 1)]


async def test_topics_keep_records_no_longer_than_the_applied_events_are_remembered(settings: Settings) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    (topic, *_rest) = await ensure_topics(settings)
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers or "")
    await admin.start()
    try:
        (described,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    configs = {name: value for name, value, *_ in described.resources[0][4]}
    retention_ms, segment_ms = int(configs["retention.ms"]), int(configs["segment.ms"])
    assert retention_ms == settings.kafka_retention_hours * 3_600_000
    assert retention_ms + segment_ms <= settings.processed_events_retention_hours * 3_600_000
