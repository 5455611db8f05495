"""SQL of the event pipeline: the relay's claims over the outbox, shard locks, and the runner's bookkeeping."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import asyncpg

from feedfabric.core.events import Event

__all__ = [
    "SHARD_LOCKS",
    "OutboxRow",
    "Overdue",
    "add_dead_letter",
    "advance_key_version",
    "announce_relay",
    "broker_epoch",
    "claim",
    "events_between",
    "forget_idle_keys",
    "forget_orphan_key_versions",
    "lock_view",
    "mark_processed",
    "overdue_events",
    "prune",
    "prune_dead_letters",
    "prune_processed",
    "published_counts",
    "raise_broker_epoch",
    "record_batch",
    "stamp",
    "try_lock_shard",
    "unlock_shard",
    "unpublish_since",
    "wake_relays",
]

# Advisory-lock namespaces (the two-int form: namespace, shard or pid).
SHARD_LOCKS = 0x0FEED0B0
RELAY_PRESENCE = 0x0FEED0B1


@dataclass(frozen=True)
class OutboxRow:
    id: int
    topic: str
    key: str
    event_type: str
    version: int
    payload: Any
    # The writer's trace, for the relay's and a sweep's spans, and its commit time (read by `claim` only).
    traceparent: str | None = None
    created_at: dt.datetime | None = None

    def event(self) -> Event:
        data = json.loads(self.payload) if isinstance(self.payload, str) else self.payload
        return Event(event_id=self.id, type=self.event_type, key=self.key, version=self.version, data=data)


async def claim(conn: asyncpg.Connection, shards: list[int], limit: int, stamp: list[int]) -> list[OutboxRow]:
    """Stamps `stamp` (rows already published) and returns the oldest unpublished rows of the given shards,
    in one autocommit statement.

    No row lock: the relay holding a shard's advisory lock is the only one that claims its rows, so a
    transaction held open across the produce (BEGIN, the claim, the stamp with its COMMIT: three round
    trips) bought nothing. The stamped rows are left out by ID, since the statement's snapshot predates
    its own UPDATE.
    """
    rows = await conn.fetch(
        "WITH stamped AS (UPDATE outbox SET published_at = now() WHERE id = ANY($3::bigint[]))"
        " SELECT id, topic, key, event_type, aggregate_version, payload::text AS payload, traceparent, created_at"
        " FROM outbox WHERE published_at IS NULL AND shard = ANY($1::int[]) AND id <> ALL($3::bigint[])"
        " ORDER BY id LIMIT $2",
        shards,
        limit,
        stamp,
    )
    return [
        OutboxRow(
            r["id"],
            r["topic"],
            r["key"],
            r["event_type"],
            r["aggregate_version"],
            r["payload"],
            r["traceparent"],
            r["created_at"],
        )
        for r in rows
    ]


async def stamp(conn: asyncpg.Connection, ids: list[int]) -> None:
    """Marks published rows (autocommit): the relay's stamp when it does not claim again at once."""
    await conn.execute("UPDATE outbox SET published_at = now() WHERE id = ANY($1::bigint[])", ids)


async def prune(conn: asyncpg.Connection, retention_hours: int, limit: int = 10_000) -> int:
    """Deletes up to `limit` rows published before the retention window; returns how many.

    A key left with no outbox rows also loses its consumer_key_versions rows:
    its next event then finds no earlier one to fill in the outbox, which is
    true, and a redelivery of an old one is still caught by processed_events,
    kept longer than the outbox.
    """
    done = await conn.fetchval(
        "WITH gone AS ("
        "  DELETE FROM outbox WHERE id IN (SELECT id FROM outbox"
        "  WHERE published_at < now() - make_interval(hours => $1) ORDER BY published_at LIMIT $2)"
        "  RETURNING id, key),"
        " forgotten AS ("
        "  DELETE FROM consumer_key_versions v WHERE v.key IN (SELECT key FROM gone)"
        "  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.key = v.key AND o.id NOT IN (SELECT id FROM gone)))"
        " SELECT count(*) FROM gone",
        retention_hours,
        limit,
    )
    return int(done)


async def prune_processed(conn: asyncpg.Connection, retention_hours: int, limit: int = 10_000) -> int:
    """Deletes up to `limit` records of applied events older than `retention_hours`; returns how many."""
    done = await conn.execute(
        "DELETE FROM processed_events WHERE ctid = ANY(ARRAY(SELECT ctid FROM processed_events"
        " WHERE processed_at < now() - make_interval(hours => $1) ORDER BY processed_at LIMIT $2))",
        retention_hours,
        limit,
    )
    return int(done.split()[-1])


async def forget_idle_keys(conn: asyncpg.Connection, after: str, limit: int = 10_000) -> tuple[int, str | None]:
    """Forgets the version counter (outbox_keys) and every group's applied version (consumer_key_versions) of
    keys past `after` (in key order, `limit` at a time) that have no row left in the outbox; returns the rows
    deleted and the last key looked at (None: the end). Call it inside a transaction.

    A key's next event then starts again at version 1, and each group takes it as the key's first: event
    IDs, not versions, are the idempotency key, so a redelivery is still caught by processed_events.

    Two statements, because one cannot be sure: a statement's snapshot predates the row locks it takes, so
    a writer that commits an event while the counter is being locked would be missed and its counter
    forgotten, and the key's next event would reuse a version. The first statement locks the counters
    that look idle (skipping those a writer holds); the second, with a snapshot taken once the locks are
    held, deletes only those that still have no event.
    """
    # The span's bounds first, so each statement below reads one key range by index rather than the table.
    span = await conn.fetchrow(
        "SELECT max(key) AS last, count(*) AS seen FROM (SELECT key FROM outbox_keys WHERE key > $1 ORDER BY key"
        " LIMIT $2) s",
        after,
        limit,
    )
    if span is None or span["last"] is None:
        return 0, None
    locked = await conn.fetchval(
        "SELECT coalesce(array_agg(k.key), '{}') FROM (SELECT key FROM outbox_keys k WHERE k.key > $1"
        " AND k.key <= $2 AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.key = k.key) FOR UPDATE SKIP LOCKED) k",
        after,
        span["last"],
    )
    deleted = await conn.fetchval(
        "WITH idle AS (SELECT k.key FROM outbox_keys k WHERE k.key = ANY($1::text[])"
        "  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.key = k.key)),"
        " counters AS (DELETE FROM outbox_keys k USING idle WHERE k.key = idle.key RETURNING 1),"
        " applied AS (DELETE FROM consumer_key_versions v USING idle WHERE v.key = idle.key"
        "  AND v.key > $2 AND v.key <= $3 RETURNING 1)"
        " SELECT (SELECT count(*) FROM counters) + (SELECT count(*) FROM applied)",
        locked,
        after,
        span["last"],
    )
    return int(deleted), span["last"] if int(span["seen"]) == limit else None


async def forget_orphan_key_versions(conn: asyncpg.Connection, limit: int = 10_000) -> int:
    """Deletes groups' applied versions of keys with no outbox_keys row (a late apply of a forgotten key)."""
    done = await conn.execute(
        "DELETE FROM consumer_key_versions v WHERE (group_name, key) IN (SELECT group_name, key"
        " FROM consumer_key_versions c WHERE NOT EXISTS (SELECT 1 FROM outbox_keys k WHERE k.key = c.key)"
        " LIMIT $1)",
        limit,
    )
    return int(done.split()[-1])


async def prune_dead_letters(conn: asyncpg.Connection, retention_days: int, limit: int = 10_000) -> int:
    """Deletes up to `limit` dead letters parked more than `retention_days` ago; returns how many."""
    done = await conn.execute(
        "DELETE FROM dead_letters WHERE id IN (SELECT id FROM dead_letters"
        " WHERE created_at < now() - make_interval(days => $1) ORDER BY created_at LIMIT $2)",
        retention_days,
        limit,
    )
    return int(done.split()[-1])


async def unpublish_since(conn: asyncpg.Connection, since: dt.datetime, topics: list[str] | None = None) -> int:
    """Marks rows published at or after `since` (of the given topics, or all) for the relays to send again."""
    done = await conn.execute(
        "UPDATE outbox SET published_at = NULL"
        " WHERE published_at >= $1 AND ($2::text[] IS NULL OR topic = ANY($2::text[]))",
        since,
        topics,
    )
    return int(done.split()[-1])


async def published_counts(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch("SELECT topic, count(*) AS n FROM outbox WHERE published_at IS NOT NULL GROUP BY topic")
    return {r["topic"]: int(r["n"]) for r in rows}


async def try_lock_shard(conn: asyncpg.Connection, shard: int) -> bool:
    return bool(await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", SHARD_LOCKS, shard))


async def unlock_shard(conn: asyncpg.Connection, shard: int) -> None:
    await conn.execute("SELECT pg_advisory_unlock($1, $2)", SHARD_LOCKS, shard)


async def announce_relay(conn: asyncpg.Connection) -> None:
    """A session lock per live relay, so the others can count it before it owns any shard."""
    await conn.execute("SELECT pg_advisory_lock($1, pg_backend_pid())", RELAY_PRESENCE)


@dataclass(frozen=True)
class LockView:
    relays: int
    held_by_others: set[int]


async def lock_view(conn: asyncpg.Connection) -> LockView:
    rows = await conn.fetch(
        "SELECT classid::int AS ns, objid::int AS obj, pid = pg_backend_pid() AS mine FROM pg_locks"
        " WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND database ="
        " (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND classid::int IN ($1, $2)",
        SHARD_LOCKS,
        RELAY_PRESENCE,
    )
    relays = sum(1 for r in rows if r["ns"] == RELAY_PRESENCE)
    others = {r["obj"] for r in rows if r["ns"] == SHARD_LOCKS and not r["mine"]}
    return LockView(max(relays, 1), others)


async def mark_processed(conn: asyncpg.Connection, group: str, event_id: int) -> bool:
    """Records the event for the group; False when it was already there (a redelivery)."""
    return bool(
        await conn.fetchval(
            "INSERT INTO processed_events (group_name, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING true",
            group,
            event_id,
        )
    )


async def advance_key_version(conn: asyncpg.Connection, group: str, key: str, version: int) -> int:
    """Raises the group's applied version of `key` to at least `version`; returns the one before (0 if none).

    The row stays locked until the caller's transaction ends, so one key's
    events are applied one at a time within a group, whichever consumer holds them.
    """
    before = await conn.fetchval(
        "WITH before AS ("
        "  SELECT version FROM consumer_key_versions WHERE group_name = $1 AND key = $2 FOR UPDATE),"
        " raised AS ("
        "  INSERT INTO consumer_key_versions AS v (group_name, key, version) VALUES ($1, $2, $3)"
        "  ON CONFLICT (group_name, key) DO UPDATE SET version = GREATEST(v.version, EXCLUDED.version))"
        " SELECT version FROM before",
        group,
        key,
        version,
    )
    return int(before or 0)


@dataclass(frozen=True)
class BatchRecorded:
    fresh: set[int]  # the batch's event IDs not applied before (the others are redeliveries)
    # Some key has an earlier event of the group's types, not in the batch, that the group has not applied:
    # the per-event path must fill it from the outbox first.
    gap: bool


async def record_batch(
    conn: asyncpg.Connection,
    group: str,
    types: frozenset[str],
    event_ids: list[int],
    keys: list[str],
    versions: list[int],
) -> BatchRecorded:
    """advance_key_version and mark_processed for a whole batch (`event_ids`, `keys`, `versions` side by side),
    in one statement; call it inside the batch's transaction.

    The batch's keys are locked in key order (two consumers' batches then wait rather than deadlock) and
    raised to the batch's highest version each; the locked versions, read before they are raised (a lock
    that waited reads the row its holder committed), decide `gap`. An applied event that the statement's
    snapshot does not yet show counts as a gap too: the per-event path then finds it applied.
    """
    row = await conn.fetchrow(
        "WITH batch AS (SELECT * FROM unnest($2::bigint[], $3::text[], $4::bigint[]) AS b(event_id, key, version)),"
        " keys AS (SELECT key, max(version) AS upto FROM batch GROUP BY key),"
        " locked AS (SELECT v.key, v.version FROM consumer_key_versions v"
        "  WHERE v.group_name = $1 AND v.key IN (SELECT key FROM keys) ORDER BY v.key FOR UPDATE),"
        " fresh AS (INSERT INTO processed_events (group_name, event_id) SELECT DISTINCT $1, event_id FROM batch"
        "  ON CONFLICT DO NOTHING RETURNING event_id),"
        " raised AS (INSERT INTO consumer_key_versions AS v (group_name, key, version)"
        "  SELECT $1, key, upto FROM keys ORDER BY key"
        "  ON CONFLICT (group_name, key) DO UPDATE SET version = GREATEST(v.version, EXCLUDED.version))"
        " SELECT (SELECT count(*) FROM locked) AS locked,"
        " EXISTS (SELECT 1 FROM keys k LEFT JOIN locked l ON l.key = k.key"
        "  JOIN outbox o ON o.key = k.key AND o.aggregate_version > coalesce(l.version, 0)"
        "   AND o.aggregate_version < k.upto"
        "  WHERE o.event_type = ANY($5::text[]) AND o.id <> ALL($2::bigint[])"
        "   AND NOT EXISTS (SELECT 1 FROM processed_events p WHERE p.group_name = $1 AND p.event_id = o.id))"
        "  AS gap,"
        " (SELECT coalesce(array_agg(event_id), '{}') FROM fresh) AS fresh",
        group,
        event_ids,
        keys,
        versions,
        sorted(types),
    )
    assert row is not None
    return BatchRecorded({int(i) for i in row["fresh"]}, bool(row["gap"]))


async def events_between(
    conn: asyncpg.Connection, key: str, after: int, before: int, types: frozenset[str]
) -> list[OutboxRow]:
    """The outbox's events of `key` with versions strictly between `after` and `before`, of the given types."""
    rows = await conn.fetch(
        "SELECT id, topic, key, event_type, aggregate_version, payload::text AS payload FROM outbox"
        " WHERE key = $1 AND aggregate_version > $2 AND aggregate_version < $3 AND event_type = ANY($4::text[])"
        " ORDER BY aggregate_version",
        key,
        after,
        before,
        sorted(types),
    )
    return [
        OutboxRow(r["id"], r["topic"], r["key"], r["event_type"], r["aggregate_version"], r["payload"]) for r in rows
    ]


@dataclass(frozen=True)
class Overdue:
    rows: list[OutboxRow]
    # Where the next sweep starts: rows published before it were all looked at.
    swept_to: dt.datetime


async def overdue_events(
    conn: asyncpg.Connection,
    group: str,
    types: frozenset[str],
    since: dt.datetime | None,
    after_s: float,
    first_window_s: float,
    limit: int,
) -> Overdue:
    """Events of the group's types published in [since, now - after_s) that the group has not applied.

    Without `since` the sweep looks back `first_window_s`. When `limit` rows
    come back, `swept_to` stops at the last one, so the rest are next.
    """
    bound = await conn.fetchval("SELECT now() - make_interval(secs => $1)", after_s)
    since = since or bound - dt.timedelta(seconds=first_window_s)
    rows = await conn.fetch(
        "SELECT id, topic, key, event_type, aggregate_version, payload::text AS payload, traceparent, published_at"
        " FROM outbox o"
        " WHERE published_at >= $1 AND published_at < $2 AND event_type = ANY($3::text[])"
        " AND NOT EXISTS (SELECT 1 FROM processed_events p WHERE p.group_name = $4 AND p.event_id = o.id)"
        " ORDER BY published_at, id LIMIT $5",
        since,
        bound,
        sorted(types),
        group,
        limit,
    )
    found = [
        OutboxRow(
            r["id"], r["topic"], r["key"], r["event_type"], r["aggregate_version"], r["payload"], r["traceparent"]
        )
        for r in rows
    ]
    return Overdue(found, rows[-1]["published_at"] if len(rows) == limit else bound)


async def broker_epoch(conn: asyncpg.Connection | asyncpg.Pool) -> int:
    return int(await conn.fetchval("SELECT epoch FROM broker_epoch"))


async def raise_broker_epoch(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("UPDATE broker_epoch SET epoch = epoch + 1, raised_at = now() RETURNING epoch"))


async def add_dead_letter(
    conn: asyncpg.Connection | asyncpg.Pool,
    group: str,
    topic: str,
    partition: int,
    offset: int,
    key: str | None,
    payload: str,
    error: str,
) -> None:
    await conn.execute(
        'INSERT INTO dead_letters (group_name, topic, partition, "offset", key, payload, error)'
        " VALUES ($1, $2, $3, $4, $5, $6, $7)",
        group,
        topic,
        partition,
        offset,
        key,
        payload,
        error,
    )


async def wake_relays(conn: asyncpg.Connection) -> None:
    await conn.execute("SELECT pg_notify('feedfabric_outbox', 'replay')")
