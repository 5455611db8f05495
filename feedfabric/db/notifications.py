"""Queries over notifications (written by the worker-notifications group)."""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.core.models import Notification
from feedfabric.db.notification_groups import hidden_actors
from feedfabric.db.queryable import Queryable

__all__ = ["add_for_event", "by_id", "mark_read", "page", "texts", "unread_count"]

_COLUMNS = "id, kind, actor_id, post_id, comment_id, created_at, read_at"


async def page(conn: Queryable, recipient_id: uuid.UUID, before: uuid.UUID | None, limit: int) -> list[Notification]:
    """Newest first, without those from actors the recipient blocks, is blocked by or mutes with
    notifications (hidden_actors: an anti-join on the recipient's few relations)."""
    rows = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM notifications
            WHERE recipient_id = $1 AND ($2::uuid IS NULL OR id < $2)
              AND actor_id NOT IN {hidden_actors("$1::uuid")}
            ORDER BY id DESC LIMIT $3""",
        recipient_id,
        before,
        limit,
    )
    return [Notification.of(r) for r in rows]


async def unread_count(conn: Queryable, recipient_id: uuid.UUID) -> int:
    return int(
        await conn.fetchval(
            f"""SELECT count(*) FROM notifications WHERE recipient_id = $1 AND read_at IS NULL
                AND actor_id NOT IN {hidden_actors("$1::uuid")}""",
            recipient_id,
        )
    )


async def mark_read(conn: asyncpg.Connection, recipient_id: uuid.UUID, up_to: uuid.UUID | None) -> int:
    status = await conn.execute(
        """UPDATE notifications SET read_at = now()
           WHERE recipient_id = $1 AND read_at IS NULL AND ($2::uuid IS NULL OR id <= $2)""",
        recipient_id,
        up_to,
    )
    return int(status.split()[-1])


async def texts(conn: Queryable, notification_ids: list[uuid.UUID], recipient_id: uuid.UUID) -> dict[uuid.UUID, str]:
    """What muted words read of each notification: its comment's text, or its post's when another member
    wrote it (never the recipient's own post)."""
    rows = await conn.fetch(
        """SELECT n.id, COALESCE(c.content, CASE WHEN p.author_id <> $2 THEN p.content END, '') AS text
           FROM notifications n LEFT JOIN comments c ON c.id = n.comment_id LEFT JOIN posts p ON p.id = n.post_id
           WHERE n.id = ANY($1::uuid[])""",
        notification_ids,
        recipient_id,
    )
    return {r["id"]: r["text"] for r in rows}


async def by_id(conn: Queryable, notification_id: uuid.UUID) -> Notification | None:
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM notifications WHERE id = $1", notification_id)
    return Notification.of(row) if row else None


async def add_for_event(
    conn: asyncpg.Connection,
    *,
    event_id: int,
    kind: str,
    actor_id: uuid.UUID,
    recipients: list[tuple[uuid.UUID, uuid.UUID]],
    post_id: uuid.UUID | None = None,
    comment_id: uuid.UUID | None = None,
    only_new_mentions: bool = False,
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Writes one notification per (notification ID, recipient) pair; returns the (id, recipient) rows inserted.

    Skipped in SQL, so a redelivered event and a racing writer agree: the actor
    themself, an actor no longer active, an actor blocked either way by the recipient (migration 320),
    a post the recipient may not see (which covers a mention by a member blocked either way), an
    (event, recipient, kind) already written, and with `only_new_mentions`
    recipients already told of a mention in this same post or comment (an edit
    re-lists everyone it mentions; only the newly mentioned hear about it).
    """
    if not recipients:
        return []
    rows = await conn.fetch(
        """INSERT INTO notifications (id, recipient_id, kind, actor_id, post_id, comment_id, event_id)
           SELECT r.id, r.recipient_id, $2, $3, $4, $5, $1
           FROM unnest($6::uuid[], $7::uuid[]) AS r(id, recipient_id)
           WHERE r.recipient_id <> $3
             AND EXISTS (SELECT 1 FROM members rm WHERE rm.id = r.recipient_id)
             AND EXISTS (SELECT 1 FROM members a WHERE a.id = $3 AND a.status = 'active')
             AND NOT member_hidden(r.recipient_id, $3, false)
             AND ($4::uuid IS NULL OR EXISTS (
                  SELECT 1 FROM posts p WHERE p.id = $4
                    AND post_visible(p.status, p.author_id, p.repost_of, r.recipient_id)))
             AND (NOT $8 OR NOT EXISTS (
                  SELECT 1 FROM notifications n
                  WHERE n.recipient_id = r.recipient_id AND n.kind = 'mention'
                    AND n.post_id IS NOT DISTINCT FROM $4 AND n.comment_id IS NOT DISTINCT FROM $5))
           ON CONFLICT (event_id, recipient_id, kind) DO NOTHING
           RETURNING id, recipient_id""",
        event_id,
        kind,
        actor_id,
        post_id,
        comment_id,
        [n for n, _ in recipients],
        [r for _, r in recipients],
        only_new_mentions,
    )
    return [(r["id"], r["recipient_id"]) for r in rows]
