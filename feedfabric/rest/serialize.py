"""JSON shapes of the REST routes, loaded through the same per-request DataLoaders as GraphQL."""

from __future__ import annotations

import asyncio
from typing import Any

from feedfabric.context import Context
from feedfabric.db.post_extras import PageExtras
from feedfabric.models import Member, Page, Post
from feedfabric.resolvers.page_loads import load_page


def member(row: Member) -> dict[str, Any]:
    return {
        "id": str(row.id),
        "externalId": row.external_id,
        "username": row.username,
        "displayName": row.display_name,
        "avatarUrl": row.avatar_url,
    }


def media(row: Any) -> dict[str, Any]:
    ready = row["status"] == "ready"
    return {
        "id": str(row["id"]),
        "status": str(row["status"]).upper(),
        "contentType": row["content_type"],
        "width": row["width"],
        "height": row["height"],
        "score": row["score"],
        "url": f"/media/{row['id']}" if ready else None,
        "reason": row["reason"] if row["status"] == "rejected" else None,
    }


def bare_post(row: Post) -> dict[str, Any]:
    return {
        "id": str(row.id),
        "authorId": str(row.author_id),
        "content": row.content,
        "repostOf": str(row.repost_of) if row.repost_of else None,
        "status": row.status.upper(),
        "createdAt": row.created_at.isoformat(),
        "updatedAt": row.updated_at.isoformat() if row.updated_at else None,
    }


async def feed_post(ctx: Context, row: Post, *, depth: int = 0) -> dict[str, Any]:
    loaders = ctx.loaders
    author, tags, photos, likes, comments, liked, original = await asyncio.gather(
        loaders.member.load(row.author_id),
        loaders.tags.load(row.id),
        loaders.media.load(row.id),
        loaders.like_count.load(row.id),
        loaders.comment_count.load(row.id),
        loaders.viewer_liked.load(row.id),
        loaders.visible_post.load(row.repost_of) if row.repost_of and depth == 0 else _none(),
    )
    out = bare_post(row)
    out.update(
        authorUsername=author.username if author else None,
        authorDisplayName=author.display_name if author else None,
        authorAvatarUrl=author.avatar_url if author else None,
        tags=list(tags),
        media=[media(m) for m in photos if m["status"] == "ready"],
        likeCount=int(likes),
        commentCount=int(comments),
        viewerHasLiked=bool(liked),
    )
    if original is not None:
        out["repost"] = await feed_post(ctx, original, depth=1)
    return out


async def _none() -> None:
    return None


def page_post(row: Post, loaded: PageExtras, *, depth: int = 0) -> dict[str, Any]:
    """`feed_post` from a page's extras loaded up front (resolvers.page_loads): the same shape, no awaits."""
    extras = loaded.extras.get(row.id)
    author = extras.author if extras else None
    out = bare_post(row)
    out.update(
        authorUsername=author.username if author else None,
        authorDisplayName=author.display_name if author else None,
        authorAvatarUrl=author.avatar_url if author else None,
        tags=list(extras.tags) if extras else [],
        media=[media(m) for m in extras.media] if extras else [],
        likeCount=int(extras.like_count) if extras else 0,
        commentCount=int(extras.comment_count) if extras else 0,
        viewerHasLiked=bool(extras.viewer_liked) if extras else False,
    )
    original = loaded.originals.get(row.repost_of) if row.repost_of and depth == 0 else None
    if original is not None:
        out["repost"] = page_post(original, loaded, depth=1)
    return out


async def feed_page(ctx: Context, page: Page, *, bare: bool = False) -> dict[str, Any]:
    if bare:
        posts = [bare_post(p) for p in page.items]
    else:
        loaded = await load_page(ctx, page)
        posts = [page_post(p, loaded) for p in page.items]
    return {"posts": posts, "nextCursor": page.next_cursor, "source": page.source}
