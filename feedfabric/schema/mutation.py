"""The Mutation root."""

from __future__ import annotations

import strawberry

from feedfabric.feeds.posts import MAX_MEDIA_PER_POST
from feedfabric.resolvers import writes
from feedfabric.schema.block_import import BlockImportMutation
from feedfabric.schema.cost import MAX_ITEMS
from feedfabric.schema.foryou import ForYouMutation
from feedfabric.schema.media import MediaMutation
from feedfabric.schema.notification_groups import NotificationGroupMutation
from feedfabric.schema.playlists import PlaylistMutation
from feedfabric.schema.reports import ReportMutation
from feedfabric.schema.safety import SafetyMutation
from feedfabric.schema.suggestions import SuggestionMutation
from feedfabric.schema.types import Comment, ContextInfo, Member, Post, post_of


@strawberry.input
class CreatePostInput:
    content: str
    # Bounded before coercion (feedfabric.schema.input_bounds): a post's media limit.
    media_ids: list[strawberry.ID] | None = strawberry.field(default=None, metadata={MAX_ITEMS: MAX_MEDIA_PER_POST})


@strawberry.type
class Mutation(
    PlaylistMutation,
    MediaMutation,
    ForYouMutation,
    NotificationGroupMutation,
    ReportMutation,
    SuggestionMutation,
    SafetyMutation,
    BlockImportMutation,
):
    @strawberry.mutation(description="Create or update the signed-in member's profile (sub of the token = externalId).")
    async def upsert_profile(
        self, info: ContextInfo, username: str, display_name: str, avatar_url: str | None = None
    ) -> Member:
        return Member(row=await writes.upsert_profile(info.context, username, display_name, avatar_url))

    @strawberry.mutation
    async def create_post(self, info: ContextInfo, input: CreatePostInput) -> Post:
        return await post_of(info.context, await writes.create_post(info.context, input.content, input.media_ids))

    @strawberry.mutation
    async def repost(self, info: ContextInfo, post_id: strawberry.ID) -> Post:
        return await post_of(info.context, await writes.repost(info.context, post_id))

    @strawberry.mutation
    async def update_post(self, info: ContextInfo, id: strawberry.ID, content: str) -> Post:
        return await post_of(info.context, await writes.update_post(info.context, id, content))

    @strawberry.mutation
    async def delete_post(self, info: ContextInfo, id: strawberry.ID) -> bool:
        return await writes.delete_post(info.context, id)

    @strawberry.mutation(description="PUT /follows/{externalUserId}; idempotent.")
    async def follow(self, info: ContextInfo, external_user_id: str) -> Member:
        return Member(row=await writes.follow(info.context, external_user_id))

    @strawberry.mutation(description="DELETE /follows/{externalUserId}; idempotent.")
    async def unfollow(self, info: ContextInfo, external_user_id: str) -> Member:
        return Member(row=await writes.unfollow(info.context, external_user_id))

    @strawberry.mutation
    async def follow_tag(self, info: ContextInfo, tag: str) -> bool:
        return await writes.follow_tag(info.context, tag, on=True)

    @strawberry.mutation
    async def unfollow_tag(self, info: ContextInfo, tag: str) -> bool:
        return await writes.follow_tag(info.context, tag, on=False)

    @strawberry.mutation(description="PUT /favourites/{externalUserId}; the 31st is FAVOURITE_LIMIT_REACHED.")
    async def add_favourite(self, info: ContextInfo, external_user_id: str) -> Member:
        return Member(row=await writes.add_favourite(info.context, external_user_id))

    @strawberry.mutation
    async def remove_favourite(self, info: ContextInfo, external_user_id: str) -> Member:
        return Member(row=await writes.remove_favourite(info.context, external_user_id))

    @strawberry.mutation
    async def like_post(self, info: ContextInfo, post_id: strawberry.ID) -> Post:
        return await post_of(info.context, await writes.like(info.context, post_id, on=True))

    @strawberry.mutation
    async def unlike_post(self, info: ContextInfo, post_id: strawberry.ID) -> Post:
        return await post_of(info.context, await writes.like(info.context, post_id, on=False))

    @strawberry.mutation
    async def add_comment(self, info: ContextInfo, post_id: strawberry.ID, content: str) -> Comment:
        return Comment(row=await writes.add_comment(info.context, post_id, content))

    @strawberry.mutation
    async def mark_notifications_read(self, info: ContextInfo, up_to: strawberry.ID | None = None) -> int:
        return await writes.mark_notifications_read(info.context, up_to)

    @strawberry.mutation(description="Moderation: the token must carry role=admin.")
    async def hold_post(self, info: ContextInfo, id: strawberry.ID) -> Post:
        return await post_of(info.context, await writes.hold_post(info.context, id, held=True))

    @strawberry.mutation
    async def release_post(self, info: ContextInfo, id: strawberry.ID) -> Post:
        return await post_of(info.context, await writes.hold_post(info.context, id, held=False))

    @strawberry.mutation
    async def suspend_member(self, info: ContextInfo, external_user_id: str) -> Member:
        return Member(row=await writes.suspend_member(info.context, external_user_id, suspended=True))

    @strawberry.mutation
    async def unsuspend_member(self, info: ContextInfo, external_user_id: str) -> Member:
        return Member(row=await writes.suspend_member(info.context, external_user_id, suspended=False))
