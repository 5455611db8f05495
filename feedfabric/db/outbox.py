"""The transactional outbox: written by every change, read only by the relay."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import asyncpg

from feedfabric.core import jsonwire, tracing
from feedfabric.core.events import TOPIC_OF

__all__ = ["NOTIFY_CHANNEL", "EventRow", "add_event", "add_events", "shard_of"]

NOTIFY_CHANNEL = "feedfabric_outbox"
DEFAULT_SHARDS = 16


def shard_of(key: str, shards: int = DEFAULT_SHARDS) -> int:
    return zlib.crc32(key.encode()) % shards


async def add_event(
    conn: asyncpg.Connection,
    event_type: str,
    key: str,
    data: dict[str, Any],
    *,
    shards: int = DEFAULT_SHARDS,
) -> int:
    """Writes one event in the caller's transaction and returns its ID (the eventId).

    One statement, one round trip (issue 50): the per-key version bump, the row and the NOTIFY that wakes
    the relays (its payload `shard:id`, so a relay that already claimed the row is not woken for it). The version row is locked until commit, and the outbox row is formed from the bumped version,
    so its ID is drawn only once the lock is held: two writers of one key commit their events in version
    order and outbox ID order alike. The NOTIFY is delivered at commit, as before. The traceparent of the
    current span goes with the row, so the trace of the change goes on in every consumer of the event.
    """
    shard = shard_of(key, shards)
    event_id = await conn.fetchval(
        _ADD_EVENT, key, TOPIC_OF[event_type], shard, event_type, data, tracing.traceparent()
    )
    return int(event_id)


@dataclass(frozen=True)
class EventRow:
    """One event's values for a statement that writes its change and the event together (`event_ctes`)."""

    topic: str
    key: str
    shard: int
    event_type: str
    data: dict[str, Any]
    traceparent: str | None

    @classmethod
    def of(cls, event_type: str, key: str, data: dict[str, Any], *, shards: int = DEFAULT_SHARDS) -> EventRow:
        return cls(TOPIC_OF[event_type], key, shard_of(key, shards), event_type, data, tracing.traceparent())


def event_ctes(first: int, payload: str | None = None) -> str:
    """add_event's statement as CTEs (`bumped`, then `added`, which RETURNING id, shard) for a statement of
    another module that writes its change and the change's event in one round trip (issue 50). The event's
    values are parameters `first`.. `first + 5` in EventRow's field order; `payload`, when given, is the
    SQL of the payload (to add what only the statement knows to the given data). The statement must select
    `notify_sql()` from `added`: the NOTIFY that wakes the relays."""
    topic, key, shard, event_type, data, traceparent = (f"${first + i}" for i in range(6))
    return (
        f"bumped AS (INSERT INTO outbox_keys (key, version) VALUES ({key}, 1)"
        f"  ON CONFLICT (key) DO UPDATE SET version = outbox_keys.version + 1 RETURNING version),"
        f" added AS (INSERT INTO outbox (topic, key, shard, event_type, aggregate_version, payload, traceparent)"
        f"  SELECT {topic}, {key}, {shard}::int, {event_type}, bumped.version, {payload or data + '::jsonb'},"
        f" {traceparent} FROM bumped RETURNING id, shard)"
    )


def notify_sql() -> str:
    return f"pg_notify('{NOTIFY_CHANNEL}', shard::text || ':' || id)"


_ADD_EVENT = (
    "WITH bumped AS ("
    "  INSERT INTO outbox_keys (key, version) VALUES ($1, 1)"
    "  ON CONFLICT (key) DO UPDATE SET version = outbox_keys.version + 1 RETURNING version),"
    " added AS ("
    "  INSERT INTO outbox (topic, key, shard, event_type, aggregate_version, payload, traceparent)"
    "  SELECT $2, $1, $3::int, $4, bumped.version, $5, $6 FROM bumped RETURNING id)"
    f" SELECT added.id, pg_notify('{NOTIFY_CHANNEL}', $3::int::text || ':' || added.id) FROM added"
)


async def add_events(
    conn: asyncpg.Connection,
    events: list[tuple[str, str, dict[str, Any]]],
    *,
    shards: int = DEFAULT_SHARDS,
) -> int:
    """Writes many events, each (event_type, key, data), in one statement: what `add_event` does for one,
    for all of them at once (a bulk change such as importBlocks writes tens of thousands). Each key's version
    moves by its number of events, and its events take the versions in the order given, as do their outbox
    IDs; one NOTIFY per shard touched. Returns the number written."""
    if not events:
        return 0
    keys = [key for _, key, _ in events]
    row = await conn.fetchrow(
        _ADD_EVENTS,
        keys,
        [TOPIC_OF[event_type] for event_type, _, _ in events],
        [shard_of(key, shards) for key in keys],
        [event_type for event_type, _, _ in events],
        [jsonwire.dumps_text(data) for _, _, data in events],
        tracing.traceparent(),
    )
    return int(row["written"])


_ADD_EVENTS = (
    "WITH given AS ("
    "  SELECT g.key, g.topic, g.shard, g.event_type, g.payload::jsonb AS payload, g.ord"
    "  FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[])"
    "       WITH ORDINALITY AS g(key, topic, shard, event_type, payload, ord)),"
    " counted AS (SELECT key, count(*)::bigint AS n FROM given GROUP BY key),"
    " bumped AS ("
    "  INSERT INTO outbox_keys (key, version) SELECT key, n FROM counted ORDER BY key"
    "  ON CONFLICT (key) DO UPDATE SET version = outbox_keys.version + EXCLUDED.version RETURNING key, version),"
    " added AS ("
    "  INSERT INTO outbox (topic, key, shard, event_type, aggregate_version, payload, traceparent)"
    "  SELECT g.topic, g.key, g.shard, g.event_type,"
    "         b.version - c.n + row_number() OVER (PARTITION BY g.key ORDER BY g.ord), g.payload, $6"
    "  FROM given g JOIN bumped b ON b.key = g.key JOIN counted c ON c.key = g.key"
    "  ORDER BY g.ord RETURNING shard)"
    f", notified AS (SELECT pg_notify('{NOTIFY_CHANNEL}', s::text) FROM (SELECT DISTINCT shard AS s FROM added) d)"
    " SELECT (SELECT count(*) FROM added) AS written, (SELECT count(*) FROM notified) AS shards"
)
