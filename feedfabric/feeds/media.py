"""Uploads: the original is kept PENDING until worker-media rebuilds it; only READY media are served.

`store_upload` is what uploadMedia and the REST upload call; `processed_path`
is what `/media/{id}` serves (None means 404: pending, rejected, missing).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import asyncpg

from feedfabric import media
from feedfabric.db import media as media_db
from feedfabric.db.outbox import add_event
from feedfabric.db.pool import transaction
from feedfabric.errors import BadInput
from feedfabric.ids import new_id
from feedfabric.settings import Settings


def limits(settings: Settings) -> media.Limits:
    return media.Limits(
        max_bytes=settings.media_max_bytes,
        max_pixels=settings.media_max_pixels,
        max_side=settings.media_max_side,
    )


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


async def store_upload(pool: asyncpg.Pool, settings: Settings, owner_id: uuid.UUID, data: bytes) -> uuid.UUID:
    """Keeps the original bytes and announces them; returns the new media ID (status PENDING).

    The file is written before the row commits, so a committed row always has
    its original; a failed transaction removes the file again.
    """
    if not data:
        raise BadInput("the upload is empty")
    if len(data) > settings.media_max_bytes:
        raise BadInput(f"the upload is over the limit of {settings.media_max_bytes} bytes")
    media_id = new_id()
    path = media.original_path(settings.feedfabric_data_dir, media_id)
    await asyncio.to_thread(_write_atomically, path, data)
    try:
        # Commits here (feeds/__init__.py): the file written above is removed if this commit fails.
        async with transaction(pool) as conn:
            await media_db.create_pending(conn, media_id, owner_id, len(data))
            await add_event(
                conn,
                "MediaUploaded",
                key=str(owner_id),
                data={"mediaId": str(media_id), "ownerId": str(owner_id)},
                shards=settings.outbox_shards,
            )
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return media_id


def processed_path(settings: Settings, media_row: Any) -> Path | None:
    """The file to serve for a media row, or None unless it is READY and its file exists."""
    if media_row is None or media_row["status"] != "ready" or not media_row["content_type"]:
        return None
    ext = media.EXTENSIONS.get(media_row["content_type"])
    if ext is None:
        return None
    path = media.processed_file(settings.feedfabric_data_dir, media_row["id"], ext)
    return path if path.is_file() else None


async def process_pending(conn: asyncpg.Connection, settings: Settings, media_id: uuid.UUID) -> str:
    """Decides one PENDING upload in the caller's transaction; returns the status it ends in.

    A row that is no longer pending is left alone (redelivery). The processed
    file is written before the row turns READY, so READY always has a file; a
    rejected upload's original is deleted, and nothing of it is ever written
    where it could be served.
    """
    row = await media_db.get_one(conn, media_id, for_update=True)
    if row is None:
        return "missing"
    if row["status"] != "pending":
        return str(row["status"])
    original = media.original_path(settings.feedfabric_data_dir, media_id)
    try:
        data = await asyncio.to_thread(original.read_bytes)
    except FileNotFoundError:
        await media_db.mark_rejected(conn, media_id, "missing_original")
        return "rejected"
    result = await asyncio.to_thread(media.process_image, data, limits(settings))
    if isinstance(result, media.Rejected):
        await media_db.mark_rejected(conn, media_id, result.reason)
        original.unlink(missing_ok=True)
        return "rejected"
    target = media.processed_file(settings.feedfabric_data_dir, media_id, result.ext)
    await asyncio.to_thread(_write_atomically, target, result.data)
    await media_db.mark_ready(
        conn,
        media_id,
        content_type=result.content_type,
        width=result.width,
        height=result.height,
        byte_size=len(result.data),
        score=result.score,
    )
    return "ready"
