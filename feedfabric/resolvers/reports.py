"""Reports and moderation terms: check the viewer, parse arguments, one transaction per write.

A page of reports is returned with its posts and comments already loaded (one statement each), as
the viewer may see them: a moderator sees the reported post whatever its status, a reporter only
what the visibility rule shows them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from feedfabric.core.ids import parse_id, parse_optional_id
from feedfabric.core.models import Comment, FeedPost, Page
from feedfabric.core.moderation import Report, Term
from feedfabric.db import reports as reports_db
from feedfabric.db.pool import transaction
from feedfabric.feeds import lists, paging
from feedfabric.feeds import moderation_terms as terms_svc
from feedfabric.feeds import reports as reports_svc
from feedfabric.resolvers.context import Context
from feedfabric.resolvers.pages import feed_posts_of

__all__ = [
    "ReportInput",
    "ReportPage",
    "ReportView",
    "add_term",
    "my_reports",
    "queue",
    "remove_term",
    "report",
    "resolve",
    "terms",
]


@dataclass(frozen=True, slots=True)
class ReportView:
    """A report with what it names, as the viewer may see it; `reporter` only for an admin."""

    report: Report
    post: FeedPost | None
    comment: Comment | None
    reporter_visible: bool


@dataclass(frozen=True, slots=True)
class ReportInput:
    post_id: str | None
    comment_id: str | None
    external_user_id: str | None
    reason: str
    note: str | None
    also_block: bool = False


def _is_admin(ctx: Context) -> bool:
    claims = ctx.viewer.claims
    return bool(claims and claims.is_admin)


async def _views(ctx: Context, reports: list[Report]) -> list[ReportView]:
    admin = _is_admin(ctx)
    post_ids = list({r.post_id for r in reports if r.post_id is not None})
    comment_ids = list({r.comment_id for r in reports if r.comment_id is not None})
    posts: dict[uuid.UUID, FeedPost] = {}
    if post_ids:
        if admin:
            rows = await reports_db.reported_posts(ctx.read_pool, post_ids)
        else:
            rows = [p for p in await ctx.loaders.visible_post.load_many(post_ids) if p is not None]
        posts = {p.row.id: p for p in await feed_posts_of(ctx, rows)}
    comments: dict[uuid.UUID, Comment] = {}
    if comment_ids:
        found = [c for c in await ctx.loaders.comment.load_many(comment_ids) if c is not None]
        if not admin:
            shown = await ctx.loaders.visible_post.load_many([c.post_id for c in found])
            found = [c for c, p in zip(found, shown, strict=True) if p is not None]
        comments = {c.id: c for c in found}
    return [
        ReportView(
            r,
            posts.get(r.post_id) if r.post_id else None,
            comments.get(r.comment_id) if r.comment_id else None,
            admin,
        )
        for r in reports
    ]


async def _view(ctx: Context, report: Report) -> ReportView:
    return (await _views(ctx, [report]))[0]


async def report(ctx: Context, given: ReportInput) -> ReportView:
    reporter = ctx.viewer.require_member()
    post_id = parse_optional_id(given.post_id, "postId")
    comment_id = parse_optional_id(given.comment_id, "commentId")
    async with transaction(ctx.pool) as conn:
        target = await reports_svc.target_of(conn, reporter, post_id, comment_id, given.external_user_id)
        filed = await reports_svc.file(conn, reporter, target, given.reason, given.note)
        if given.also_block:
            await reports_svc.also_block(conn, ctx.settings, reporter, target)
    return await _view(ctx, filed)


async def resolve(ctx: Context, report_id: str, action: str) -> ReportView:
    admin = ctx.viewer.require_admin()
    rid = parse_id(report_id, "id")
    async with transaction(ctx.pool) as conn:
        done = await reports_svc.resolve(conn, ctx.settings, admin, rid, action)
    return await _view(ctx, done)


@dataclass(frozen=True, slots=True)
class ReportPage:
    items: list[ReportView]
    next_cursor: str | None


async def _page(ctx: Context, rows: list[Report], limit: int) -> ReportPage:
    page: Page = lists.cut(rows, limit)
    return ReportPage(await _views(ctx, page.items), page.next_cursor)


async def my_reports(ctx: Context, first: int | None, after: str | None) -> ReportPage:
    reporter = ctx.viewer.require_member()
    limit = paging.page_size(first)
    return await _page(ctx, await reports_svc.mine(ctx.read_pool, reporter, paging.cursor(after), limit), limit)


async def queue(ctx: Context, status: str, first: int | None, after: str | None) -> ReportPage:
    ctx.viewer.require_admin()
    limit = paging.page_size(first)
    return await _page(ctx, await reports_svc.queue(ctx.read_pool, status, paging.cursor(after), limit), limit)


async def add_term(ctx: Context, phrase: str) -> Term:
    ctx.viewer.require_admin()
    async with transaction(ctx.pool) as conn:
        return await terms_svc.add(conn, phrase)


async def remove_term(ctx: Context, term_id: str) -> bool:
    ctx.viewer.require_admin()
    async with transaction(ctx.pool) as conn:
        return await terms_svc.remove(conn, parse_id(term_id, "id"))


async def terms(ctx: Context) -> list[Term]:
    ctx.viewer.require_admin()
    return await terms_svc.newest_first(ctx.pool)
