"""Playlist types and the playlist fields of Query and Mutation (mixed into the roots).

Types wrap domain rows; every field that needs more than the row loads through
the request's DataLoaders, so a page of items costs a fixed number of queries.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry

from feedfabric import models
from feedfabric.resolvers import playlists as resolve
from feedfabric.schema.types import ContextInfo, Member, PageInfo, Post, visible_post


@strawberry.enum
class PlaylistKind(Enum):
    USER = "user"
    LIKED = "liked"


@strawberry.type
class PlaylistItem:
    row: strawberry.Private[models.PlaylistItem]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.row.id))

    @strawberry.field
    async def post(self, info: ContextInfo) -> Post:
        # Pages list only items the viewer may see; a mutation's result may name a post hidden since.
        return await visible_post(info, self.row.post_id)

    @strawberry.field(description="The item's fractional (LexoRank-style) sort key.")
    def rank(self) -> str:
        return self.row.rank

    @strawberry.field
    def added_at(self) -> datetime:
        return self.row.added_at


@strawberry.type
class PlaylistItemEdge:
    cursor: str
    node: PlaylistItem


@strawberry.type
class PlaylistItemConnection:
    edges: list[PlaylistItemEdge]
    page_info: PageInfo


@strawberry.type
class Playlist:
    row: strawberry.Private[models.Playlist]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.row.id))

    @strawberry.field
    async def owner(self, info: ContextInfo) -> Member:
        row = await info.context.loaders.member.load(self.row.owner_id)
        assert row is not None
        return Member(row=row)

    @strawberry.field
    def name(self) -> str:
        return self.row.name

    @strawberry.field
    def kind(self) -> PlaylistKind:
        return PlaylistKind(self.row.kind)

    @strawberry.field
    async def follower_count(self, info: ContextInfo) -> int:
        return int(await info.context.loaders.playlist_followers.load(self.row.id))

    @strawberry.field
    async def viewer_follows(self, info: ContextInfo) -> bool:
        return bool(await info.context.loaders.viewer_follows_playlist.load(self.row.id))

    @strawberry.field(description="In playlist order (fractional rank), first to last.")
    async def items(
        self, info: ContextInfo, first: int | None = 20, after: str | None = None
    ) -> PlaylistItemConnection:
        page = await resolve.items(info.context, self.row, first, after)
        edges = [PlaylistItemEdge(cursor=_cursor(i), node=PlaylistItem(row=i)) for i in page.items]
        return PlaylistItemConnection(edges=edges, page_info=PageInfo.of(page, edges, after))


@strawberry.type
class PlaylistEdge:
    cursor: str
    node: Playlist


@strawberry.type
class PlaylistConnection:
    edges: list[PlaylistEdge]
    page_info: PageInfo

    @classmethod
    def of(cls, page: models.Page, after: str | None) -> PlaylistConnection:
        edges = [PlaylistEdge(cursor=str(p.id), node=Playlist(row=p)) for p in page.items]
        return cls(edges=edges, page_info=PageInfo.of(page, edges, after))


def _cursor(item: models.PlaylistItem) -> str:
    return resolve.item_cursor(item)


async def liked_playlist_of(info: ContextInfo, member: models.Member) -> Playlist:
    """Member.likedPlaylist: batched per request, created on first use."""
    info.context.viewer  # a refused token is an error even here
    row = await info.context.loaders.liked_playlist.load(member.id)
    assert row is not None
    return Playlist(row=row)


@strawberry.type
class PlaylistQuery:
    @strawberry.field
    async def playlist(self, info: ContextInfo, id: strawberry.ID) -> Playlist | None:
        row = await resolve.playlist(info.context, id)
        return Playlist(row=row) if row is not None else None


@strawberry.type
class PlaylistMutation:
    @strawberry.mutation
    async def create_playlist(self, info: ContextInfo, name: str) -> Playlist:
        return Playlist(row=await resolve.create(info.context, name))

    @strawberry.mutation(description="Place the post between two existing items (both null: at the end).")
    async def add_to_playlist(
        self,
        info: ContextInfo,
        playlist_id: strawberry.ID,
        post_id: strawberry.ID,
        after_item_id: strawberry.ID | None = None,
        before_item_id: strawberry.ID | None = None,
    ) -> PlaylistItem:
        return PlaylistItem(row=await resolve.add(info.context, playlist_id, post_id, after_item_id, before_item_id))

    @strawberry.mutation(description="Moves one item; no other row of the playlist is rewritten.")
    async def move_playlist_item(
        self,
        info: ContextInfo,
        item_id: strawberry.ID,
        after_item_id: strawberry.ID | None = None,
        before_item_id: strawberry.ID | None = None,
    ) -> PlaylistItem:
        return PlaylistItem(row=await resolve.move(info.context, item_id, after_item_id, before_item_id))

    @strawberry.mutation
    async def remove_playlist_item(self, info: ContextInfo, item_id: strawberry.ID) -> bool:
        return await resolve.remove(info.context, item_id)

    @strawberry.mutation
    async def follow_playlist(self, info: ContextInfo, playlist_id: strawberry.ID) -> Playlist:
        return Playlist(row=await resolve.follow(info.context, playlist_id, on=True))

    @strawberry.mutation
    async def unfollow_playlist(self, info: ContextInfo, playlist_id: strawberry.ID) -> Playlist:
        return Playlist(row=await resolve.follow(info.context, playlist_id, on=False))
