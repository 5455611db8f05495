"""Notifications as a member reads them: one per event, or grouped; marking them read keeps both views agreeing.

A group is read exactly when every notification in it is: reading a group
reads its notifications, and reading notifications (all, or up to one)
closes each open group left with none unread.
"""

from __future__ import annotations

import dataclasses
import uuid

import asyncpg

from feedfabric.core.errors import NotFound
from feedfabric.core.ids import parse_id
from feedfabric.core.models import Member, NotificationGroup, Page
from feedfabric.db import notification_groups as groups_db
from feedfabric.db import notifications as notifications_db
from feedfabric.db.queryable import Queryable
from feedfabric.feeds import paging
from feedfabric.feeds.relations import Relations

__all__ = ["group_cursor", "groups", "mark_group_read", "mark_read", "unread_groups"]


def group_cursor(group: NotificationGroup) -> str:
    return paging.position_cursor(group.latest_at, str(group.id))


# Reads a page of groups may make when the viewer's relations empty some of them.
MAX_GROUP_ROUNDS = 5


async def groups(
    conn: Queryable, member: Member, after: str | None, limit: int, relations: Relations | None = None
) -> Page:
    """Most recently changed group first; a keyset page of (latest_at, id), one statement. With relations:
    the actors the viewer blocks, is blocked by or mutes with notifications leave each group's count (and
    its sample, db.notification_groups.sample_actors); a group left with none is not listed, and the page
    reads on past it (one statement more a round) so it stays full."""
    words = relations is not None and relations.matcher.applies("NOTIFICATIONS")
    if relations is None or not (relations.hidden or relations.muted_notifying or words):
        rows = await groups_db.page(conn, member.id, paging.position(after), limit + 1)
        items = rows[:limit]
        return Page(items, group_cursor(items[-1]) if len(rows) > limit else None)
    kept: list[NotificationGroup] = []
    position = paging.position(after)
    for _ in range(MAX_GROUP_ROUNDS):
        rows = await groups_db.page(conn, member.id, position, limit + 1)
        ids = [g.id for g in rows]
        hidden = await groups_db.hidden_actor_counts(conn, ids, member.id) if rows else {}
        texts = await groups_db.texts(conn, ids, member.id) if rows and words else {}
        for group in rows:
            left = group.actor_count - hidden.get(group.id, 0)
            if left > 0 and not (texts.get(group.id) and relations.hides_text([texts[group.id]], "NOTIFICATIONS")):
                kept.append(dataclasses.replace(group, actor_count=left))
        if len(kept) > limit:
            items = kept[:limit]
            return Page(items, group_cursor(items[-1]))
        if len(rows) <= limit:
            return Page(kept, None)
        position = (rows[-1].latest_at, str(rows[-1].id))
    return Page(kept, paging.position_cursor(position[0], position[1]) if position else None)


async def unread_groups(conn: Queryable, member: Member, relations: Relations | None = None) -> int:
    """Unread groups as the page lists them: without those emptied by the viewer's relations."""
    hides = relations is not None and bool(relations.hidden or relations.muted_notifying)
    return await groups_db.unread_count(conn, member.id, hides_actors=hides)


async def mark_read(conn: asyncpg.Connection, member: Member, up_to: uuid.UUID | None) -> int:
    """markNotificationsRead: the notifications up to `up_to` (all without it); returns how many."""
    await groups_db.lock_open(conn, member.id)
    marked = await notifications_db.mark_read(conn, member.id, up_to)
    await groups_db.close_read(conn, member.id)
    return marked


async def mark_group_read(conn: asyncpg.Connection, member: Member, key: str) -> NotificationGroup:
    group = await groups_db.mark_read(conn, member.id, parse_id(key, "key"))
    if group is None:
        raise NotFound("notification group not found")
    return group
