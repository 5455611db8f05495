"""Grouped notifications: the groups worker-notifications keeps beside each notification, and their reads.

The grouping rule lives here, in SQL, once: LIKE and REPOST group by post,
FOLLOW by recipient, COMMENT and MENTION by the notification itself (never
grouped). A group is open until it is read; the open group of a kind and
target is unique (notification_groups_open_idx), and the writer's upsert on
that index locks the group row until its transaction commits, so writers of
one group queue behind each other and its counts stay exact.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

import asyncpg

from feedfabric.core.models import SAMPLE_ACTORS, NotificationGroup
from feedfabric.db.queryable import Queryable

__all__ = [
    "UNDONE_KINDS",
    "by_ids",
    "close_read",
    "forget_empty",
    "forget_take_backs",
    "hidden_actor_counts",
    "join",
    "lock_open",
    "mark_read",
    "page",
    "quiet",
    "take_back_follow",
    "take_back_like",
    "take_back_repost",
    "texts",
    "unread_count",
]

_COLUMNS = "id, kind, post_id, comment_id, actor_count, notification_count, latest_at, read_at"
QUIET_FOR = timedelta(hours=24)
# The kinds an undo takes back (an unlike, an unfollow, a deleted repost): the only ones a redo can be.
UNDONE_KINDS = frozenset({"like", "follow", "repost"})
# A notification this old when taken back had its live push sent (the realtime path takes well under a
# second); one taken back sooner may have been gone before the push was rendered, which then skips it.
ANNOUNCED_AFTER = timedelta(seconds=10)


def _target(x: str) -> str:
    """The grouping target of notification row `x`."""
    return f"""CASE WHEN {x}.kind IN ('like', 'repost') THEN {x}.post_id
                  WHEN {x}.kind = 'follow' THEN {x}.recipient_id
                  ELSE {x}.id END"""


_TARGET = _target("x")
# Follows a `gone AS (DELETE FROM notifications ... RETURNING *)`: each take-back is remembered (quiet),
# with whether the recipient was told of it, today (ANNOUNCED_AFTER, QUIET_FOR).
_REMEMBER = f"""remembered AS (
             INSERT INTO notification_take_backs AS t (recipient_id, kind, actor_id, target_id, announced)
             SELECT recipient_id, kind, actor_id, {_target("gone")},
                    bool_or(created_at < now() - '{ANNOUNCED_AFTER.total_seconds():.0f} seconds'::interval)
             FROM gone GROUP BY 1, 2, 3, 4
             ON CONFLICT (recipient_id, kind, actor_id, target_id) DO UPDATE
             SET announced = excluded.announced
                          OR (t.announced AND t.taken_at > now() - '{QUIET_FOR.total_seconds():.0f} seconds'::interval),
                 taken_at = now()
           )"""


async def join(
    conn: asyncpg.Connection, notifications: Sequence[tuple[uuid.UUID, uuid.UUID]]
) -> dict[uuid.UUID, uuid.UUID]:
    """Puts just-written notifications, as (notification ID, ID for a new group) pairs, into their groups.

    Returns each notification's group. A notification already in a group is
    left alone, so a handler run twice on one event counts nothing twice.
    """
    if not notifications:
        return {}
    joined = await conn.fetch(
        f"""WITH n AS (
              SELECT x.id, x.recipient_id, x.kind, x.actor_id, x.post_id, x.comment_id, x.created_at,
                     c.group_id AS new_group_id, {_TARGET} AS target_id
              FROM unnest($1::uuid[], $2::uuid[]) AS c(notification_id, group_id)
              JOIN notifications x ON x.id = c.notification_id
              WHERE x.group_id IS NULL
            ), g AS (
              INSERT INTO notification_groups AS g
                  (id, recipient_id, kind, target_id, post_id, comment_id, notification_count, latest_at)
              SELECT new_group_id, recipient_id, kind, target_id, post_id, comment_id, 1, created_at
              FROM n ORDER BY recipient_id, kind, target_id
              ON CONFLICT (recipient_id, kind, target_id) WHERE read_at IS NULL
              DO UPDATE SET notification_count = g.notification_count + 1,
                            latest_at = greatest(g.latest_at, excluded.latest_at)
              RETURNING g.id, g.recipient_id, g.kind, g.target_id
            )
            UPDATE notifications x SET group_id = g.id
            FROM n JOIN g USING (recipient_id, kind, target_id)
            WHERE x.id = n.id
            RETURNING n.id AS notification_id, g.id AS group_id, n.actor_id, n.created_at""",
        [n for n, _ in notifications],
        [g for _, g in notifications],
    )
    if not joined:
        return {}
    # A second statement: the groups are locked now, and one statement cannot update their rows twice.
    # Actors already in a group only move to the front of its sample; new ones are counted.
    await conn.execute(
        """WITH a AS (
             SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS a(group_id, actor_id, at)
           ), fresh AS (
             INSERT INTO notification_group_actors (group_id, actor_id, latest_at)
             SELECT group_id, actor_id, at FROM a
             ON CONFLICT (group_id, actor_id) DO NOTHING
             RETURNING group_id, actor_id
           ), seen AS (
             UPDATE notification_group_actors x SET latest_at = greatest(x.latest_at, a.at)
             FROM a WHERE x.group_id = a.group_id AND x.actor_id = a.actor_id
           )
           UPDATE notification_groups g SET actor_count = g.actor_count + f.n
           FROM (SELECT f.group_id, count(*)::int AS n FROM fresh f
                 JOIN members m ON m.id = f.actor_id AND m.status = 'active' GROUP BY f.group_id) f
           WHERE g.id = f.group_id""",
        [r["group_id"] for r in joined],
        [r["actor_id"] for r in joined],
        [r["created_at"] for r in joined],
    )
    return {r["notification_id"]: r["group_id"] for r in joined}


async def quiet(conn: asyncpg.Connection, notification_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Of just-written notifications, those redoing one taken back less than QUIET_FOR ago that the
    recipient was told of: a like, follow or repost toggled back on. They are listed and grouped like any
    other, but not announced again. A redo of one taken back before its push could go out is announced."""
    if not notification_ids:
        return set()
    rows = await conn.fetch(
        f"""SELECT x.id FROM notifications x
            JOIN notification_take_backs t ON t.recipient_id = x.recipient_id AND t.kind = x.kind
                 AND t.actor_id = x.actor_id AND t.target_id = {_TARGET}
            WHERE x.id = ANY($1::uuid[]) AND t.announced AND t.taken_at > now() - $2::interval""",
        list(notification_ids),
        QUIET_FOR,
    )
    return {r["id"] for r in rows}


async def forget_take_backs(conn: asyncpg.Connection, limit: int) -> int:
    """Deletes up to `limit` take-backs older than QUIET_FOR, which quiet no longer reads; returns how many."""
    done = await conn.execute(
        """DELETE FROM notification_take_backs WHERE (recipient_id, kind, actor_id, target_id) IN (
             SELECT recipient_id, kind, actor_id, target_id FROM notification_take_backs
             WHERE taken_at < now() - $1::interval ORDER BY taken_at LIMIT $2)""",
        QUIET_FOR,
        limit,
    )
    return int(done.split()[-1])


async def take_back_like(
    conn: asyncpg.Connection, post_id: uuid.UUID, actor_id: uuid.UUID, before_event: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """An unlike: deletes the actor's like notifications of the post written by earlier events, takes the
    actor out of their groups (one left empty stays, listed nowhere: _shrink).

    Returns (group ID, recipient ID) of the groups that changed.
    Only notifications of events before the unlike go, so a redelivered unlike
    never takes back a like that came after it.
    """
    return await _take_back(
        conn,
        """DELETE FROM notifications
           WHERE kind = 'like' AND post_id = $1 AND actor_id = $2 AND event_id < $3
           RETURNING *""",
        actor_id,
        post_id,
        actor_id,
        before_event,
    )


async def take_back_follow(
    conn: asyncpg.Connection, recipient_id: uuid.UUID, actor_id: uuid.UUID, before_event: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """An unfollow, as an unlike: deletes the actor's follow notifications to the recipient written by
    earlier events and shrinks their groups, so a follow toggled many times is one notification.

    Returns (group ID, recipient ID) of the groups that changed.
    """
    return await _take_back(
        conn,
        """DELETE FROM notifications
           WHERE kind = 'follow' AND recipient_id = $1 AND actor_id = $2 AND event_id < $3
           RETURNING *""",
        actor_id,
        recipient_id,
        actor_id,
        before_event,
    )


async def take_back_repost(
    conn: asyncpg.Connection, deleted_post_id: uuid.UUID, before_event: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """A deleted repost, as an unlike: deletes its author's repost notifications of the original post
    written by earlier events and shrinks their groups. A deleted post that is not a repost takes nothing.

    The repost notification names the original post, not the repost, so the
    deleted post's row (kept, status 'deleted') says which original and whose.
    Returns (group ID, recipient ID) of the groups that changed.
    """
    actor_id = await conn.fetchval(
        "SELECT author_id FROM posts WHERE id = $1 AND repost_of IS NOT NULL", deleted_post_id
    )
    if actor_id is None:
        return []
    return await _take_back(
        conn,
        """DELETE FROM notifications n USING posts p
           WHERE p.id = $1 AND n.kind = 'repost' AND n.post_id = p.repost_of
             AND n.actor_id = p.author_id AND n.event_id < $2
           RETURNING n.*""",
        actor_id,
        deleted_post_id,
        before_event,
    )


async def _take_back(
    conn: asyncpg.Connection, delete: str, actor_id: uuid.UUID, *args: object
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """One take-back in one statement: `delete` (a DELETE of the actor's notifications, RETURNING them)
    runs, what it took is remembered (_REMEMBER: quiet reads it), and its groups shrink (_shrink).
    Returns (group ID, recipient ID) of the groups that changed."""
    gone = await conn.fetch(
        f"""WITH gone AS ({delete}), {_REMEMBER}
           SELECT group_id, count(*)::int AS n FROM gone WHERE group_id IS NOT NULL GROUP BY group_id""",
        *args,
    )
    return await _shrink(conn, gone, actor_id)


async def _shrink(
    conn: asyncpg.Connection, gone: Sequence[asyncpg.Record], actor_id: uuid.UUID
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """After an actor's notifications were taken back, (group ID, count) rows: the actor leaves each group
    they no longer have a notification in and the counts drop.

    A group left empty stays, with its key, out of every list: sent live at zero, it tells a client to
    drop it, and a redo while it is open joins it again under that key (a new group would leave the
    client holding the old one beside it). `feedfabric maintain` deletes it after a day.
    Returns (group ID, recipient ID) of the groups that changed.
    """
    if not gone:
        return []
    changed = await conn.fetch(
        """WITH c AS (SELECT * FROM unnest($1::uuid[], $2::int[]) AS c(group_id, n)),
           left_group AS (
             DELETE FROM notification_group_actors a USING c
             WHERE a.group_id = c.group_id AND a.actor_id = $3
               AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.group_id = a.group_id AND n.actor_id = $3)
             RETURNING a.group_id
           )
           UPDATE notification_groups g
           SET notification_count = g.notification_count - c.n,
               actor_count = g.actor_count - (SELECT count(*) FROM left_group l WHERE l.group_id = g.id)::int
                   * (SELECT (status = 'active')::int FROM members WHERE id = $3)
           FROM c WHERE g.id = c.group_id
           RETURNING g.id, g.recipient_id, g.notification_count""",
        [r["group_id"] for r in gone],
        [r["n"] for r in gone],
        actor_id,
    )
    return [(r["id"], r["recipient_id"]) for r in changed]


async def forget_empty(conn: asyncpg.Connection, limit: int) -> int:
    """Deletes up to `limit` groups left empty by take-backs more than QUIET_FOR ago; returns how many."""
    done = await conn.execute(
        """DELETE FROM notification_groups WHERE id IN (
             SELECT id FROM notification_groups
             WHERE notification_count = 0 AND latest_at < now() - $1::interval LIMIT $2)""",
        QUIET_FOR,
        limit,
    )
    return int(done.split()[-1])


Position = tuple[datetime, str]
"""A keyset position: (the group's latest_at, its ID as text)."""


async def page(
    conn: Queryable, recipient_id: uuid.UUID, before: Position | None, limit: int
) -> list[NotificationGroup]:
    """Most recently changed first (index notification_groups_recent_idx: one range scan)."""
    after = "AND (latest_at, id) < ($2, $3::uuid)" if before is not None else ""
    # notification_count > 0: a group its take-backs emptied is listed nowhere (_shrink).
    args: list[object] = [recipient_id, *(before or ()), limit]
    rows = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM notification_groups
            WHERE recipient_id = $1 AND notification_count > 0 {after}
            ORDER BY latest_at DESC, id DESC LIMIT ${len(args)}""",
        *args,
    )
    return [NotificationGroup.of(r) for r in rows]


async def unread_count(conn: Queryable, recipient_id: uuid.UUID, *, hides_actors: bool = False) -> int:
    """The recipient's unread groups. `hides_actors` (the recipient blocks, is blocked or mutes with
    notifications): less the groups every counted actor of which they are not shown, as the page leaves
    them out (feeds.notifications.groups)."""
    if not hides_actors:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM notification_groups"
                " WHERE recipient_id = $1 AND read_at IS NULL AND notification_count > 0",
                recipient_id,
            )
        )
    return int(
        await conn.fetchval(
            f"""SELECT count(*) FROM notification_groups g
                WHERE g.recipient_id = $1 AND g.read_at IS NULL AND g.notification_count > 0
                  AND g.actor_count > (SELECT count(*)
                                       FROM notification_group_actors x
                                       JOIN members m ON m.id = x.actor_id AND m.status = 'active'
                                       WHERE x.group_id = g.id AND x.actor_id IN {hidden_actors("$1::uuid")})""",
            recipient_id,
        )
    )


async def by_ids(
    conn: Queryable, group_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, tuple[uuid.UUID, NotificationGroup]]:
    """Groups by ID, each with its recipient."""
    rows = await conn.fetch(
        f"SELECT recipient_id, {_COLUMNS} FROM notification_groups WHERE id = ANY($1::uuid[])", list(group_ids)
    )
    return {r["id"]: (r["recipient_id"], NotificationGroup.of(r)) for r in rows}


def hidden_actors(viewer: str) -> str:
    """The members whose notifications `viewer` (a parameter) is not shown: blocked either way, or muted
    with notifications and unexpired (the rule of member_hidden, migration 320, as a set to anti-join)."""
    return f"""(SELECT blocked_id FROM blocks WHERE blocker_id = {viewer}
              UNION ALL SELECT blocker_id FROM blocks WHERE blocked_id = {viewer}
              UNION ALL SELECT muted_id FROM mutes WHERE muter_id = {viewer} AND notifications
                                                     AND (expires_at IS NULL OR expires_at > now()))"""


async def sample_actors(
    conn: Queryable, group_ids: Sequence[uuid.UUID], viewer_id: uuid.UUID | None = None
) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Each group's most recent active actors, at most SAMPLE_ACTORS, for a whole page in one statement.
    A suspended actor is left out, as actor_count leaves them out (migration 293), and so is an actor the
    viewer blocks, is blocked by or mutes with notifications (`hidden_actor_counts` takes them out of
    the count)."""
    rows = await conn.fetch(
        f"""SELECT g.id AS group_id, a.actor_id
           FROM unnest($1::uuid[]) AS g(id)
           CROSS JOIN LATERAL (
             SELECT x.actor_id FROM notification_group_actors x
             JOIN members m ON m.id = x.actor_id AND m.status = 'active'
             WHERE x.group_id = g.id
               AND ($3::uuid IS NULL OR x.actor_id NOT IN {hidden_actors("$3::uuid")})
             ORDER BY x.latest_at DESC, x.actor_id DESC LIMIT $2
           ) a""",
        list(group_ids),
        SAMPLE_ACTORS,
        viewer_id,
    )
    found: dict[uuid.UUID, list[uuid.UUID]] = {}
    for r in rows:
        found.setdefault(r["group_id"], []).append(r["actor_id"])
    return found


async def hidden_actor_counts(
    conn: Queryable, group_ids: Sequence[uuid.UUID], viewer_id: uuid.UUID
) -> dict[uuid.UUID, int]:
    """How many of each group's counted (active) actors the viewer is not shown: actor_count less these
    is the count the viewer sees. One statement a page, probing the groups' actors by the viewer's few
    relations (the actors' primary key), not every actor of a busy group."""
    rows = await conn.fetch(
        f"""SELECT x.group_id, count(*)::int AS n
            FROM notification_group_actors x JOIN members m ON m.id = x.actor_id AND m.status = 'active'
            WHERE x.group_id = ANY($1::uuid[]) AND x.actor_id IN {hidden_actors("$2::uuid")}
            GROUP BY x.group_id""",
        list(group_ids),
        viewer_id,
    )
    return {r["group_id"]: r["n"] for r in rows}


async def texts(conn: Queryable, group_ids: Sequence[uuid.UUID], recipient_id: uuid.UUID) -> dict[uuid.UUID, str]:
    """What muted words read of each group: its comment's text, or its post's when another member wrote it
    (a group of likes or reposts of the recipient's own post reads nothing)."""
    rows = await conn.fetch(
        """SELECT g.id, COALESCE(c.content, CASE WHEN p.author_id <> $2 THEN p.content END, '') AS text
           FROM notification_groups g LEFT JOIN comments c ON c.id = g.comment_id LEFT JOIN posts p ON p.id = g.post_id
           WHERE g.id = ANY($1::uuid[])""",
        list(group_ids),
        recipient_id,
    )
    return {r["id"]: r["text"] for r in rows}


async def mark_read(conn: asyncpg.Connection, recipient_id: uuid.UUID, group_id: uuid.UUID) -> NotificationGroup | None:
    """Reads one group and every notification in it; None when the recipient has no such group.

    Two statements on purpose: the first waits for a writer holding the group,
    and the second, with a snapshot taken after it, sees that writer's notification.
    """
    row = await conn.fetchrow(
        f"""UPDATE notification_groups SET read_at = coalesce(read_at, now())
            WHERE id = $1 AND recipient_id = $2 RETURNING {_COLUMNS}""",
        group_id,
        recipient_id,
    )
    if row is None:
        return None
    await conn.execute(
        "UPDATE notifications SET read_at = now() WHERE group_id = $1 AND recipient_id = $2 AND read_at IS NULL",
        group_id,
        recipient_id,
    )
    return NotificationGroup.of(row)


async def lock_open(conn: asyncpg.Connection, recipient_id: uuid.UUID) -> None:
    """Locks the recipient's open groups, waiting for any writer adding to one, before notifications are
    marked read: the statements after it then see every notification those groups hold."""
    await conn.execute(
        """SELECT 1 FROM notification_groups WHERE recipient_id = $1 AND read_at IS NULL
           ORDER BY id FOR UPDATE""",
        recipient_id,
    )


async def close_read(conn: asyncpg.Connection, recipient_id: uuid.UUID) -> int:
    """Marks read each open group of the recipient none of whose notifications is unread any more."""
    status = await conn.execute(
        """UPDATE notification_groups g SET read_at = now()
           WHERE g.recipient_id = $1 AND g.read_at IS NULL
             AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.group_id = g.id AND n.read_at IS NULL)""",
        recipient_id,
    )
    return int(status.split()[-1])
