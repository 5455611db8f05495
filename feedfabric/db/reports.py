"""Queries over reports: filing (once per open target and reporter), the queue, a reporter's list,
resolution of every open report on a target at once, and the open-report gauges.

Report IDs are UUIDv7, so `id` order is filing order and every list pages by keyset on it.
"""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.core.models import Post
from feedfabric.core.moderation import Report, Target
from feedfabric.db.queryable import Queryable

__all__ = [
    "filed_since",
    "get",
    "insert",
    "lock",
    "open_by",
    "queue_page",
    "reported_posts",
    "reporter_page",
    "resolve_target",
]

# openReportsOnTarget comes with every row read: one subquery on the partial index of open reports.
_SELECT = """SELECT r.id, r.reporter_id, r.member_id, r.target_kind, r.target_id, r.post_id, r.comment_id,
       r.reason, r.note, r.status, r.action, r.created_at, r.resolved_at,
       (SELECT count(*) FROM reports o
         WHERE o.status = 'open' AND o.target_kind = r.target_kind AND o.target_id = r.target_id
       )::int AS open_on_target
  FROM reports r"""


async def get(conn: Queryable, report_id: uuid.UUID) -> Report | None:
    row = await conn.fetchrow(f"{_SELECT} WHERE r.id = $1", report_id)
    return Report.of(row) if row is not None else None


async def lock(conn: asyncpg.Connection, report_id: uuid.UUID) -> str | None:
    """The report's status, its row locked: two moderators resolving one target take turns."""
    status: str | None = await conn.fetchval("SELECT status FROM reports WHERE id = $1 FOR UPDATE", report_id)
    return status


async def open_by(conn: Queryable, reporter_id: uuid.UUID, target: Target) -> Report | None:
    row = await conn.fetchrow(
        f"{_SELECT} WHERE r.reporter_id = $1 AND r.target_kind = $2 AND r.target_id = $3 AND r.status = 'open'",
        reporter_id,
        target.kind,
        target.id,
    )
    return Report.of(row) if row is not None else None


async def filed_since(conn: Queryable, reporter_id: uuid.UUID, seconds: int) -> int:
    """Reports this member filed in the last `seconds` (the hourly limit)."""
    count: int = await conn.fetchval(
        """SELECT count(*) FROM reports
           WHERE reporter_id = $1 AND created_at > now() - make_interval(secs => $2)""",
        reporter_id,
        seconds,
    )
    return count


async def insert(
    conn: asyncpg.Connection,
    report_id: uuid.UUID,
    reporter_id: uuid.UUID | None,
    target: Target,
    reason: str,
    note: str | None,
) -> bool:
    """Files the report; False when an open one of the same target by the same reporter (or, for the
    system, by the system) exists already: the unique indexes decide, so a race files one."""
    inserted = await conn.fetchval(
        """INSERT INTO reports (id, reporter_id, member_id, target_kind, target_id, post_id, comment_id, reason, note)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
           ON CONFLICT DO NOTHING
           RETURNING true""",
        report_id,
        reporter_id,
        target.member_id,
        target.kind,
        target.id,
        target.post_id,
        target.comment_id,
        reason,
        note,
    )
    return bool(inserted)


async def resolve_target(
    conn: asyncpg.Connection, kind: str, target_id: uuid.UUID, status: str, action: str, admin_id: uuid.UUID
) -> int:
    """Every open report on the target, resolved the same way; the number resolved."""
    done: str = await conn.execute(
        """UPDATE reports SET status = $3, action = $4, resolved_at = now(), resolved_by = $5
           WHERE target_kind = $1 AND target_id = $2 AND status = 'open'""",
        kind,
        target_id,
        status,
        action,
        admin_id,
    )
    return int(done.rsplit(" ", 1)[-1])


async def queue_page(conn: Queryable, status: str, after: uuid.UUID | None, limit: int) -> list[Report]:
    """Oldest first, on reports_queue_idx."""
    rows = await conn.fetch(
        f"{_SELECT} WHERE r.status = $1 AND ($2::uuid IS NULL OR r.id > $2) ORDER BY r.id LIMIT $3",
        status,
        after,
        limit,
    )
    return [Report.of(r) for r in rows]


async def reporter_page(conn: Queryable, reporter_id: uuid.UUID, before: uuid.UUID | None, limit: int) -> list[Report]:
    """Newest first, on reports_reporter_idx."""
    rows = await conn.fetch(
        f"""{_SELECT} WHERE r.reporter_id = $1 AND ($2::uuid IS NULL OR r.id < $2)
            ORDER BY r.id DESC LIMIT $3""",
        reporter_id,
        before,
        limit,
    )
    return [Report.of(r) for r in rows]


async def open_gauges(conn: Queryable) -> tuple[int, float]:
    """(open reports, age in seconds of the oldest open one, 0 when none)."""
    row = await conn.fetchrow(
        """SELECT count(*) AS open,
                  COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest
           FROM reports WHERE status = 'open'"""
    )
    return int(row["open"]), float(row["oldest"])


async def reported_posts(conn: Queryable, ids: list[uuid.UUID]) -> list[Post]:
    """The posts of a queue page whatever their status: a moderator sees what was reported, held or not."""
    rows = await conn.fetch(
        "SELECT id, author_id, content, repost_of, status, created_at, updated_at FROM posts WHERE id = ANY($1::uuid[])",
        ids,
    )
    return [Post.of(r) for r in rows]
