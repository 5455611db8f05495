"""Muted words on a page, applied while the page is read so that it stays full.

Blocks and mutes are applied by Postgres (feed_posts, visible_posts,
member_hidden), inside each statement's LIMIT; muted words are matched here,
in the API process, by the viewer's compiled matcher (feeds.matcher). A page
whose items the matcher hides reads on past them in batches, each sized by
the share of items the previous ones kept, until it is full or the list ends,
within MAX_ROUNDS reads; past that the page ends short with a cursor where the
reading stopped, so the next page continues from there and nothing is skipped
or repeated. A viewer with no word in the list's context pays nothing.

For posts the matcher sees content and tags and, for a repost, its
original's (from the page's extras, which the page needs anyway); never the
viewer's own.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from feedfabric.core.models import Page, PageExtras, Post
from feedfabric.feeds.relations import Relations

__all__ = ["PostsRead", "hidden_by_words", "items_without_muted_words", "posts_hidden_by_words", "without_muted_words"]

# Reads one page may make (the first included) before it ends short with a cursor.
MAX_ROUNDS = 5
# The largest batch a round asks for.
MAX_BATCH = 200

PostsRead = Callable[[uuid.UUID | None, int], Awaitable[Page]]
ExtrasRead = Callable[[Sequence[uuid.UUID]], Awaitable[PageExtras]]
# One batch's items that stay, and the extras read for them (None: none were needed).
Keep = Callable[[Page], Awaitable[tuple[list[Any], PageExtras | None]]]


def texts_of(post: Post, extras: PageExtras) -> list[str]:
    """What the matcher reads of a post: content and tags, and a repost's original's."""
    texts = [post.content]
    own = extras.extras.get(post.id)
    if own is not None:
        texts.extend(own.tags)
    if post.repost_of is not None:
        original = extras.originals.get(post.repost_of)
        if original is not None:
            texts.append(original.content)
            theirs = extras.extras.get(original.id)
            if theirs is not None:
                texts.extend(theirs.tags)
    return texts


def hidden_by_words(relations: Relations, context: str, post: Post, extras: PageExtras) -> bool:
    return relations.hides_text(texts_of(post, extras), context, post.author_id)


async def read_full(
    read: PostsRead, keep: Keep, key: Callable[[Any], uuid.UUID], before: uuid.UUID | None, limit: int
) -> Page:
    """`read(before, n)` pages, each narrowed by `keep`, until `limit` items (and one more, which says
    whether the list goes on) were kept, the list ends, or MAX_ROUNDS reads were made."""
    kept: list[Any] = []
    extras = PageExtras({}, {})
    sources: list[str] = []
    cursor = before
    ask = limit
    examined = 0
    for _ in range(MAX_ROUNDS):
        page = await read(cursor, ask)
        sources.append(page.source)
        examined += len(page.items)
        stays, loaded = await keep(page)
        kept.extend(stays)
        if loaded is not None and loaded.extras:
            extras = PageExtras({**extras.extras, **loaded.extras}, {**extras.originals, **loaded.originals})
        if len(kept) > limit or (len(kept) == limit and page.next_cursor is not None):
            # Full; more follow (a kept item past the page, or items past the batch, as an unfiltered
            # page would say it: the next page may yet turn out empty).
            items = kept[:limit]
            return _page(items, str(key(items[-1])), sources, extras)
        if page.next_cursor is None:
            return _page(kept, None, sources, extras)
        cursor = key(page.items[-1]) if page.items else uuid.UUID(page.next_cursor)
        # The next batch sized by the share kept so far, so a mostly hidden list fills in few rounds.
        share = max(len(kept) / examined, 0.05) if examined else 1.0
        ask = min(MAX_BATCH, max(limit, math.ceil((limit + 1 - len(kept)) / share)))
    # Out of rounds: what was found, and a cursor where the reading stopped (the next page goes on there).
    return _page(kept, str(cursor), sources, extras)


def _page(items: list[Any], cursor: str | None, sources: list[str], extras: PageExtras) -> Page:
    source = sources[0] if len(set(sources)) == 1 else "redis+postgres"
    return Page(items, cursor, source, extras if extras.extras else None)


async def without_muted_words(
    read: PostsRead,
    extras_of: ExtrasRead,
    relations: Relations,
    context: str,
    before: uuid.UUID | None,
    limit: int,
) -> Page:
    """A feed page, `read(before, limit)`, less the posts the viewer's words hide in `context`, still full."""
    if not relations.matcher.applies(context):
        return await read(before, limit)

    async def keep(page: Page) -> tuple[list[Any], PageExtras | None]:
        items: list[Post] = page.items
        known = page.extras
        if items and (known is None or any(p.id not in known.extras for p in items)):
            known = await extras_of([p.id for p in items])
        if known is None:
            return [], None
        return [p for p in items if not hidden_by_words(relations, context, p, known)], known

    return await read_full(read, keep, lambda p: p.id, before, limit)


async def items_without_muted_words(
    read: PostsRead,
    texts: Callable[[Any], tuple[uuid.UUID, list[str]]],
    key: Callable[[Any], uuid.UUID],
    relations: Relations,
    context: str,
    before: uuid.UUID | None,
    limit: int,
) -> Page:
    """A page of items that carry their own text (comments, mentions): `texts(item)` is (author, texts)."""
    if not relations.matcher.applies(context):
        return await read(before, limit)

    async def keep(page: Page) -> tuple[list[Any], PageExtras | None]:
        stays = []
        for item in page.items:
            author, found = texts(item)
            if not relations.hides_text(found, context, author):
                stays.append(item)
        return stays, None

    return await read_full(read, keep, key, before, limit)


def posts_hidden_by_words(
    extras_of: ExtrasRead, relations: Relations, context: str
) -> Callable[[list[Post]], Awaitable[set[uuid.UUID]]] | None:
    """For a ranked feed that reads on by itself (For You): which of a batch of posts the viewer's words
    hide in `context`, their tags and originals read in one statement; None when no word applies."""
    if not relations.matcher.applies(context):
        return None

    async def hides(posts: list[Post]) -> set[uuid.UUID]:
        extras = await extras_of([p.id for p in posts])
        return {p.id for p in posts if hidden_by_words(relations, context, p, extras)}

    return hides
