"""The Query root."""

from __future__ import annotations

import strawberry

from feedfabric.resolvers import reads
from feedfabric.schema.foryou import ForYouQuery
from feedfabric.schema.media import MediaQuery
from feedfabric.schema.notification_groups import NotificationGroupQuery
from feedfabric.schema.playlists import PlaylistQuery
from feedfabric.schema.reports import ReportQuery
from feedfabric.schema.safety import SafetyQuery
from feedfabric.schema.suggestions import SuggestionQuery
from feedfabric.schema.types import (
    Comment,
    ContextInfo,
    FeedConnection,
    Member,
    MentionConnection,
    MentionEdge,
    Notification,
    NotificationConnection,
    NotificationEdge,
    PageInfo,
    Post,
    member_or_none,
    post_of,
)


@strawberry.type
class Query(PlaylistQuery, MediaQuery, ForYouQuery, NotificationGroupQuery, ReportQuery, SuggestionQuery, SafetyQuery):
    @strawberry.field(description="The signed-in member; null when signed out.")
    async def viewer(self, info: ContextInfo) -> Member | None:
        return member_or_none(await reads.viewer(info.context))

    @strawberry.field
    async def member(
        self, info: ContextInfo, username: str | None = None, external_id: str | None = None
    ) -> Member | None:
        return member_or_none(await reads.member(info.context, username, external_id))

    @strawberry.field
    async def post(self, info: ContextInfo, id: strawberry.ID) -> Post | None:
        row = await reads.post(info.context, id)
        return await post_of(info.context, row) if row is not None else None

    @strawberry.field(description="Following feed: GET /userfeed/home.")
    async def home_feed(self, info: ContextInfo, first: int | None = 20, after: str | None = None) -> FeedConnection:
        return FeedConnection.of(await reads.home_feed(info.context, first, after), after)

    @strawberry.field(description="GET /userfeed/favourites.")
    async def favourites_feed(
        self, info: ContextInfo, first: int | None = 20, after: str | None = None
    ) -> FeedConnection:
        return FeedConnection.of(await reads.favourites_feed(info.context, first, after), after)

    @strawberry.field(
        description="GET /userfeed/tags/{tag}/posts: hashtag or inferred topic. The tag, '#' optional, is read"
        " as a post's hashtag is stored: NFC and case-folded, so any normalisation form or case finds it."
    )
    async def tag_feed(
        self, info: ContextInfo, tag: str, first: int | None = 20, after: str | None = None
    ) -> FeedConnection:
        return FeedConnection.of(await reads.tag_feed(info.context, tag, first, after), after)

    @strawberry.field(description="GET /userfeed/mentions: posts and comments that @mention the viewer.")
    async def mentions_feed(
        self, info: ContextInfo, first: int | None = 20, after: str | None = None
    ) -> MentionConnection:
        page = await reads.mentions_feed(info.context, first, after)
        edges = [
            MentionEdge(
                cursor=m.cursor,
                node=Post.of(m.post) if m.post is not None else Comment(row=m.comment),  # type: ignore[arg-type]
            )
            for m in page.mentions
        ]
        return MentionConnection(edges=edges, page_info=PageInfo.of(page, edges, after))

    @strawberry.field(description="GET /favourites: most recently added first.")
    async def favourites(self, info: ContextInfo) -> list[Member]:
        return [Member(row=m) for m in await reads.favourites(info.context)]

    @strawberry.field
    async def notifications(
        self, info: ContextInfo, first: int | None = 20, after: str | None = None
    ) -> NotificationConnection:
        page, unread = await reads.notifications(info.context, first, after)
        edges = [NotificationEdge(cursor=str(n.id), node=Notification(row=n)) for n in page.items]
        return NotificationConnection(edges=edges, page_info=PageInfo.of(page, edges, after), unread_count=unread)

    @strawberry.field(description="Tags the viewer follows, alphabetical.")
    async def followed_tags(self, info: ContextInfo) -> list[str]:
        return await reads.followed_tags(info.context)
