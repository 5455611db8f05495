"""The object types of the public contract. Fields load through the request's DataLoaders, never SQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Protocol

import strawberry
from strawberry.types import Info

from feedfabric.core import models
from feedfabric.core.errors import NotFound
from feedfabric.feeds.posts import MAX_MEDIA_PER_POST, MAX_MENTIONS_PER_POST
from feedfabric.resolvers import fields, reads
from feedfabric.resolvers import playlists as resolve_playlists
from feedfabric.resolvers.context import Context
from feedfabric.schema.viewer_marks import SAME_FOR_EVERY_VIEWER, shared_values

__all__ = ["Post"]

ContextInfo = Info[Context, None]
# Placeholder default of the fields filled in __post_init__ from `row`; never served.
_FROM_ROW: Any = None
# Post's extras fields are synchronous: on a feed page they answer from the page's FeedPost at once
# (an async resolver costs graphql-core a coroutine and a task per field); elsewhere they return the
# DataLoader's awaitable, which graphql-core awaits the same way.


@strawberry.enum
class MemberStatus(Enum):
    ACTIVE = "active"
    SUSPENDED = "suspended"


@strawberry.enum
class PostStatus(Enum):
    LIVE = "live"
    HELD = "held"
    DELETED = "deleted"


@strawberry.enum
class FeedSource(Enum):
    REDIS = "redis"
    POSTGRES = "postgres"
    REDIS_POSTGRES = "redis+postgres"


@strawberry.enum
class PostOrder(Enum):
    NEWEST = "newest"
    OLDEST = "oldest"


@strawberry.enum
class MediaStatus(Enum):
    PENDING = "pending"
    READY = "ready"
    REJECTED = "rejected"


@strawberry.enum
class NotificationKind(Enum):
    FOLLOW = "follow"
    LIKE = "like"
    COMMENT = "comment"
    MENTION = "mention"
    REPOST = "repost"


class Paged(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


@strawberry.type(
    description="Relay's PageInfo: startCursor and endCursor are the first and last edge's cursors "
    "(null only on an empty page)."
)
class PageInfo:
    has_next_page: bool
    has_previous_page: bool = strawberry.field(
        description="Whether the page was asked for after a cursor (paging runs forward only)."
    )
    start_cursor: str | None
    end_cursor: str | None

    @classmethod
    def of(cls, page: Paged, edges: Sequence[Any], after: str | None = None) -> PageInfo:
        """Cursors of the edges served: an item the page read but could not show still moves `endCursor`
        on only when no edge is left (then it is the page's own next cursor, so a client never stalls)."""
        return cls(
            has_next_page=page.next_cursor is not None,
            has_previous_page=bool(after),
            start_cursor=edges[0].cursor if edges else None,
            end_cursor=edges[-1].cursor if edges else page.next_cursor,
        )


@strawberry.type
class Member:
    """Scalar fields are copied from the row at construction, so they resolve as plain attributes:
    a resolver per field costs Strawberry an Info object and argument parsing each time, which on a
    feed page (20 posts, their authors) was a large share of the GraphQL path's CPU."""

    row: strawberry.Private[models.Member]
    id: strawberry.ID = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    external_id: str = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    username: str = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    display_name: str = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    avatar_url: str | None = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    status: MemberStatus = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)

    def __post_init__(self) -> None:
        row = self.row
        self.id = strawberry.ID(str(row.id))
        self.external_id = row.external_id
        self.username = row.username
        self.display_name = row.display_name
        self.avatar_url = row.avatar_url
        self.status = MemberStatus(row.status)

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    async def follower_count(self, info: ContextInfo) -> int:
        return (await fields.member_counts(info.context, self.row.id))[0]

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    async def following_count(self, info: ContextInfo) -> int:
        return (await fields.member_counts(info.context, self.row.id))[1]

    @strawberry.field(description="Whether the signed-in viewer follows this member (false when signed out).")
    async def viewer_follows(self, info: ContextInfo) -> bool:
        return await fields.viewer_follows(info.context, self.row.id)

    @strawberry.field(description="Whether this member is one of the viewer's favourites.")
    async def is_favourite(self, info: ContextInfo) -> bool:
        return await fields.is_favourite(info.context, self.row.id)

    @strawberry.field(description="Whether the viewer has blocked this member (false when signed out).")
    async def viewer_blocks(self, info: ContextInfo) -> bool:
        return await fields.viewer_blocks(info.context, self.row.id)

    @strawberry.field(
        description="Whether the viewer has muted this member and the mute has not expired (false when signed out)."
    )
    async def viewer_mutes(self, info: ContextInfo) -> bool:
        return await fields.viewer_mutes(info.context, self.row.id)

    @strawberry.field(description="The member's own posts: GET /userfeed. Bounds are post IDs.")
    async def posts(
        self,
        info: ContextInfo,
        order: PostOrder | None = PostOrder.NEWEST,
        first: int | None = 20,
        after: str | None = None,
        gt: strawberry.ID | None = None,
        gte: strawberry.ID | None = None,
        lt: strawberry.ID | None = None,
        lte: strawberry.ID | None = None,
    ) -> FeedConnection:
        page = await reads.member_feed(
            info.context,
            self.row,
            newest_first=order != PostOrder.OLDEST,
            first=first,
            after=after,
            gt=gt,
            gte=gte,
            lt=lt,
            lte=lte,
        )
        return FeedConnection.of(page, after)

    @strawberry.field
    async def liked_playlist(self, info: ContextInfo) -> Playlist:
        return await liked_playlist_of(info, self.row)

    @strawberry.field(description="Members following this member, most recent follow first.")
    async def followers(self, info: ContextInfo, first: int | None = 20, after: str | None = None) -> MemberConnection:
        return MemberConnection.of(await reads.followers(info.context, self.row, first, after), after)

    @strawberry.field(description="Members this member follows, most recent follow first.")
    async def following(self, info: ContextInfo, first: int | None = 20, after: str | None = None) -> MemberConnection:
        return MemberConnection.of(await reads.following(info.context, self.row, first, after), after)

    @strawberry.field(description="This member's playlists (USER kind), newest first.")
    async def playlists(
        self, info: ContextInfo, first: int | None = 20, after: str | None = None
    ) -> PlaylistConnection:
        return PlaylistConnection.of(await reads.playlists(info.context, self.row, first, after), after)


@strawberry.type
class MemberEdge:
    cursor: str
    node: Member


@strawberry.type
class MemberConnection:
    edges: list[MemberEdge]
    page_info: PageInfo

    @classmethod
    def of(cls, page: models.Page, after: str | None) -> MemberConnection:
        """A page of feeds.members.Listed."""
        edges = [MemberEdge(cursor=listed.cursor, node=Member(row=listed.member)) for listed in page.items]
        return cls(edges=edges, page_info=PageInfo.of(page, edges, after))


async def visible_post(info: ContextInfo, post_id: uuid.UUID) -> Post:
    """A non-null Post field's value: the one visibility rule (visible_posts), NOT_FOUND when it hides the post."""
    post = await fields.visible_post(info.context, post_id)
    if post is None:
        raise NotFound("post not found")
    return Post.of(post)


async def post_if_visible(info: ContextInfo, post_id: uuid.UUID | None) -> Post | None:
    """A nullable Post field's value: null when the one visibility rule hides the post."""
    if post_id is None:
        return None
    post = await fields.visible_post(info.context, post_id)
    return Post.of(post) if post is not None else None


async def comment_if_visible(info: ContextInfo, comment_id: uuid.UUID | None) -> Comment | None:
    """Null when the comment, or the post it is on, is not visible to the viewer."""
    if comment_id is None:
        return None
    row = await fields.visible_comment(info.context, comment_id)
    return Comment(row=row) if row is not None else None


def member_or_none(row: models.Member | None) -> Member | None:
    return Member(row=row) if row is not None else None


@strawberry.type
class Media:
    row: strawberry.Private[Any]

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.row["id"]))

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def status(self) -> MediaStatus:
        return MediaStatus(self.row["status"])

    @strawberry.field(
        description="Sniffed from the bytes, never taken from the upload's declared type.",
        metadata=SAME_FOR_EVERY_VIEWER,
    )
    def content_type(self) -> str | None:
        found: str | None = self.row["content_type"]
        return found

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def width(self) -> int | None:
        found: int | None = self.row["width"]
        return found

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def height(self) -> int | None:
        found: int | None = self.row["height"]
        return found

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def url(self) -> str | None:
        return f"/media/{self.row['id']}" if self.row["status"] == "ready" else None

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def score(self) -> float | None:
        found: float | None = self.row["score"]
        return found

    @strawberry.field(
        description="Why worker-media refused the upload (REJECTED only).", metadata=SAME_FOR_EVERY_VIEWER
    )
    def reject_reason(self) -> str | None:
        return self.row["reason"] if self.row["status"] == "rejected" else None


@strawberry.type
class Post:
    """A post as feeds show it, built from one FeedPost (feeds.feed_posts) wherever it is reached: a feed
    page builds its posts' in one statement, anywhere else `post_of` does through a DataLoader. Its fields
    are then plain attributes, which graphql-core reads without a resolver call each (a resolver per
    field costs Strawberry an Info object and argument parsing, on every field of every post)."""

    row: strawberry.Private[models.Post]
    feed: strawberry.Private[models.FeedPost]
    # Built from a repost's FeedPost.original, which carries no original of its own.
    nested: strawberry.Private[bool] = False
    id: strawberry.ID = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    content: str = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    status: PostStatus = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    created_at: datetime = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    updated_at: datetime | None = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    author: Member = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    tags: list[str] = strawberry.field(
        default=_FROM_ROW,
        description="Hashtags and inferred topics, without '#', in NFC and case-folded (lower case; ß as ss).",
        metadata=SAME_FOR_EVERY_VIEWER,
    )
    media: list[Media] = strawberry.field(
        default=_FROM_ROW, metadata={**SAME_FOR_EVERY_VIEWER, "max_items": MAX_MEDIA_PER_POST}
    )
    like_count: int = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    comment_count: int = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    viewer_has_liked: bool = _FROM_ROW

    def __post_init__(self) -> None:
        row, feed = self.row, self.feed
        self.id = strawberry.ID(str(row.id))
        self.content = row.content
        self.status = PostStatus(row.status)
        self.created_at = row.created_at
        self.updated_at = row.updated_at
        # None only for a post gone between its page's read and its extras': GraphQL then nulls the item.
        self.author = Member(row=feed.author) if feed.author is not None else None  # type: ignore[assignment]
        self.tags = feed.tags
        self.media = [Media(row=m) for m in feed.media]
        self.like_count = feed.like_count
        self.comment_count = feed.comment_count
        self.viewer_has_liked = feed.viewer_liked

    @classmethod
    def of(cls, post: models.FeedPost, *, nested: bool = False) -> Post:
        return cls(row=post.row, feed=post, nested=nested)

    def shared_version(self) -> object:
        """The values of the fields marked SAME_FOR_EVERY_VIEWER and answered from the post, its author's and
        media's included (feedfabric.schema.viewer_marks.shared_values). Equal versions complete equally, for every
        viewer (feedfabric.adapter.execution.render_once keys its cache on it); a change to any is a new one."""
        return shared_values(self)

    @strawberry.field(
        metadata={**SAME_FOR_EVERY_VIEWER, "max_items": MAX_MENTIONS_PER_POST}
    )  # the bound: schema/cost.py
    async def mentions(self, info: ContextInfo) -> list[Member]:
        return [Member(row=m) for m in await fields.mentioned(info.context, self.row.id)]

    @strawberry.field(description="Set when this post is a repost; feeds show the shared post.")
    def repost_of(self) -> Post | None:
        # The extras hold the original when the viewer may see it; an original is never itself a repost
        # (reposting a repost reposts its original: feeds.posts).
        original = self.feed.original if not self.nested else None
        return Post.of(original, nested=True) if original is not None else None

    @strawberry.field
    async def comments(self, info: ContextInfo, first: int | None = 20, after: str | None = None) -> CommentConnection:
        page = await reads.comments(info.context, self.row.id, first, after)
        edges = [CommentEdge(cursor=str(c.id), node=Comment(row=c)) for c in page.items]
        return CommentConnection(edges=edges, page_info=PageInfo.of(page, edges, after))


@strawberry.type
class Comment:
    row: strawberry.Private[models.Comment]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.row.id))

    @strawberry.field
    async def post(self, info: ContextInfo) -> Post:
        return await visible_post(info, self.row.post_id)

    @strawberry.field
    async def author(self, info: ContextInfo) -> Member:
        return Member(row=await fields.existing_member(info.context, self.row.author_id))

    @strawberry.field
    def content(self) -> str:
        return self.row.content

    @strawberry.field
    def created_at(self) -> datetime:
        return self.row.created_at


MentionItem = Annotated[Post | Comment, strawberry.union("MentionItem")]


@strawberry.type
class FeedEdge:
    cursor: str
    node: Post


@strawberry.type
class FeedConnection:
    edges: list[FeedEdge]
    page_info: PageInfo
    source: FeedSource = strawberry.field(
        description="Where the page came from. Only the home feed ever says REDIS or REDIS_POSTGRES."
    )

    @classmethod
    def of(cls, page: models.FeedPage, after: str | None = None) -> FeedConnection:
        edges = [FeedEdge(cursor=str(p.row.id), node=Post.of(p)) for p in page.posts]
        return cls(edges=edges, page_info=PageInfo.of(page, edges, after), source=FeedSource(page.source))


@strawberry.type
class CommentEdge:
    cursor: str
    node: Comment


@strawberry.type
class CommentConnection:
    edges: list[CommentEdge]
    page_info: PageInfo


@strawberry.type
class MentionEdge:
    cursor: str
    node: MentionItem


@strawberry.type
class MentionConnection:
    edges: list[MentionEdge]
    page_info: PageInfo


@strawberry.type
class Notification:
    row: strawberry.Private[models.Notification]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.row.id))

    @strawberry.field
    def kind(self) -> NotificationKind:
        return NotificationKind(self.row.kind)

    @strawberry.field
    async def actor(self, info: ContextInfo) -> Member:
        return Member(row=await fields.existing_member(info.context, self.row.actor_id))

    @strawberry.field
    async def post(self, info: ContextInfo) -> Post | None:
        return await post_if_visible(info, self.row.post_id)

    @strawberry.field(description="Null when the comment, or the post it is on, is no longer visible to the viewer.")
    async def comment(self, info: ContextInfo) -> Comment | None:
        return await comment_if_visible(info, self.row.comment_id)

    @strawberry.field
    def created_at(self) -> datetime:
        return self.row.created_at

    @strawberry.field
    def read(self) -> bool:
        return self.row.read_at is not None


@strawberry.type
class NotificationEdge:
    cursor: str
    node: Notification


@strawberry.type
class NotificationConnection:
    edges: list[NotificationEdge]
    page_info: PageInfo
    unread_count: int


async def post_of(ctx: Context, row: models.Post) -> Post:
    """The Post of a row reached outside a feed page; concurrent ones share one statement."""
    return Post.of(await fields.feed_post(ctx, row))


async def posts_of(ctx: Context, rows: Iterable[models.Post]) -> list[Post]:
    return list(await asyncio.gather(*(post_of(ctx, row) for row in rows)))


# Playlists: in this module with Member and Post, which they reference and which reference them.


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
        return Member(row=await fields.existing_member(info.context, self.row.owner_id))

    @strawberry.field
    def name(self) -> str:
        return self.row.name

    @strawberry.field
    def kind(self) -> PlaylistKind:
        return PlaylistKind(self.row.kind)

    @strawberry.field
    async def follower_count(self, info: ContextInfo) -> int:
        return await fields.playlist_followers(info.context, self.row.id)

    @strawberry.field
    async def viewer_follows(self, info: ContextInfo) -> bool:
        return await fields.viewer_follows_playlist(info.context, self.row.id)

    @strawberry.field(description="In playlist order (fractional rank), first to last.")
    async def items(
        self, info: ContextInfo, first: int | None = 20, after: str | None = None
    ) -> PlaylistItemConnection:
        page = await resolve_playlists.items(info.context, self.row, first, after)
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
    return resolve_playlists.item_cursor(item)


async def liked_playlist_of(info: ContextInfo, member: models.Member) -> Playlist:
    """Member.likedPlaylist: batched per request, created on first use."""
    return Playlist(row=await fields.liked_playlist(info.context, member))
