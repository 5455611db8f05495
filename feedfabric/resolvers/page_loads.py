"""A feed page's extras, loaded once for REST and GraphQL alike (db.post_extras: one statement).

Both paths serialise the same page, so they share the one load instead of
each going through seven DataLoaders (one statement and one pool round trip
apiece, plus a future per post per kind).
"""

from __future__ import annotations

from feedfabric.context import Context
from feedfabric.db import post_extras
from feedfabric.models import Page, PageExtras


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
