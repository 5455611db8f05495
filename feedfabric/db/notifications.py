"""Queries over notifications (written by the worker-notifications group)."""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.models import Notification

Executor = asyncpg.Connection | asyncpg.Pool
_COLUMNS = "id, kind, actor_id, post_id, comment_id, created_at, read_at"


async def page(conn: Executor, recipient_id: uuid.UUID, before: uuid.UUID | None, limit: int) -> list[Notification]:
    rows = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM notifications
            WHERE recipient_id = $1 AND ($2::uuid IS NULL OR id < $2)
            ORDER BY id DESC LIMIT $3""",
        recipient_id, before, limit,
    )
    return [Notification.of(r) for r in rows]


async def unread_count(conn: Executor, recipient_id: uuid.UUID) -> int:
    return int(await conn.fetchval(
        "SELECT count(*) FROM notifications WHERE recipient_id = $1 AND read_at IS NULL", recipient_id
    ))


async def mark_read(conn: asyncpg.Connection, recipient_id: uuid.UUID, up_to: uuid.UUID | None) -> int:
    status = await conn.execute(
        """UPDATE notifications SET read_at = now()
           WHERE recipient_id = $1 AND read_at IS NULL AND ($2::uuid IS NULL OR id <= $2)""",
        recipient_id, up_to,
    )
    return int(status.split()[-1])


async def by_id(conn: Executor, notification_id: uuid.UUID) -> Notification | None:
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM notifications WHERE id = $1", notification_id)
    return Notification.of(row) if row else None
