"""Writes: each runs in one transaction, the boundary that commits."""

from __future__ import annotations

from collections.abc import Sequence

from feedfabric.core.ids import parse_id, parse_optional_id
from feedfabric.core.models import Comment, Member, NotificationGroup, Post
from feedfabric.db.pool import transaction
from feedfabric.feeds import members as members_svc
from feedfabric.feeds import notifications, reactions, suggestions
from feedfabric.feeds import posts as posts_svc
from feedfabric.resolvers.context import Context

__all__ = [
    "add_comment",
    "add_favourite",
    "create_post",
    "delete_post",
    "follow",
    "follow_tag",
    "hold_post",
    "like",
    "mark_notification_group_read",
    "mark_notifications_read",
    "remove_favourite",
    "repost",
    "suspend_member",
    "unfollow",
    "update_post",
    "upsert_profile",
]


async def upsert_profile(ctx: Context, username: str, display_name: str, avatar_url: str | None) -> Member:
    claims = ctx.viewer.require_claims()
    async with transaction(ctx.pool) as conn:
        return await members_svc.upsert_profile(conn, claims.external_id, username, display_name, avatar_url)


async def create_post(ctx: Context, content: str, media_ids: Sequence[str] | None) -> Post:
    author = ctx.viewer.require_member()
    ids = [parse_id(m, "media id") for m in media_ids or ()]
    async with transaction(ctx.pool) as conn:
        post = await posts_svc.create_post(conn, ctx.settings, author, content, ids)
    if not ids:
        ctx.loaders.post_extras.prime(post.id, posts_svc.fresh_extras(post, author))
    return post


async def repost(ctx: Context, post_id: str) -> Post:
    author = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        return await posts_svc.repost(conn, ctx.settings, author, parse_id(post_id, "postId"))


async def update_post(ctx: Context, post_id: str, content: str) -> Post:
    author = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        return await posts_svc.update_post(conn, ctx.settings, author, parse_id(post_id, "id"), content)


async def delete_post(ctx: Context, post_id: str) -> bool:
    viewer = ctx.viewer
    actor = viewer.require_member()
    is_admin = bool(viewer.claims and viewer.claims.is_admin)
    async with transaction(ctx.pool) as conn:
        return await posts_svc.delete_post(conn, ctx.settings, actor, parse_id(post_id, "id"), as_admin=is_admin)


async def follow(ctx: Context, external_id: str) -> Member:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        followed = await members_svc.follow(conn, ctx.settings, member, external_id)
    await suggestions.forget(ctx.resources.redis, member.id)  # friends of friends change with it
    return followed


async def unfollow(ctx: Context, external_id: str) -> Member:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        return await members_svc.unfollow(conn, ctx.settings, member, external_id)


async def follow_tag(ctx: Context, tag: str, on: bool) -> bool:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        done = await members_svc.follow_tag(conn, ctx.settings, member, tag, on=on)
    await suggestions.forget(ctx.resources.redis, member.id)  # the member's topics change with it
    return done


async def add_favourite(ctx: Context, external_id: str) -> Member:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        return await members_svc.add_favourite(conn, ctx.settings, member, external_id)


async def remove_favourite(ctx: Context, external_id: str) -> Member:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        return await members_svc.remove_favourite(conn, member, external_id)


async def like(ctx: Context, post_id: str, on: bool) -> Post:
    member = ctx.viewer.require_member()
    pid = parse_id(post_id, "postId")
    async with transaction(ctx.pool) as conn:
        if on:
            return await reactions.like(conn, ctx.settings, member, pid)
        return await reactions.unlike(conn, ctx.settings, member, pid)


async def add_comment(ctx: Context, post_id: str, content: str) -> Comment:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        return await reactions.comment(conn, ctx.settings, member, parse_id(post_id, "postId"), content)


async def mark_notifications_read(ctx: Context, up_to: str | None) -> int:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        return await notifications.mark_read(conn, member, parse_optional_id(up_to, "upTo"))


async def mark_notification_group_read(ctx: Context, key: str) -> NotificationGroup:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        return await notifications.mark_group_read(conn, member, key)


async def hold_post(ctx: Context, post_id: str, held: bool) -> Post:
    ctx.viewer.require_admin()
    async with transaction(ctx.pool) as conn:
        return await posts_svc.set_held(conn, ctx.settings, parse_id(post_id, "id"), held)


async def suspend_member(ctx: Context, external_id: str, suspended: bool) -> Member:
    """A suspension closes the member's sockets on this process before it is answered, so nothing more
    is delivered to them from here (docs/suspension.md: other processes within WS_RIGHTS_CHECK_SECONDS)."""
    ctx.viewer.require_admin()
    async with transaction(ctx.pool) as conn:
        member = await members_svc.set_suspended(conn, external_id, suspended)
    if suspended:
        await ctx.resources.sessions.close_member(member.id, "account suspended")
    return member
