"""The playlist fields of Query and Mutation (mixed into the roots); the playlist types are in schema.types."""

from __future__ import annotations

import strawberry

from feedfabric.resolvers import playlists as resolve
from feedfabric.schema.types import ContextInfo, Playlist, PlaylistItem


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
