"""worker-events: fan-out on write of PostCreated, timeline rebuilds on MemberReturned, on
MemberFollowed the author's posts merged into the follower's timeline, and on MemberUnfollowed and
TagUnfollowed what the follower no longer follows taken out of it (feeds.timelines owns each rule).
"""

from __future__ import annotations

import time
import uuid

import asyncpg

from feedfabric.core import metrics
from feedfabric.core.events import MEMBERS, POSTS, Event
from feedfabric.feeds import timelines
from feedfabric.workers.base import GroupSpec, PermanentError, WorkerContext

__all__ = ["GROUP", "handle"]


def _uuid(event: Event, field: str) -> uuid.UUID:
    raw = event.data.get(field) or event.key
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        raise PermanentError(f"{event.type} {event.event_id}: {field} {raw!r} is not an ID") from None


async def handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
    # Settle this Redis run before writing to it (its own transaction), so a later restart is noticed.
    await timelines.serving_floor(ctx.pool, ctx.redis)
    if event.type == "PostCreated":
        started = time.perf_counter()
        result = await timelines.fan_out(conn, ctx.redis, ctx.settings, _uuid(event, "postId"), ctx.tracer)
        if result is None:
            raise PermanentError(f"PostCreated {event.event_id}: post {event.key} does not exist")
        metrics.observe_fanout(started, result.pushed)
    elif event.type == "MemberReturned":
        await timelines.rebuild(conn, ctx.redis, ctx.settings, _uuid(event, "memberId"))
    elif event.type == "MemberFollowed":
        await timelines.merge(conn, ctx.redis, ctx.settings, _uuid(event, "followerId"), _uuid(event, "memberId"))
    elif event.type in ("MemberUnfollowed", "TagUnfollowed"):
        await timelines.unmerge(conn, ctx.redis, _uuid(event, "followerId"))


GROUP = GroupSpec(
    name="worker-events",
    topics=(POSTS, MEMBERS),
    event_types=frozenset({"PostCreated", "MemberReturned", "MemberFollowed", "MemberUnfollowed", "TagUnfollowed"}),
    handle=handle,
)
