"""The fields of nested types that read data, each batched across the request by its DataLoaders.

A GraphQL type only maps: where a field needs more than its object holds (a
member's counts, a comment's author, a playlist's followers), it calls one
of these, so every read the schema makes goes through the resolvers.
"""

from __future__ import annotations

import uuid

from feedfabric.core.models import Comment, FeedPost, Member, Playlist, Post
from feedfabric.resolvers.context import Context
from feedfabric.resolvers.pages import feed_post_of

__all__ = [
    "existing_member",
    "feed_post",
    "group_actors",
    "is_favourite",
    "liked_playlist",
    "member_counts",
    "mentioned",
    "playlist_followers",
    "viewer_blocks",
    "viewer_follows",
    "viewer_follows_playlist",
    "viewer_mutes",
    "visible_comment",
    "visible_post",
]


async def member_counts(ctx: Context, member_id: uuid.UUID) -> tuple[int, int]:
    """(followers, following)."""
    return await ctx.loaders.member_stats.load(member_id)


async def viewer_follows(ctx: Context, member_id: uuid.UUID) -> bool:
    return bool(await ctx.loaders.viewer_follows.load(member_id))


async def is_favourite(ctx: Context, member_id: uuid.UUID) -> bool:
    return bool(await ctx.loaders.viewer_favourite.load(member_id))


async def viewer_blocks(ctx: Context, member_id: uuid.UUID) -> bool:
    """From the viewer's relations, read once a request (feeds.relations): no statement per member."""
    return (await ctx.relations()).blocks(member_id)


async def viewer_mutes(ctx: Context, member_id: uuid.UUID) -> bool:
    return (await ctx.relations()).mutes(member_id)


async def member(ctx: Context, member_id: uuid.UUID) -> Member | None:
    return await ctx.loaders.member.load(member_id)


async def existing_member(ctx: Context, member_id: uuid.UUID) -> Member:
    """A member a row refers to (an author, an actor, an owner): always there, since members are never
    deleted."""
    found = await ctx.loaders.member.load(member_id)
    if found is None:
        raise LookupError(f"member {member_id} is referred to but missing")
    return found


async def members(ctx: Context, member_ids: list[uuid.UUID]) -> list[Member]:
    return [m for m in await ctx.loaders.member.load_many(member_ids) if m is not None]


async def feed_post(ctx: Context, row: Post) -> FeedPost:
    """A post reached outside a feed page, as feeds show it; concurrent ones share one statement."""
    return await feed_post_of(ctx, row)


async def visible_post(ctx: Context, post_id: uuid.UUID) -> FeedPost | None:
    row = await ctx.loaders.visible_post.load(post_id)
    return await feed_post_of(ctx, row) if row is not None else None


async def visible_comment(ctx: Context, comment_id: uuid.UUID) -> Comment | None:
    """A comment, when the viewer may see the post it is on."""
    row = await ctx.loaders.comment.load(comment_id)
    if row is None or await ctx.loaders.visible_post.load(row.post_id) is None:
        return None
    return row


async def mentioned(ctx: Context, item_id: uuid.UUID) -> list[Member]:
    return await members(ctx, await ctx.loaders.mentions.load(item_id))


async def group_actors(ctx: Context, group_id: uuid.UUID) -> list[Member]:
    return await members(ctx, await ctx.loaders.group_actors.load(group_id))


async def playlist_followers(ctx: Context, playlist_id: uuid.UUID) -> int:
    return int(await ctx.loaders.playlist_followers.load(playlist_id))


async def viewer_follows_playlist(ctx: Context, playlist_id: uuid.UUID) -> bool:
    return bool(await ctx.loaders.viewer_follows_playlist.load(playlist_id))


async def liked_playlist(ctx: Context, owner: Member) -> Playlist:
    """The member's Liked playlist, batched per request, created on first use."""
    ctx.viewer  # a refused token is an error even here
    row = await ctx.loaders.liked_playlist.load(owner.id)
    if row is None:
        raise LookupError(f"no Liked playlist for {owner.id}")
    return row
