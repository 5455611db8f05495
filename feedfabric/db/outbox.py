"""The transactional outbox: written by every change, read only by the relay."""

from __future__ import annotations

import zlib
from typing import Any

import asyncpg

from feedfabric.core import tracing
from feedfabric.core.events import TOPIC_OF

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

    The per-key version row is locked until commit, so two writers of one key
    commit their events in version order and outbox ID order alike. The traceparent
    of the current span goes with the row, so the trace of the change goes on in
    every consumer of the event.
    """
    topic = TOPIC_OF[event_type]
    version = await conn.fetchval(
        "INSERT INTO outbox_keys (key, version) VALUES ($1, 1)"
        " ON CONFLICT (key) DO UPDATE SET version = outbox_keys.version + 1"
        " RETURNING version",
        key,
    )
    event_id = await conn.fetchval(
        "INSERT INTO outbox (topic, key, shard, event_type, aggregate_version, payload, traceparent)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        topic,
        key,
        shard_of(key, shards),
        event_type,
        version,
        data,
        tracing.traceparent(),
    )
    await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, str(shard_of(key, shards)))
    return int(event_id)
