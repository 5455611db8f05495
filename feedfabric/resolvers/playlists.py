"""Playlist reads and writes: check the viewer, parse arguments, one transaction per write.

A write whose new key outgrew the bound schedules that playlist's rebalance
here, after its transaction has committed.
"""

from __future__ import annotations

import uuid

from feedfabric.core.ids import parse_id, parse_optional_id
from feedfabric.core.models import Page, Playlist, PlaylistItem
from feedfabric.db.pool import transaction
from feedfabric.feeds import paging
from feedfabric.feeds import playlists as playlists_svc
from feedfabric.resolvers.context import Context

__all__ = ["add", "create", "follow", "item_cursor", "items", "move", "playlist", "remove"]

item_cursor = playlists_svc.item_cursor


def _viewer_id(ctx: Context) -> uuid.UUID | None:
    member = ctx.viewer.member  # a refused token is an error even here
    return member.id if member else None


async def playlist(ctx: Context, playlist_id: str) -> Playlist | None:
    viewer_id = _viewer_id(ctx)
    return await playlists_svc.get(ctx.read_pool, parse_id(playlist_id, "playlist id"), viewer_id)


async def items(ctx: Context, playlist_row: Playlist, first: int | None, after: str | None) -> Page:
    """The owner comes through the request's member loader, the batch Playlist.owner reads too."""
    viewer_id = _viewer_id(ctx)
    limit = paging.page_size(first)
    cursor = playlists_svc.parse_item_cursor(after)
    owner = await ctx.loaders.member.load(playlist_row.owner_id)
    if owner is None:
        return Page([], None, "postgres")
    return await playlists_svc.items(ctx.read_pool, playlist_row.id, owner, viewer_id, cursor, limit)


async def create(ctx: Context, name: str) -> Playlist:
    owner = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        return await playlists_svc.create(conn, owner, name)


def _after_commit(ctx: Context, item: PlaylistItem) -> PlaylistItem:
    if playlists_svc.needs_rebalance(item):
        ctx.resources.rebalances.schedule(ctx.pool, item.playlist_id)
    return item


async def add(
    ctx: Context, playlist_id: str, post_id: str, after_item_id: str | None, before_item_id: str | None
) -> PlaylistItem:
    owner = ctx.viewer.require_member()
    pid = parse_id(playlist_id, "playlistId")
    post = parse_id(post_id, "postId")
    after = parse_optional_id(after_item_id, "afterItemId")
    before = parse_optional_id(before_item_id, "beforeItemId")
    async with transaction(ctx.pool) as conn:
        item = await playlists_svc.add_item(conn, owner, pid, post, after, before)
    return _after_commit(ctx, item)


async def move(ctx: Context, item_id: str, after_item_id: str | None, before_item_id: str | None) -> PlaylistItem:
    owner = ctx.viewer.require_member()
    iid = parse_id(item_id, "itemId")
    after = parse_optional_id(after_item_id, "afterItemId")
    before = parse_optional_id(before_item_id, "beforeItemId")
    async with transaction(ctx.pool) as conn:
        item = await playlists_svc.move_item(conn, owner, iid, after, before)
    return _after_commit(ctx, item)


async def remove(ctx: Context, item_id: str) -> bool:
    owner = ctx.viewer.require_member()
    iid = parse_id(item_id, "itemId")
    async with transaction(ctx.pool) as conn:
        return await playlists_svc.remove_item(conn, owner, iid)


async def follow(ctx: Context, playlist_id: str, on: bool) -> Playlist:
    member = ctx.viewer.require_member()
    pid = parse_id(playlist_id, "playlistId")
    async with transaction(ctx.pool) as conn:
        return await playlists_svc.follow(conn, member, pid, on=on)
