"""The object types of the public contract. Fields load through the request's DataLoaders, never SQL."""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from datetime import datetime
from enum import Enum
from typing import Annotated, Any

import strawberry
from strawberry.types import Info
from strawberry.types.nodes import SelectedField

from feedfabric import models
from feedfabric.context import Context
from feedfabric.db.post_extras import PageExtras
from feedfabric.resolvers import reads
from feedfabric.resolvers.page_loads import load_page
from feedfabric.schema.sharing import SAME_FOR_EVERY_VIEWER

ContextInfo = Info[Context, None]
# Placeholder default of the fields filled in __post_init__ from `row`; never served.
_FROM_ROW: Any = None
# A feed page loads what its posts show in one batch per kind (FeedConnection.load), so
# Post's loader-backed fields are synchronous and hand back the value at once: an async
# resolver costs graphql-core a coroutine and a task per field (140 on a page of 20),
# which made the GraphQL page cost well over twice the REST one. Outside a feed page
# they return the DataLoader's awaitable instead, which graphql-core awaits the same way.
_NOT_LOADED: Any = object()


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


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None

    @classmethod
    def of(cls, page: models.Page) -> PageInfo:
        return cls(has_next_page=page.next_cursor is not None, end_cursor=page.next_cursor)


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
        return (await info.context.loaders.member_stats.load(self.row.id))[0]

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    async def following_count(self, info: ContextInfo) -> int:
        return (await info.context.loaders.member_stats.load(self.row.id))[1]

    @strawberry.field(description="Whether the signed-in viewer follows this member (false when signed out).")
    async def viewer_follows(self, info: ContextInfo) -> bool:
        return bool(await info.context.loaders.viewer_follows.load(self.row.id))

    @strawberry.field(description="Whether this member is one of the viewer's favourites.")
    async def is_favourite(self, info: ContextInfo) -> bool:
        return bool(await info.context.loaders.viewer_favourite.load(self.row.id))

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
        page = await reads.member_posts(
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
        return await FeedConnection.load(info, page)

    @strawberry.field
    async def liked_playlist(
        self, info: ContextInfo
    ) -> Annotated[Playlist, strawberry.lazy("feedfabric.schema.playlists")]:  # noqa: F821
        from feedfabric.schema.playlists import liked_playlist_of

        return await liked_playlist_of(info, self.row)


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
        return self.row["content_type"]

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def width(self) -> int | None:
        return self.row["width"]

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def height(self) -> int | None:
        return self.row["height"]

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def url(self) -> str | None:
        return f"/media/{self.row['id']}" if self.row["status"] == "ready" else None

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def score(self) -> float | None:
        return self.row["score"]

    @strawberry.field(
        description="Why worker-media refused the upload (REJECTED only).", metadata=SAME_FOR_EVERY_VIEWER
    )
    def reject_reason(self) -> str | None:
        return self.row["reason"] if self.row["status"] == "rejected" else None


@strawberry.type
class Post:
    """Scalar fields are copied from the row at construction (see Member)."""

    row: strawberry.Private[models.Post]
    id: strawberry.ID = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    content: str = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    status: PostStatus = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    created_at: datetime = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    updated_at: datetime | None = strawberry.field(default=_FROM_ROW, metadata=SAME_FOR_EVERY_VIEWER)
    # GraphQL field name -> value, filled by FeedConnection.load for the fields the query selects.
    loaded: strawberry.Private[dict[str, Any] | None] = None

    def __post_init__(self) -> None:
        row = self.row
        self.id = strawberry.ID(str(row.id))
        self.content = row.content
        self.status = PostStatus(row.status)
        self.created_at = row.created_at
        self.updated_at = row.updated_at

    def _loaded(self, name: str) -> Any:
        return self.loaded.get(name, _NOT_LOADED) if self.loaded is not None else _NOT_LOADED

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def author(self, info: ContextInfo) -> Member:
        value = self._loaded("author")
        return (
            value if value is not _NOT_LOADED else _wrap(Member, info.context.loaders.member.load(self.row.author_id))
        )

    @strawberry.field(
        description="Hashtags and inferred topics, lower case, without '#'.", metadata=SAME_FOR_EVERY_VIEWER
    )
    def tags(self, info: ContextInfo) -> list[str]:
        value = self._loaded("tags")
        return value if value is not _NOT_LOADED else info.context.loaders.tags.load(self.row.id)

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    async def mentions(self, info: ContextInfo) -> list[Member]:
        ids = await info.context.loaders.mentions.load(self.row.id)
        rows = await info.context.loaders.member.load_many(ids)
        return [Member(row=r) for r in rows if r is not None]

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def media(self, info: ContextInfo) -> list[Media]:
        value = self._loaded("media")
        return value if value is not _NOT_LOADED else _wrap_all(Media, info.context.loaders.media.load(self.row.id))

    @strawberry.field(description="Set when this post is a repost; feeds show the shared post.")
    def repost_of(self, info: ContextInfo) -> Post | None:
        if self.row.repost_of is None:
            return None
        value = self._loaded("repostOf")
        return (
            value
            if value is not _NOT_LOADED
            else _wrap(Post, info.context.loaders.visible_post.load(self.row.repost_of))
        )

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def like_count(self, info: ContextInfo) -> int:
        value = self._loaded("likeCount")
        return value if value is not _NOT_LOADED else info.context.loaders.like_count.load(self.row.id)

    @strawberry.field(metadata=SAME_FOR_EVERY_VIEWER)
    def comment_count(self, info: ContextInfo) -> int:
        value = self._loaded("commentCount")
        return value if value is not _NOT_LOADED else info.context.loaders.comment_count.load(self.row.id)

    @strawberry.field
    def viewer_has_liked(self, info: ContextInfo) -> bool:
        value = self._loaded("viewerHasLiked")
        return value if value is not _NOT_LOADED else info.context.loaders.viewer_liked.load(self.row.id)

    @strawberry.field
    async def comments(self, info: ContextInfo, first: int | None = 20, after: str | None = None) -> CommentConnection:
        page = await reads.comments(info.context, self.row.id, first, after)
        return CommentConnection(
            edges=[CommentEdge(cursor=str(c.id), node=Comment(row=c)) for c in page.items],
            page_info=PageInfo.of(page),
        )


@strawberry.type
class Comment:
    row: strawberry.Private[models.Comment]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.row.id))

    @strawberry.field
    async def post(self, info: ContextInfo) -> Post:
        row = await info.context.loaders.post.load(self.row.post_id)
        assert row is not None
        return Post(row=row)

    @strawberry.field
    async def author(self, info: ContextInfo) -> Member:
        row = await info.context.loaders.member.load(self.row.author_id)
        assert row is not None
        return Member(row=row)

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
    def of(cls, page: models.Page) -> FeedConnection:
        return cls(
            edges=[FeedEdge(cursor=str(p.id), node=Post(row=p)) for p in page.items],
            page_info=PageInfo.of(page),
            source=FeedSource(page.source),
        )

    @classmethod
    async def load(cls, info: ContextInfo, page: models.Page) -> FeedConnection:
        """The page with what the query selects of its posts loaded up front, in one statement for all kinds."""
        connection = cls.of(page)
        posts = [edge.node for edge in connection.edges]
        wanted = _node_fields(info) & _PAGE_FIELDS
        if posts and wanted:
            loaded = await load_page(info.context, page)
            for post in posts:
                post.loaded = _prefetched(post.row, loaded, wanted, nested=True)
        return connection


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
        row = await info.context.loaders.member.load(self.row.actor_id)
        assert row is not None
        return Member(row=row)

    @strawberry.field
    async def post(self, info: ContextInfo) -> Post | None:
        if self.row.post_id is None:
            return None
        row = await info.context.loaders.visible_post.load(self.row.post_id)
        return Post(row=row) if row is not None else None

    @strawberry.field
    async def comment(self, info: ContextInfo) -> Comment | None:
        if self.row.comment_id is None:
            return None
        row = await info.context.loaders.comment.load(self.row.comment_id)
        return Comment(row=row) if row is not None else None

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


async def _wrap(kind: Any, pending: Awaitable[Any]) -> Any:
    row = await pending
    return kind(row=row) if row is not None else None


async def _wrap_all(kind: Any, pending: Awaitable[Iterable[Any]]) -> list[Any]:
    return [kind(row=r) for r in await pending]


# The Post fields a feed page fills from its prefetched extras (resolvers.page_loads).
_PAGE_FIELDS = frozenset({"author", "tags", "media", "repostOf", "likeCount", "commentCount", "viewerHasLiked"})


def _prefetched(
    row: models.Post, loaded: PageExtras, wanted: frozenset[str] | set[str], *, nested: bool
) -> dict[str, Any]:
    """GraphQL field name -> value of one post, from the page's extras (only the fields the query selects).

    A repost's original is filled the same way (its own extras are in the page's load); its own
    `repostOf`, never prefetched, resolves through the loaders as anywhere else.
    """
    extras = loaded.extras.get(row.id)
    out: dict[str, Any] = {}
    if extras is None:
        return out
    for name in wanted:
        if name == "author":
            out[name] = Member(row=extras.author) if extras.author is not None else None
        elif name == "tags":
            out[name] = extras.tags
        elif name == "media":
            out[name] = [Media(row=m) for m in extras.media]
        elif name == "likeCount":
            out[name] = extras.like_count
        elif name == "commentCount":
            out[name] = extras.comment_count
        elif name == "viewerHasLiked":
            out[name] = extras.viewer_liked
        elif name == "repostOf" and row.repost_of is None:
            out[name] = None  # what the field answers for a post that is no repost
        elif name == "repostOf" and nested:
            original = loaded.originals.get(row.repost_of)
            out[name] = (
                None
                if original is None
                else Post(row=original, loaded=_prefetched(original, loaded, _PAGE_FIELDS - {"repostOf"}, nested=False))
            )
    return out


def _node_fields(info: ContextInfo) -> set[str]:
    """The Post fields selected under `edges { node { ... } }` of this connection, fragments included."""
    names: set[str] = set()
    for field in info.selected_fields:
        _walk_to_nodes(field.selections, (), names)
    return names


def _walk_to_nodes(selections: Iterable[Any], path: tuple[str, ...], names: set[str]) -> None:
    """A module function, not a closure: a recursive closure is a reference cycle, and this one would
    keep the request's resolve info (and its context) for the cyclic collector."""
    for selection in selections:
        if isinstance(selection, SelectedField):
            if path == ("edges", "node"):
                names.add(selection.name)
            elif len(path) < 2:
                _walk_to_nodes(selection.selections, (*path, selection.name), names)
        else:  # a fragment spread or an inline fragment: its selections apply here
            _walk_to_nodes(selection.selections, path, names)
