"""Finished pages: a feed page's posts as FeedPosts, their extras loaded once, for GraphQL and REST alike.

Both APIs render the same page, so the resolvers build it and the schema and
the REST serializers only map it: one load (one statement, db.post_extras)
instead of each going through DataLoaders of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from feedfabric.core.models import FeedPage, FeedPost, Mention, MentionsPage, Page, PageExtras, Post
from feedfabric.db import post_extras
from feedfabric.feeds.feed_posts import feed_post, feed_posts
from feedfabric.resolvers.context import Context


async def load_page(ctx: Context, page: Page) -> PageExtras:
    """Extras of the page's posts and of their visible originals, as the request's viewer sees them.

    A page whose source read them with its posts (the home feed's first round) carries them; any
    other page, or one with a post they do not cover (a later round, Postgres continuing the page),
    costs one statement.
    """
    if not page.items:
        return PageExtras({}, {})
    known = page.extras
    if known is not None and all(p.id in known.extras for p in page.items):
        return known
    member = ctx.viewer_result.viewer.member  # the viewer the loaders would use (never raises)
    return await post_extras.page_extras(ctx.read_pool, [p.id for p in page.items], member.id if member else None)


async def load_feed_posts(ctx: Context, page: Page) -> list[FeedPost]:
    return feed_posts(page.items, await load_page(ctx, page))


async def finished(ctx: Context, page: Page) -> FeedPage:
    """A page of post rows as the finished page both APIs render."""
    return FeedPage(await load_feed_posts(ctx, page), page.next_cursor, page.source)


async def feed_posts_of(ctx: Context, rows: Sequence[Post]) -> list[FeedPost]:
    """Posts that are not a feed page (a mentions page's posts), built the same way, in one statement."""
    return await load_feed_posts(ctx, Page(list(rows), None))


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
