"""Uploads: the original is kept PENDING until worker-media rebuilds it; only READY media are served.

`store_upload` is what uploadMedia and the REST upload call; `processed_path`
is what `/media/{id}` serves (None means 404: pending, rejected, missing).
An original lives only while its upload is pending: it is deleted as soon as
the rebuilt copy is written (READY) or the upload is rejected. A member's
stored bytes (pending originals plus rebuilt files) are bounded by
MEDIA_QUOTA_BYTES.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg

from feedfabric.core.errors import BadInput, QuotaExceeded
from feedfabric.core.ids import new_id
from feedfabric.core.settings import Settings
from feedfabric.db import media as media_db
from feedfabric.db.outbox import add_event
from feedfabric.db.pool import transaction
from feedfabric.feeds import photos as media

__all__ = ["process_pending", "processed_path", "store_upload", "sweep_originals"]


def limits(settings: Settings) -> media.Limits:
    return media.Limits(
        max_bytes=settings.media_max_bytes,
        max_pixels=settings.media_max_pixels,
        max_side=settings.media_max_side,
        decode_bytes=settings.media_decode_max_bytes,
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
    its original; a failed transaction removes the file again. The quota is
    checked before the write (no disk spent on a refused upload) and again
    under the member's usage lock (two uploads at once cannot both pass).
    """
    if not data:
        raise BadInput("the upload is empty")
    if len(data) > settings.media_max_bytes:
        raise BadInput(f"the upload is over the limit of {settings.media_max_bytes} bytes")
    _check_quota(settings, await media_db.usage(pool, owner_id), len(data))
    media_id = new_id()
    path = media.original_path(settings.feedfabric_data_dir, media_id)
    await asyncio.to_thread(_write_atomically, path, data)
    try:
        # Commits here (feeds/__init__.py): the file written above is removed if this commit fails.
        async with transaction(pool) as conn:
            _check_quota(settings, await media_db.locked_usage(conn, owner_id), len(data))
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


def _check_quota(settings: Settings, used: int, adding: int) -> None:
    if used + adding > settings.media_quota_bytes:
        raise QuotaExceeded(
            f"this upload of {adding} bytes would pass your media quota of {settings.media_quota_bytes} bytes"
            f" ({used} used)"
        )


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
    file is written before the row turns READY, so READY always has a file; the
    original is then deleted. A rejected upload's original is deleted, and
    nothing of it is ever written where it could be served. When the
    transaction fails after the original went, the row is still pending and
    its redelivery rebuilds from the rebuilt copy (already safe; rebuilding it
    again changes nothing that matters).
    """
    row = await media_db.get_one(conn, media_id, for_update=True)
    if row is None:
        return "missing"
    if row["status"] != "pending":
        return str(row["status"])
    original = media.original_path(settings.feedfabric_data_dir, media_id)
    data = await asyncio.to_thread(_source_bytes, settings, media_id)
    if data is None:
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
    original.unlink(missing_ok=True)
    return "ready"


def _source_bytes(settings: Settings, media_id: uuid.UUID) -> bytes | None:
    """The upload's original, or failing that an earlier attempt's rebuilt copy; None when neither exists."""
    candidates = [media.original_path(settings.feedfabric_data_dir, media_id)] + [
        media.processed_file(settings.feedfabric_data_dir, media_id, ext) for ext in media.CONTENT_TYPES
    ]
    for path in candidates:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            continue
    return None


ORPHAN_AFTER_S = 3600.0


async def sweep_originals(
    conn: asyncpg.Connection, settings: Settings, *, orphan_after_s: float = ORPHAN_AFTER_S
) -> int:
    """Deletes originals nothing will read again; returns how many.

    That is the original of an upload that is no longer pending (left by a
    version that kept originals, or by a crash between the commit and the
    delete), and a file with no row at all once it is older than
    `orphan_after_s` (its upload's transaction failed; a younger one may be
    an upload whose row is about to commit). A step of `feedfabric maintain`.
    """
    folder = media.original_path(settings.feedfabric_data_dir, uuid.uuid4()).parent
    files = await asyncio.to_thread(lambda: list(folder.iterdir()) if folder.is_dir() else [])
    by_id: dict[uuid.UUID, Path] = {}
    for path in files:
        try:
            by_id[uuid.UUID(path.name)] = path
        except ValueError:
            continue
    if not by_id:
        return 0
    rows = await media_db.get_media(conn, list(by_id))
    cutoff = time.time() - orphan_after_s
    doomed = [
        path
        for media_id, path in by_id.items()
        if (media_id in rows and rows[media_id]["status"] != "pending")
        or (media_id not in rows and _mtime(path) < cutoff)
    ]
    for path in doomed:
        path.unlink(missing_ok=True)
    return len(doomed)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return float("inf")
