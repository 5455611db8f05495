"""Rows and deliveries for the engagement, embeddings and media tests, in plain SQL.

`deliver` does what the consumer runner does for one event: one transaction,
the processed_events row first (a redelivery stops there), then the handler.
"""

from __future__ import annotations

import functools
import itertools
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
from feedfabric.core.events import Event
from feedfabric.core.ids import new_id
from feedfabric.feeds import minilm as embeddings
from feedfabric.workers.base import GroupSpec, WorkerContext

_event_ids = itertools.count(1)


@functools.cache
def shared_embedder() -> embeddings.Embedder:
    """One loaded model for the whole test session (loading takes seconds)."""
    return embeddings.load_embedder()


async def member(conn: asyncpg.Connection | asyncpg.Pool, name: str | None = None) -> uuid.UUID:
    member_id = new_id()
    name = name or f"m{member_id.hex[-10:]}"
    await conn.execute(
        "INSERT INTO members (id, external_id, username, display_name) VALUES ($1, $2, $3, $4)",
        member_id,
        f"ext-{name}",
        name,
        name.title(),
    )
    return member_id


async def post(
    conn: asyncpg.Connection | asyncpg.Pool,
    author_id: uuid.UUID,
    content: str,
    *,
    hashtags: Sequence[str] = (),
    repost_of: uuid.UUID | None = None,
    status: str = "live",
) -> uuid.UUID:
    post_id = new_id()
    await conn.execute(
        "INSERT INTO posts (id, author_id, content, repost_of, status) VALUES ($1, $2, $3, $4, $5)",
        post_id,
        author_id,
        content,
        repost_of,
        status,
    )
    for tag in hashtags:
        await conn.execute("INSERT INTO post_tags (post_id, tag, source) VALUES ($1, $2, 'hashtag')", post_id, tag)
    return post_id


async def edit_post(conn: asyncpg.Connection | asyncpg.Pool, post_id: uuid.UUID, content: str) -> None:
    await conn.execute(
        "UPDATE posts SET content = $2, updated_at = now(), version = version + 1 WHERE id = $1", post_id, content
    )


def event(event_type: str, key: Any, data: dict[str, Any], event_id: int | None = None) -> Event:
    return Event(
        event_id=event_id if event_id is not None else next(_event_ids),
        type=event_type,
        key=str(key),
        version=1,
        data={k: (str(v) if isinstance(v, uuid.UUID) else v) for k, v in data.items()},
    )


async def deliver(ctx: WorkerContext, group: GroupSpec, batch: Sequence[Event]) -> int:
    """Runs a polled batch as the runner would; returns how many events were handled (not duplicates)."""
    if group.prepare is not None:
        await group.prepare(ctx, batch)
    handled = 0
    for item in batch:
        async with ctx.pool.acquire() as conn, conn.transaction():
            fresh = await conn.fetchval(
                "INSERT INTO processed_events (group_name, event_id) VALUES ($1, $2)"
                " ON CONFLICT DO NOTHING RETURNING true",
                group.name,
                item.event_id,
            )
            if fresh:
                await group.handle(ctx, conn, item)
                handled += 1
    return handled
