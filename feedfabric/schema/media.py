"""Photos and similar posts: uploadMedia (GraphQL multipart request spec), media status, similarPosts."""

from __future__ import annotations

import strawberry
from strawberry.file_uploads import Upload

from feedfabric.resolvers import media as media_resolvers
from feedfabric.schema.types import ContextInfo, Media, Post, posts_of


@strawberry.type
class MediaQuery:
    @strawberry.field(description="One media item: READY ones for anyone, PENDING or REJECTED for their owner.")
    async def media(self, info: ContextInfo, id: strawberry.ID) -> Media | None:
        return Media(row=await media_resolvers.media_item(info.context, id))

    @strawberry.field(description="Posts whose MiniLM embeddings are nearest to this post's, best first.")
    async def similar_posts(self, info: ContextInfo, post_id: strawberry.ID, first: int | None = 10) -> list[Post]:
        return await posts_of(info.context, await media_resolvers.similar_posts(info.context, post_id, first))


@strawberry.type
class MediaMutation:
    @strawberry.mutation(description="Stores a photo as PENDING; worker-media makes it READY or REJECTED.")
    async def upload_media(self, info: ContextInfo, file: Upload) -> Media:
        data = await media_resolvers.read_upload(file, info.context.settings.media_max_bytes)
        return Media(row=await media_resolvers.upload(info.context, data))
