"""A feed page's extras, loaded once for REST and GraphQL alike (db.post_extras: one statement).

Both paths serialise the same page, so they share the one load instead of
each going through seven DataLoaders (one statement and one pool round trip
apiece, plus a future per post per kind).
"""

from __future__ import annotations

from collections.abc import Sequence

from feedfabric.context import Context
from feedfabric.db import post_extras
from feedfabric.models import Post


async def load_page(ctx: Context, posts: Sequence[Post]) -> post_extras.PageExtras:
    """Extras of `posts` and of their visible originals, as the request's viewer sees them."""
    if not posts:
        return post_extras.PageExtras({}, {})
    member = ctx.viewer_result.viewer.member  # the viewer the loaders would use (never raises)
    return await post_extras.page_extras(ctx.pool, [p.id for p in posts], member.id if member else None)
