"""A feed page's posts as FeedPosts, their extras loaded once for REST and GraphQL alike (db.post_extras).

Both paths render the same page, so they share the one load (one statement)
instead of each going through seven DataLoaders (one statement and one pool
round trip apiece, plus a future per post per kind).
"""

from __future__ import annotations

from collections.abc import Sequence

from feedfabric.core.models import FeedPost, Page, PageExtras, Post
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


async def feed_posts_of(ctx: Context, rows: Sequence[Post]) -> list[FeedPost]:
    """Posts that are not a feed page (a mentions page's posts), built the same way, in one statement."""
    return await load_feed_posts(ctx, Page(list(rows), None))


async def feed_post_of(ctx: Context, row: Post) -> FeedPost:
    """One post as feeds show it, wherever it is reached; the request's concurrent asks share one statement
    (Loaders.post_extras)."""
    return feed_post(row, await ctx.loaders.post_extras.load(row.id))
