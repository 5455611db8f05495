"""Finished pages for the request's viewer and read pool (feeds.pages finishes them), and the mentions
feed's items, whose comments come through the request's DataLoaders."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from feedfabric.core.models import FeedPage, FeedPost, Mention, MentionsPage, Page, Post
from feedfabric.feeds import pages as feed_pages
from feedfabric.feeds.feed_posts import feed_post
from feedfabric.resolvers.context import Context

__all__ = ["feed_posts_of"]


def viewer_id(ctx: Context) -> uuid.UUID | None:
    """The viewer the loaders would use (never raises)."""
    member = ctx.viewer_result.viewer.member
    return member.id if member else None


async def finished(ctx: Context, page: Page) -> FeedPage:
    """A page of post rows as the finished page both APIs render."""
    return await feed_pages.finished(ctx.read_pool, viewer_id(ctx), page)


async def feed_posts_of(ctx: Context, rows: Sequence[Post]) -> list[FeedPost]:
    """Posts that are not a feed page (a mentions page's posts), built the same way, in one statement."""
    return await feed_pages.load_feed_posts(ctx.read_pool, viewer_id(ctx), Page(list(rows), None))


async def feed_post_of(ctx: Context, row: Post) -> FeedPost:
    """One post as feeds show it, wherever it is reached; the request's concurrent asks share one statement
    (Loaders.post_extras)."""
    return feed_post(row, await ctx.loaders.post_extras.load(row.id))


async def mentions(ctx: Context, page: Page) -> MentionsPage:
    """The mentions feed's items: each post as feeds show it, each comment with its author; a fixed number
    of statements for any page size. An item gone since the page was read is left out."""
    loaders = ctx.loaders
    post_rows, comments = await asyncio.gather(
        loaders.visible_post.load_many([i["post_id"] for i in page.items if i["comment_id"] is None]),
        loaders.comment.load_many([i["comment_id"] for i in page.items if i["comment_id"] is not None]),
    )
    posts = {p.row.id: p for p in await feed_posts_of(ctx, [r for r in post_rows if r is not None])}
    found = {c.id: c for c in comments if c is not None}
    authors = {m.id: m for m in await loaders.member.load_many([c.author_id for c in found.values()]) if m}
    items: list[Mention] = []
    for item in page.items:
        cursor = str(item["item_id"])
        if item["comment_id"] is None:
            post = posts.get(item["post_id"])
            if post is not None:
                items.append(Mention(cursor, post=post))
            continue
        comment = found.get(item["comment_id"])
        author = authors.get(comment.author_id) if comment is not None else None
        if comment is not None and author is not None:
            items.append(Mention(cursor, comment=comment, comment_author=author))
    return MentionsPage(items, page.next_cursor, page.source)
