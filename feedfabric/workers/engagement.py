"""worker-engagement: likes, unlikes and comments into likers, affinity and interest, and a new member's
per-reader effects refitted on each (feeds.reader_effects.on_engagement)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import asyncpg

from feedfabric.core import events
from feedfabric.core.events import Event
from feedfabric.feeds import engagement, reader_effects
from feedfabric.workers.base import GroupSpec, PermanentError, WorkerContext


def _ids(event: Event, *names: str) -> list[uuid.UUID]:
    try:
        return [uuid.UUID(str(event.data[n])) for n in names]
    except (KeyError, ValueError) as exc:
        raise PermanentError(f"{event.type} {event.event_id}: bad payload ({exc})") from None


async def handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
    if event.type == "PostLiked":
        post_id, member_id, author_id = _ids(event, "postId", "memberId", "authorId")
        await engagement.apply_like(conn, ctx.redis, ctx.settings, post_id, member_id, author_id)
        # A new member's per-reader effects learn from this engagement now, not after the nightly refit.
        await reader_effects.on_engagement(conn, member_id, datetime.now(UTC))
    elif event.type == "PostUnliked":
        post_id, member_id = _ids(event, "postId", "memberId")
        await engagement.apply_unlike(conn, ctx.redis, post_id, member_id)
    elif event.type == "CommentCreated":
        post_id, member_id, author_id = _ids(event, "postId", "memberId", "authorId")
        await engagement.apply_comment(conn, ctx.settings, post_id, member_id, author_id)
        await reader_effects.on_engagement(conn, member_id, datetime.now(UTC))


GROUP = GroupSpec(
    name="worker-engagement",
    topics=(events.ENGAGEMENT,),
    event_types=frozenset({"PostLiked", "PostUnliked", "CommentCreated"}),
    handle=handle,
)
