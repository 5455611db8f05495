"""The one way a feed post is assembled: a post row and its page's extras make a FeedPost.

GraphQL (schema.types.FeedConnection) and REST (rest.serialize) render the
FeedPost this builds, so the two APIs cannot disagree on what a feed post
holds: which author, which media, which counts, which original of a repost.
"""

from __future__ import annotations

from collections.abc import Iterable

from feedfabric.core.models import FeedPost, PageExtras, Post

__all__ = ["feed_post", "feed_posts"]


def feed_post(row: Post, loaded: PageExtras, *, with_original: bool = True) -> FeedPost:
    """`row` as its feed shows it. A post the extras do not cover (gone since the page was read) gets
    no author and zero counts rather than failing the page."""
    extras = loaded.extras.get(row.id)
    original_row = loaded.originals.get(row.repost_of) if with_original and row.repost_of is not None else None
    return FeedPost(
        row=row,
        author=extras.author if extras else None,
        tags=list(extras.tags) if extras else [],
        media=list(extras.media) if extras else [],
        like_count=int(extras.like_count) if extras else 0,
        comment_count=int(extras.comment_count) if extras else 0,
        viewer_liked=bool(extras.viewer_liked) if extras else False,
        original=feed_post(original_row, loaded, with_original=False) if original_row is not None else None,
    )


def feed_posts(rows: Iterable[Post], loaded: PageExtras) -> list[FeedPost]:
    return [feed_post(row, loaded) for row in rows]
