"""worker-engagement: likes, unlikes and comments into likers, affinity and interest, and a new member's
per-reader effects refitted on each (feeds.reader_effects.on_engagement)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg

from feedfabric.core import events
from feedfabric.core.events import Event
from feedfabric.db import affinity
from feedfabric.feeds import engagement, reader_effects
from feedfabric.workers.base import GroupSpec, PermanentError, WorkerContext

__all__ = ["GROUP", "handle", "handle_batch"]


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


async def handle_batch(ctx: WorkerContext, conn: asyncpg.Connection, batch: Sequence[Event]) -> None:
    """`handle` for each event in turn, but each run of likes of distinct (post, member) pairs in one
    statement (engagement.apply_likes): an unlike or a comment between likes, or a pair liked again, ends a
    run, so the order that matters (a pair's like before its unlike) is kept."""
    run: list[affinity.Like] = []
    pairs: set[tuple[uuid.UUID, uuid.UUID]] = set()

    async def flush() -> None:
        if run:
            await engagement.apply_likes(conn, ctx.redis, ctx.settings, run, datetime.now(UTC))
            run.clear()
            pairs.clear()

    for event in batch:
        if event.type != "PostLiked":
            await flush()
            await handle(ctx, conn, event)
            continue
        post_id, member_id, author_id = _ids(event, "postId", "memberId", "authorId")
        if (post_id, member_id) in pairs:
            await flush()
        run.append(affinity.Like(post_id, member_id, author_id))
        pairs.add((post_id, member_id))
    await flush()


GROUP = GroupSpec(
    name="worker-engagement",
    topics=(events.ENGAGEMENT,),
    event_types=frozenset({"PostLiked", "PostUnliked", "CommentCreated"}),
    handle=handle,
    handle_batch=handle_batch,
)
