"""Notifications as a member reads them: one per event, or grouped; marking them read keeps both views agreeing.

A group is read exactly when every notification in it is: reading a group
reads its notifications, and reading notifications (all, or up to one)
closes each open group left with none unread.
"""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.core.errors import NotFound
from feedfabric.core.ids import parse_id
from feedfabric.core.models import Member, NotificationGroup, Page
from feedfabric.db import notification_groups as groups_db
from feedfabric.db import notifications as notifications_db
from feedfabric.db.executor import Executor
from feedfabric.feeds import paging


def group_cursor(group: NotificationGroup) -> str:
    return paging.position_cursor(group.latest_at, str(group.id))


async def groups(conn: Executor, member: Member, after: str | None, limit: int) -> Page:
    """Most recently changed group first; a keyset page of (latest_at, id), one statement."""
    rows = await groups_db.page(conn, member.id, paging.position(after), limit + 1)
    items = rows[:limit]
    return Page(items, group_cursor(items[-1]) if len(rows) > limit else None)


async def unread_groups(conn: Executor, member: Member) -> int:
    return await groups_db.unread_count(conn, member.id)


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
