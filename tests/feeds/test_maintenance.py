"""`feedfabric maintain`: each bookkeeping table kept to its stated window, idempotency kept inside it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import asyncpg
import redis.asyncio as aioredis
from aiokafka import AIOKafkaProducer
from feedfabric.core.events import POSTS, Event
from feedfabric.core.settings import Settings
from feedfabric.core.topics import ensure_topics
from feedfabric.db.outbox import add_event
from feedfabric.feeds.maintenance import STEPS, maintain
from feedfabric.workers import applying
from feedfabric.workers.base import GroupSpec, WorkerContext
from feedfabric.workers.runner import run_groups

from tests.pipeline_support import all_committed, eventually, group_runner, running


async def _events(pool: asyncpg.Pool, settings: Settings, *keys: str) -> list[Event]:
    events = []
    async with pool.acquire() as conn:
        for key in keys:
            event_id = await add_event(conn, "PostUpdated", key, {}, shards=settings.outbox_shards)
            version = await conn.fetchval("SELECT aggregate_version FROM outbox WHERE id = $1", event_id)
            events.append(Event(event_id, "PostUpdated", key, version, {}))
    await pool.execute("UPDATE outbox SET published_at = now()")
    return events


async def _age_outbox(pool: asyncpg.Pool, hours: float, keys: list[str]) -> None:
    await pool.execute(
        "UPDATE outbox SET published_at = now() - make_interval(secs => $1) WHERE key = ANY($2::text[])",
        hours * 3600,
        keys,
    )


def _recording(handled: list[int]) -> GroupSpec:
    async def handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
        handled.append(event.event_id)

    return GroupSpec("test-maintain", (POSTS,), frozenset({"PostUpdated"}), handle)


async def test_published_outbox_rows_past_their_window_go_and_the_rest_stay(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    await _events(pool, settings, "old", "edge", "new")
    await _age_outbox(pool, settings.outbox_retention_hours + 1, ["old"])
    await _age_outbox(pool, settings.outbox_retention_hours - 0.1, ["edge"])
    await pool.execute(
        "INSERT INTO outbox (topic, key, shard, event_type, aggregate_version, payload)"
        " VALUES ('posts', 'unpublished', 0, 'PostUpdated', 1, '{}')"
    )
    await pool.execute("UPDATE outbox SET created_at = now() - interval '1000 hours' WHERE key = 'unpublished'")
    removed = await maintain(pool, settings)
    assert removed["outbox"] == 1
    assert sorted(r[0] for r in await pool.fetch("SELECT key FROM outbox")) == ["edge", "new", "unpublished"]


async def test_keys_left_with_no_outbox_row_lose_their_counter_and_applied_versions(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    await _events(pool, settings, "gone", "gone", "kept", "kept")
    await pool.execute(
        "INSERT INTO consumer_key_versions (group_name, key, version)"
        " VALUES ('g', 'gone', 2), ('g', 'kept', 2), ('h', 'gone', 1), ('g', 'never-written', 4)"
    )
    await _age_outbox(pool, settings.outbox_retention_hours + 1, ["gone"])
    await pool.execute(
        "UPDATE outbox SET published_at = now() - make_interval(hours => $1) WHERE key = 'kept' AND aggregate_version = 1",
        settings.outbox_retention_hours + 1,
    )
    await maintain(pool, settings)
    assert [r[0] for r in await pool.fetch("SELECT key FROM outbox_keys ORDER BY key")] == ["kept"]
    assert await pool.fetchval("SELECT version FROM outbox_keys WHERE key = 'kept'") == 2
    rows = await pool.fetch("SELECT group_name, key FROM consumer_key_versions ORDER BY 1, 2")
    assert [tuple(r) for r in rows] == [("g", "kept")]


async def test_a_forgotten_key_starts_again_at_version_one_and_its_next_event_applies(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    handled: list[int] = []
    spec = _recording(handled)
    ctx = WorkerContext(settings=settings, pool=pool, redis=redis)
    old = await _events(pool, settings, "post-1", "post-1", "post-1")
    for event in old:
        await applying.apply_in_order(spec, ctx, event)
    await _age_outbox(pool, settings.outbox_retention_hours + 1, ["post-1"])
    await maintain(pool, settings)
    (fresh,) = await _events(pool, settings, "post-1")
    assert fresh.version == 1
    assert (await applying.apply_in_order(spec, ctx, fresh)).fresh
    # A late copy of an old event is still a redelivery: its (group, eventId) record outlives the outbox row.
    assert not (await applying.apply_in_order(spec, ctx, old[1])).fresh
    assert handled == [e.event_id for e in old] + [fresh.event_id]


async def test_records_of_applied_events_go_only_past_twice_the_longer_of_broker_and_outbox_retention(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    horizon = settings.processed_events_retention_hours
    assert horizon == 2 * max(settings.kafka_retention_hours, settings.outbox_retention_hours)
    await pool.execute(
        "INSERT INTO processed_events (group_name, event_id, processed_at) VALUES"
        " ('g', 1, now() - make_interval(hours => $1 + 1)), ('g', 2, now() - make_interval(hours => $1) + interval '1 minute'),"
        " ('h', 1, now())",
        horizon,
    )
    assert (await maintain(pool, settings))["processed_events"] == 1
    rows = await pool.fetch("SELECT group_name, event_id FROM processed_events ORDER BY 1, 2")
    assert [tuple(r) for r in rows] == [("g", 2), ("h", 1)]


async def test_a_redelivery_from_the_broker_just_inside_the_window_is_not_applied_again(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    """The event was applied almost PROCESSED_EVENTS_RETENTION ago; maintain runs; Kafka delivers it again."""
    handled: list[int] = []
    spec = _recording(handled)
    (event,) = await _events(pool, settings, "post-9")
    await applying.apply_in_order(spec, WorkerContext(settings=settings, pool=pool, redis=redis), event)
    await pool.execute(
        "UPDATE processed_events SET processed_at = now() - make_interval(hours => $1) + interval '1 minute'",
        settings.processed_events_retention_hours,
    )
    await _age_outbox(pool, settings.outbox_retention_hours + 1, ["post-9"])
    await maintain(pool, settings)
    assert await pool.fetchval("SELECT count(*) FROM outbox") == 0  # only processed_events can catch it now
    await ensure_topics(settings)
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, acks="all")
    await producer.start()
    try:
        message = json.dumps(event.to_message()).encode()
        await producer.send_and_wait(settings.kafka_topic_prefix + POSTS, message, key=b"post-9", partition=0)
    finally:
        await producer.stop()
    runner = group_runner(settings, pool, redis, spec)
    async with running(runner.run):
        await eventually(lambda: all_committed(runner))
    assert handled == [event.event_id]


async def test_dead_letters_are_kept_for_their_retention_days(settings: Settings, pool: asyncpg.Pool) -> None:
    await pool.execute(
        'INSERT INTO dead_letters (group_name, topic, partition, "offset", key, payload, error, created_at) VALUES'
        " ('g', 't', 0, 1, 'k', '{}', 'old', now() - make_interval(days => $1 + 1)),"
        " ('g', 't', 0, 2, 'k', '{}', 'recent', now() - make_interval(days => $1) + interval '1 hour')",
        settings.dead_letter_retention_days,
    )
    assert (await maintain(pool, settings))["dead_letters"] == 1
    assert [r[0] for r in await pool.fetch("SELECT error FROM dead_letters")] == ["recent"]


async def test_notification_take_backs_are_kept_for_a_day(settings: Settings, pool: asyncpg.Pool) -> None:
    await pool.execute(
        "INSERT INTO notification_take_backs (recipient_id, kind, actor_id, target_id, taken_at, announced) VALUES"
        " (gen_random_uuid(), 'like', gen_random_uuid(), gen_random_uuid(), now() - interval '25 hours', true),"
        " (gen_random_uuid(), 'like', gen_random_uuid(), gen_random_uuid(), now() - interval '23 hours', true)"
    )
    assert (await maintain(pool, settings))["notification_take_backs"] == 1
    assert (
        await pool.fetchval("SELECT count(*) FROM notification_take_backs WHERE taken_at > now() - interval '1 day'")
        == 1
    )


async def test_notification_groups_left_empty_go_after_a_day_and_the_rest_stay(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    member = await pool.fetchval(
        "INSERT INTO members (id, external_id, username, display_name)"
        " VALUES (gen_random_uuid(), 'm', 'm', 'M') RETURNING id"
    )
    await pool.execute(
        "INSERT INTO notification_groups (id, recipient_id, kind, target_id, notification_count, latest_at)"
        " SELECT gen_random_uuid(), $1, 'follow', gen_random_uuid(), n, now() - make_interval(hours => h)"
        " FROM (VALUES (0, 25), (0, 23), (1, 25)) AS v(n, h)",
        member,
    )
    assert (await maintain(pool, settings))["empty_notification_groups"] == 1
    kept = await pool.fetch("SELECT notification_count FROM notification_groups ORDER BY notification_count")
    assert [r[0] for r in kept] == [0, 1]


async def test_every_step_is_reported_and_a_failing_step_does_not_stop_the_others(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    from feedfabric.feeds.maintenance import RetentionStep

    async def broken(conn: asyncpg.Connection, s: Settings) -> int:
        raise RuntimeError("boom")

    await pool.execute(
        'INSERT INTO dead_letters (group_name, topic, partition, "offset", payload, error, created_at)'
        " VALUES ('g', 't', 0, 1, '{}', 'old', now() - interval '400 days')"
    )
    steps = [RetentionStep("broken", broken), *STEPS]
    try:
        await maintain(pool, settings, steps)
    except RuntimeError as error:
        assert "broken" in str(error)
    else:
        raise AssertionError("a failed step must fail the pass")
    assert await pool.fetchval("SELECT count(*) FROM dead_letters") == 0


async def test_the_worker_runs_maintain_periodically(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    await pool.execute(
        'INSERT INTO dead_letters (group_name, topic, partition, "offset", payload, error, created_at)'
        " VALUES ('g', 't', 0, 1, '{}', 'old', now() - interval '400 days')"
    )
    fast = settings.model_copy(update={"maintain_interval_seconds": 0.3})
    async with running(lambda stop: run_groups(fast, [_recording([])], stop)):
        await eventually(lambda: _no_dead_letters(pool))


async def _no_dead_letters(pool: asyncpg.Pool) -> bool:
    return bool(await pool.fetchval("SELECT count(*) = 0 FROM dead_letters"))


def test_the_maintain_command_prints_what_each_step_removed(settings: Settings) -> None:
    async def seed() -> None:
        conn = await asyncpg.connect(settings.database_url)
        try:
            await conn.execute(
                "INSERT INTO processed_events (group_name, event_id, processed_at)"
                " VALUES ('g', 1, now() - interval '10000 hours'), ('g', 2, now())"
            )
        finally:
            await conn.close()

    asyncio.run(seed())
    env = {**os.environ, "DATABASE_URL": settings.database_url or "", "LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, "-m", "feedfabric", "maintain"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "processed_events: 1 removed" in done.stdout
    for step in STEPS:
        assert f"{step.name}: " in done.stdout


async def test_keys_forgotten_while_writers_add_events_keep_one_version_sequence(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """Writers adding events to keys whose old events are being forgotten: every key with an event in the
    outbox keeps its counter, at the highest version it gave, and no version is given twice. The race is
    narrow, so it is run for several rounds of fresh keys."""
    rounds, per_round = 20, 30

    async def writer(key: str) -> None:
        for _ in range(5):
            async with pool.acquire() as conn, conn.transaction():
                await add_event(conn, "PostUpdated", key, {}, shards=settings.outbox_shards)
            await asyncio.sleep(0)

    async def passes() -> None:
        for _ in range(5):
            await maintain(pool, settings)

    for round_ in range(rounds):
        keys = [f"hot-{round_}-{i}" for i in range(per_round)]
        await _events(pool, settings, *keys, *keys)
        await _age_outbox(pool, settings.outbox_retention_hours + 1, keys)
        await asyncio.gather(passes(), *(writer(k) for k in keys))
    await maintain(pool, settings)
    broken = await pool.fetch(
        "SELECT o.key, max(o.aggregate_version) AS top, count(*) AS n, count(DISTINCT o.aggregate_version) AS d,"
        " k.version FROM outbox o LEFT JOIN outbox_keys k USING (key) GROUP BY o.key, k.version"
        " HAVING k.version IS DISTINCT FROM max(o.aggregate_version) OR count(*) <> count(DISTINCT o.aggregate_version)"
    )
    assert [dict(r) for r in broken] == []
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE key LIKE 'hot-%'") == 5 * rounds * per_round
