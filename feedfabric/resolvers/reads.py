"""Reads: members, posts and the feeds."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from feedfabric.core import metrics
from feedfabric.core.errors import BadInput
from feedfabric.core.ids import parse_id, parse_optional_id
from feedfabric.core.models import FeedPage, Member, MentionsPage, Page, Post
from feedfabric.db import comments as comments_db
from feedfabric.db import favourites as favourites_db
from feedfabric.db import members as members_db
from feedfabric.db import notifications as notifications_db
from feedfabric.db import post_extras
from feedfabric.feeds import home, lists, paging
from feedfabric.feeds import members as members_svc
from feedfabric.feeds import notifications as notifications_svc
from feedfabric.feeds import playlists as playlists_svc
from feedfabric.feeds.filtering import PostsRead, items_without_muted_words, without_muted_words
from feedfabric.resolvers import pages
from feedfabric.resolvers.context import Context

__all__ = [
    "comments",
    "favourites",
    "favourites_feed",
    "followed_tags",
    "followers",
    "following",
    "home_feed",
    "member",
    "member_feed",
    "member_posts",
    "mentions_feed",
    "notification_groups",
    "notifications",
    "playlists",
    "post",
    "tag_feed",
    "viewer",
]


async def viewer(ctx: Context) -> Member | None:
    return ctx.viewer.member


async def member(ctx: Context, username: str | None, external_id: str | None) -> Member | None:
    ctx.viewer  # a refused token is an error even here
    if (username is None) == (external_id is None):
        raise BadInput("give exactly one of username or externalId")
    for value in (username, external_id):
        if value is not None and ("\x00" in value or len(value) > 200):
            raise BadInput("not a valid member reference")
    found = (
        await members_db.by_username(ctx.read_pool, username)
        if username is not None
        else await members_db.by_external_id(ctx.read_pool, external_id or "")
    )
    return found


async def post(ctx: Context, post_id: str) -> Post | None:
    ctx.viewer  # a refused token is an error even here
    return await ctx.loaders.visible_post.load(parse_id(post_id, "post id"))


async def home_feed(ctx: Context, first: int | None, after: str | None) -> FeedPage:
    viewer = ctx.viewer
    member = viewer.require_member()
    before, limit = paging.cursor(after), paging.page_size(first)
    r = ctx.resources
    service = home.HomeFeedService(r.settings, r.pool, r.redis, r.breaker, read_pool=ctx.read_pool)
    finished = await service.finished_page(viewer, member, await ctx.relations(), before, limit)
    metrics.HOME_FEED_PAGES.labels(source=finished.source).inc()
    if r.feed_log is not None:
        r.feed_log.record(member.id, "following", finished)
    return finished


async def favourites_feed(ctx: Context, first: int | None, after: str | None) -> FeedPage:
    member = ctx.viewer.require_member()

    async def read(cursor: uuid.UUID | None, size: int) -> Page:
        return await lists.favourites(ctx.read_pool, member.id, cursor, size)

    page = await _filtered(ctx, read, "FAVOURITES", paging.cursor(after), paging.page_size(first))
    finished = await pages.finished(ctx, page)
    if ctx.resources.feed_log is not None:
        ctx.resources.feed_log.record(member.id, "favourites", finished)
    return finished


async def tag_feed(ctx: Context, tag: str, first: int | None, after: str | None) -> FeedPage:
    viewer = ctx.viewer
    viewer_id = viewer.member.id if viewer.member else None

    async def read(cursor: uuid.UUID | None, size: int) -> Page:
        return await lists.tag(ctx.read_pool, tag, viewer_id, cursor, size)

    page = await _filtered(ctx, read, "TAGS", paging.cursor(after), paging.page_size(first))
    return await pages.finished(ctx, page)


async def _filtered(ctx: Context, read: PostsRead, context: str, before: uuid.UUID | None, limit: int) -> Page:
    """A feed page with the viewer's muted words of `context` applied, still full (feeds.filtering);
    blocks and mutes are in the statements already (feed_posts)."""
    relations = await ctx.relations()
    member = ctx.viewer_result.viewer.member
    viewer_id = member.id if member else None

    async def extras_of(ids: Sequence[uuid.UUID]) -> post_extras.PageExtras:
        return await post_extras.page_extras(ctx.read_pool, ids, viewer_id)

    return await without_muted_words(read, extras_of, relations, context, before, limit)


async def mentions_feed(ctx: Context, first: int | None, after: str | None) -> MentionsPage:
    member = ctx.viewer.require_member()

    async def read(cursor: uuid.UUID | None, size: int) -> Page:
        return await lists.mentions(ctx.read_pool, member.id, cursor, size)

    page = await items_without_muted_words(
        read,
        lambda r: (r["author_id"], [r["content"]]),
        lambda r: r["item_id"],
        await ctx.relations(),
        "MENTIONS",
        paging.cursor(after),
        paging.page_size(first),
    )
    return await pages.mentions(ctx, page)


async def member_posts(
    ctx: Context,
    author: Member,
    *,
    newest_first: bool,
    first: int | None,
    after: str | None,
    gt: str | None,
    gte: str | None,
    lt: str | None,
    lte: str | None,
) -> Page:
    viewer = ctx.viewer
    return await lists.member_posts(
        ctx.read_pool,
        author.id,
        viewer.member.id if viewer.member else None,
        newest_first=newest_first,
        after=paging.cursor(after),
        gt=parse_optional_id(gt, "gt"),
        gte=parse_optional_id(gte, "gte"),
        lt=parse_optional_id(lt, "lt"),
        lte=parse_optional_id(lte, "lte"),
        limit=paging.page_size(first),
    )


async def member_feed(
    ctx: Context,
    author: Member,
    *,
    newest_first: bool,
    first: int | None,
    after: str | None,
    gt: str | None,
    gte: str | None,
    lt: str | None,
    lte: str | None,
) -> FeedPage:
    """The member's own posts as feeds show them (`member_posts` is their bare form)."""
    page = await member_posts(
        ctx, author, newest_first=newest_first, first=first, after=after, gt=gt, gte=gte, lt=lt, lte=lte
    )
    return await pages.finished(ctx, page)


async def comments(ctx: Context, post_id: uuid.UUID, first: int | None, after: str | None) -> Page:
    limit = paging.page_size(first)
    member = ctx.viewer_result.viewer.member
    viewer_id = member.id if member else None

    async def read(cursor: uuid.UUID | None, size: int) -> Page:
        return lists.cut(await comments_db.page(ctx.read_pool, post_id, cursor, size + 1, viewer_id), size)

    return await items_without_muted_words(
        read,
        lambda c: (c.author_id, [c.content]),
        lambda c: c.id,
        await ctx.relations(),
        "COMMENTS",
        paging.cursor(after),
        limit,
    )


async def favourites(ctx: Context) -> list[Member]:
    member = ctx.viewer.require_member()
    return await favourites_db.listed(ctx.read_pool, member.id)


async def notifications(ctx: Context, first: int | None, after: str | None) -> tuple[Page, int]:
    member = ctx.viewer.require_member()
    relations = await ctx.relations()

    async def read(cursor: uuid.UUID | None, size: int) -> Page:
        page = await lists.notifications(ctx.read_pool, member.id, cursor, size)
        if not page.items:
            return page
        # What muted words read of each: its comment, or another member's post (one statement a round).
        texts = await notifications_db.texts(ctx.read_pool, [n.id for n in page.items], member.id)
        return Page([(n, texts.get(n.id, "")) for n in page.items], page.next_cursor, page.source)

    if relations.matcher.applies("NOTIFICATIONS"):
        found = await items_without_muted_words(
            read,
            lambda item: (item[0].actor_id, [item[1]]),
            lambda item: item[0].id,
            relations,
            "NOTIFICATIONS",
            paging.cursor(after),
            paging.page_size(first),
        )
        page = Page([n for n, _ in found.items], found.next_cursor, found.source)
    else:
        page = await lists.notifications(ctx.read_pool, member.id, paging.cursor(after), paging.page_size(first))
    return page, await notifications_db.unread_count(ctx.read_pool, member.id)


async def notification_groups(ctx: Context, first: int | None, after: str | None) -> tuple[Page, int]:
    member = ctx.viewer.require_member()
    relations = await ctx.relations()
    page = await notifications_svc.groups(ctx.read_pool, member, after, paging.page_size(first), relations)
    return page, await notifications_svc.unread_groups(ctx.read_pool, member, relations)


def _viewer_id(ctx: Context) -> uuid.UUID | None:
    member = ctx.viewer.member
    return member.id if member else None


async def followers(ctx: Context, of: Member, first: int | None, after: str | None) -> Page:
    return await members_svc.followers(ctx.read_pool, of, _viewer_id(ctx), after, paging.page_size(first))


async def following(ctx: Context, of: Member, first: int | None, after: str | None) -> Page:
    return await members_svc.following(ctx.read_pool, of, _viewer_id(ctx), after, paging.page_size(first))


async def playlists(ctx: Context, owner: Member, first: int | None, after: str | None) -> Page:
    limit = paging.page_size(first)
    return await playlists_svc.owned(ctx.read_pool, owner, _viewer_id(ctx), paging.cursor(after), limit)


async def followed_tags(ctx: Context) -> list[str]:
    return await members_svc.followed_tags(ctx.read_pool, ctx.viewer.require_member())
