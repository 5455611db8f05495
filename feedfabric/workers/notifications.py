"""worker-notifications: FOLLOW, LIKE, COMMENT, MENTION and REPOST notifications in Postgres.

At most one notification per event and recipient: the most specific kind wins
(the post author mentioned in a comment on their post gets COMMENT, the
original author mentioned in a repost gets REPOST), and the table's unique
(event_id, recipient_id, kind) keeps a redelivered event from doubling
anything. Each new row commits a NotificationCreated outbox event, keyed by
the recipient, in the runner's transaction, so the realtime path delivers it
exactly when the row exists. Unlike, unfollow and deleting a repost notify nobody.

Each notification joins its group (db.notification_groups) in the same
transaction, and NotificationCreated names the group, so the realtime path
sends notificationGroupUpdated beside notificationAdded. An undo takes its
notification back, so toggling cannot pile notifications on the target: an
unlike its like, an unfollow its follow, a deleted repost its repost. The
notification goes, its actor leaves the group, and the group is sent again
(NotificationGroupUpdated); one left empty is sent at zero, so a client drops
it, and stays, listed nowhere, so a redo joins it again under its key. The take-back is
remembered for a day: a redo within it (the like toggled back on) of what
the recipient was told writes its notification and rejoins the group, but
sends only NotificationGroupUpdated, so they are not told of it twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

import asyncpg
from opentelemetry import trace

from feedfabric.core.events import ENGAGEMENT, MEMBERS, POSTS, Event
from feedfabric.core.ids import new_id
from feedfabric.db import follows as follows_db
from feedfabric.db import notification_groups as groups_db
from feedfabric.db import notifications as notifications_db
from feedfabric.db.outbox import add_event
from feedfabric.workers.base import GroupSpec, PermanentError, WorkerContext

__all__ = ["GROUP", "plan"]


@dataclass(frozen=True)
class Planned:
    """One kind of notification an event asks for, to a set of recipients."""

    kind: str
    actor_id: uuid.UUID
    recipients: tuple[uuid.UUID, ...]
    post_id: uuid.UUID | None = None
    comment_id: uuid.UUID | None = None
    only_new_mentions: bool = False


@dataclass
class _Plan:
    actor_id: uuid.UUID
    items: list[Planned] = field(default_factory=list)
    taken: set[uuid.UUID] = field(default_factory=set)

    def add(self, kind: str, recipients: Iterable[uuid.UUID | None], **where: object) -> None:
        """Recipients already given a kind by this event, and the actor, are left out."""
        fresh: list[uuid.UUID] = []
        for r in recipients:
            if r is not None and r != self.actor_id and r not in self.taken:
                self.taken.add(r)
                fresh.append(r)
        if fresh:
            self.items.append(Planned(kind, self.actor_id, tuple(fresh), **where))  # type: ignore[arg-type]


def plan(event: Event) -> list[Planned]:
    """What an event should notify, before the database has its say (visibility, duplicates)."""
    d = event.data
    try:
        if event.type == "MemberFollowed":
            p = _Plan(_id(d["followerId"]))
            p.add("follow", [_id(d["memberId"])])
        elif event.type == "PostLiked":
            p = _Plan(_id(d["memberId"]))
            p.add("like", [_id(d["authorId"])], post_id=_id(d["postId"]))
        elif event.type == "CommentCreated":
            p = _Plan(_id(d["memberId"]))
            where = {"post_id": _id(d["postId"]), "comment_id": _id(d["commentId"])}
            p.add("comment", [_id(d["authorId"])], **where)
            p.add("mention", _ids(d.get("mentionedIds")), **where)
        elif event.type == "PostCreated":
            p = _Plan(_id(d["authorId"]))
            post_id = _id(d["postId"])
            if d.get("repostOf"):
                # "X reposted your post": the notification points at the post that was shared.
                p.add("repost", [_optional_id(d.get("originalAuthorId"))], post_id=_id(d["repostOf"]))
            p.add("mention", _ids(d.get("mentionedIds")), post_id=post_id)
        elif event.type == "PostUpdated":
            p = _Plan(_id(d["authorId"]))
            p.add("mention", _ids(d.get("mentionedIds")), post_id=_id(d["postId"]), only_new_mentions=True)
        else:
            return []
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PermanentError(f"{event.type} payload is malformed: {exc!r}") from exc
    return p.items


async def handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
    if event.type in _TAKE_BACK:
        await _send_changed(ctx, conn, await _TAKE_BACK[event.type](conn, event))
        return
    made = 0
    for item in plan(event):
        created = await notifications_db.add_for_event(
            conn,
            event_id=event.event_id,
            kind=item.kind,
            actor_id=item.actor_id,
            recipients=[(new_id(), r) for r in item.recipients],
            post_id=item.post_id,
            comment_id=item.comment_id,
            only_new_mentions=item.only_new_mentions,
        )
        group_of = await groups_db.join(conn, [(notification_id, new_id()) for notification_id, _ in created])
        quiet = (
            await groups_db.quiet(conn, [notification_id for notification_id, _ in created])
            if item.kind in groups_db.UNDONE_KINDS
            else set()
        )
        for notification_id, recipient_id in created:
            group_id = group_of.get(notification_id)
            if notification_id in quiet:
                if group_id is not None:
                    await _send_changed(ctx, conn, [(group_id, recipient_id)])
                continue
            payload = {"notificationId": str(notification_id), "recipientId": str(recipient_id)}
            if group_id is not None:
                payload["groupId"] = str(group_id)
            await add_event(conn, "NotificationCreated", str(recipient_id), payload, shards=ctx.settings.outbox_shards)
        made += len(created)
    # On the group's span (feedfabric.workers.spans), when the event is traced: how many it told.
    trace.get_current_span().set_attribute("feedfabric.notifications.created", made)


async def _take_back_like(conn: asyncpg.Connection, event: Event) -> list[tuple[uuid.UUID, uuid.UUID]]:
    post_id, member_id = _payload_ids(event, "postId", "memberId")
    return await groups_db.take_back_like(conn, post_id, member_id, event.event_id)


async def _take_back_follow(conn: asyncpg.Connection, event: Event) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Also leaves the past follow on record: verify knew it by the notification this deletes."""
    follower_id, member_id = _payload_ids(event, "followerId", "memberId")
    await follows_db.remember_past_follow(conn, follower_id, member_id)
    return await groups_db.take_back_follow(conn, member_id, follower_id, event.event_id)


async def _take_back_repost(conn: asyncpg.Connection, event: Event) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Any deleted post comes here; one that is not a repost takes nothing back."""
    [post_id] = _payload_ids(event, "postId")
    return await groups_db.take_back_repost(conn, post_id, event.event_id)


_TAKE_BACK = {
    "PostUnliked": _take_back_like,
    "MemberUnfollowed": _take_back_follow,
    "PostDeleted": _take_back_repost,
}
"""Undo events: each takes back the notifications its earlier event wrote (only those of earlier events, so
a redelivered undo never takes back a later redo); returns the groups that shrank."""


async def _send_changed(
    ctx: WorkerContext, conn: asyncpg.Connection, changed: list[tuple[uuid.UUID, uuid.UUID]]
) -> None:
    """Each group that shrank is sent again: NotificationGroupUpdated, keyed by its recipient."""
    for group_id, recipient_id in changed:
        await add_event(
            conn,
            "NotificationGroupUpdated",
            str(recipient_id),
            {"groupId": str(group_id), "recipientId": str(recipient_id)},
            shards=ctx.settings.outbox_shards,
        )


def _payload_ids(event: Event, *names: str) -> list[uuid.UUID]:
    try:
        return [_id(event.data[name]) for name in names]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PermanentError(f"{event.type} payload is malformed: {exc!r}") from exc


def _id(value: object) -> uuid.UUID:
    return uuid.UUID(str(value))


def _optional_id(value: object) -> uuid.UUID | None:
    return _id(value) if value else None


def _ids(values: object) -> list[uuid.UUID]:
    return [_id(v) for v in (values or [])]  # type: ignore[attr-defined]


GROUP = GroupSpec(
    name="worker-notifications",
    topics=(POSTS, ENGAGEMENT, MEMBERS),
    event_types=frozenset(
        {
            "MemberFollowed",
            "MemberUnfollowed",
            "PostLiked",
            "PostUnliked",
            "CommentCreated",
            "PostCreated",
            "PostUpdated",
            "PostDeleted",
        }
    ),
    handle=handle,
)
