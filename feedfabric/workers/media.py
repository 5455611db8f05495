"""worker-media: each uploaded original scanned, sniffed, rebuilt and scored, then READY or REJECTED."""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.core import events
from feedfabric.core.events import Event
from feedfabric.feeds import media
from feedfabric.workers.base import GroupSpec, PermanentError, WorkerContext

__all__ = ["GROUP"]


async def handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
    if event.type != "MediaUploaded":
        return
    try:
        media_id = uuid.UUID(str(event.data["mediaId"]))
    except (KeyError, ValueError) as exc:
        raise PermanentError(f"MediaUploaded {event.event_id}: bad payload ({exc})") from None
    await media.process_pending(conn, ctx.settings, media_id)


GROUP = GroupSpec(
    name="worker-media",
    topics=(events.MEDIA,),
    event_types=frozenset({"MediaUploaded"}),
    handle=handle,
)
