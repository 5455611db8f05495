"""Photos: upload (GraphQL multipart and REST), serving READY files, and similar posts."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from feedfabric.core.errors import BadInput, NotFound
from feedfabric.core.ids import parse_id
from feedfabric.core.models import PageExtras, Post
from feedfabric.db import media as media_db
from feedfabric.db import post_extras
from feedfabric.feeds import embeddings as embeddings_svc
from feedfabric.feeds import media as media_svc
from feedfabric.feeds import paging
from feedfabric.feeds.filtering import posts_hidden_by_words
from feedfabric.resolvers.context import Context

__all__ = ["file_to_serve", "media_item", "read_upload", "similar_posts", "upload"]


async def upload(ctx: Context, data: bytes) -> Any:
    """Stores the original as PENDING; worker-media decides READY or REJECTED."""
    member = ctx.viewer.require_member()
    media_id = await media_svc.store_upload(ctx.pool, ctx.settings, member.id, data)
    async with ctx.pool.acquire() as conn:
        return await media_db.get_one(conn, media_id)


async def read_upload(file: Any, limit: int) -> bytes:
    """Reads at most `limit` bytes of an uploaded file; one byte more is an error, not a truncation."""
    if file is None or not hasattr(file, "read"):
        raise BadInput("send the photo as a multipart file")
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise BadInput(f"the upload is over the limit of {limit} bytes")
    return bytes(data)


async def media_item(ctx: Context, media_id: str) -> Any:
    async with ctx.pool.acquire() as conn:
        row = await media_db.get_one(conn, parse_id(media_id, "media id"))
    member = ctx.viewer.member
    if row is None or (row["status"] != "ready" and (member is None or row["owner_id"] != member.id)):
        raise NotFound("media not found")
    return row


async def file_to_serve(ctx: Context, media_id: str) -> tuple[Path, str]:
    """Only READY media are ever served; anything else is simply not found."""
    try:
        parsed = parse_id(media_id, "media id")
    except BadInput:
        raise NotFound("media not found") from None
    async with ctx.pool.acquire() as conn:
        row = await media_db.get_one(conn, parsed)
    path = media_svc.processed_path(ctx.settings, row)
    if path is None or row is None:
        raise NotFound("media not found")
    return path, str(row["content_type"])


async def similar_posts(ctx: Context, post_id: str, first: int | None) -> list[Post]:
    viewer = ctx.viewer
    size = paging.page_size(first, default=10)  # refused even without Redis: the query cost relies on it
    if ctx.resources.redis is None:
        return []
    viewer_id = viewer.member.id if viewer.member else None
    relations = await ctx.relations()

    async def extras_of(ids: Sequence[uuid.UUID]) -> PageExtras:
        return await post_extras.page_extras(ctx.read_pool, ids, viewer_id)

    # The viewer's muted words of FOR_YOU hide neighbours too: ask for more, keep the first `size` left.
    hides = posts_hidden_by_words(extras_of, relations, "FOR_YOU")
    ids = await embeddings_svc.similar_posts(
        ctx.resources.redis,
        ctx.pool,
        parse_id(post_id, "postId"),
        size if hides is None else min(paging.MAX_PAGE, size * 3),
        viewer_id=viewer_id,
    )
    found = [p for p in await ctx.loaders.visible_post.load_many(ids) if p is not None]
    if hides is not None and found:
        hidden = await hides(found)
        found = [p for p in found if p.id not in hidden][:size]
    return found
