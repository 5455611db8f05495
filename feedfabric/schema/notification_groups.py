"""Grouped notifications: the types and their root fields (mixed into Query and Mutation)."""

from __future__ import annotations

from datetime import datetime

import strawberry

from feedfabric.core import models
from feedfabric.core.models import SAMPLE_ACTORS
from feedfabric.feeds.notifications import group_cursor
from feedfabric.resolvers import fields, reads, writes
from feedfabric.schema.cost import MAX_ITEMS
from feedfabric.schema.types import (
    Comment,
    ContextInfo,
    Member,
    NotificationKind,
    PageInfo,
    Post,
    comment_if_visible,
    post_if_visible,
)


@strawberry.type(
    description="Mastodon-style grouped notifications: LIKE, REPOST and FOLLOW notifications of one\n"
    "target (the post, or the viewer for FOLLOW) group together; COMMENT and MENTION never group."
)
class NotificationGroup:
    row: strawberry.Private[models.NotificationGroup]

    @strawberry.field(
        description="Stable for the group's life; a new notification of the same kind and target joins it."
    )
    def key(self) -> str:
        return str(self.row.id)

    @strawberry.field
    def kind(self) -> NotificationKind:
        return NotificationKind(self.row.kind)

    @strawberry.field(description="Most recent actors first, at most 8.", metadata={MAX_ITEMS: SAMPLE_ACTORS})
    async def sample_actors(self, info: ContextInfo) -> list[Member]:
        return [Member(row=m) for m in await fields.group_actors(info.context, self.row.id)]

    @strawberry.field
    def actor_count(self) -> int:
        return self.row.actor_count

    @strawberry.field
    def notification_count(self) -> int:
        return self.row.notification_count

    @strawberry.field
    async def post(self, info: ContextInfo) -> Post | None:
        return await post_if_visible(info, self.row.post_id)

    @strawberry.field
    async def comment(self, info: ContextInfo) -> Comment | None:
        return await comment_if_visible(info, self.row.comment_id)

    @strawberry.field
    def latest_at(self) -> datetime:
        return self.row.latest_at

    @strawberry.field
    def read(self) -> bool:
        return self.row.read_at is not None


@strawberry.type
class NotificationGroupEdge:
    cursor: str
    node: NotificationGroup


@strawberry.type
class NotificationGroupConnection:
    edges: list[NotificationGroupEdge]
    page_info: PageInfo
    unread_count: int


@strawberry.type
class NotificationGroupQuery:
    @strawberry.field
    async def notification_groups(
        self, info: ContextInfo, first: int | None = 20, after: str | None = None
    ) -> NotificationGroupConnection:
        page, unread = await reads.notification_groups(info.context, first, after)
        edges = [NotificationGroupEdge(cursor=group_cursor(g), node=NotificationGroup(row=g)) for g in page.items]
        return NotificationGroupConnection(edges=edges, page_info=PageInfo.of(page, edges, after), unread_count=unread)


@strawberry.type
class NotificationGroupMutation:
    @strawberry.mutation(description="Marks the group and every notification in it read.")
    async def mark_notification_group_read(self, info: ContextInfo, key: str) -> NotificationGroup:
        return NotificationGroup(row=await writes.mark_notification_group_read(info.context, key))
