"""The object types of the public contract. Fields load through the request's DataLoaders, never SQL."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Iterable, Sequence
from datetime import datetime
from enum import Enum
from typing import Annotated, Any

import strawberry
from strawberry.types import Info

from feedfabric import models
from feedfabric.context import Context
from feedfabric.db.post_extras import PageExtras
from feedfabric.errors import NotFound
from feedfabric.feeds.posts import MAX_MEDIA_PER_POST, MAX_MENTIONS_PER_POST
from feedfabric.resolvers import reads
from feedfabric.resolvers.page_loads import load_page
from feedfabric.schema.selections import iter_fields

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
    def of(cls, page: models.Page, edges: Sequence[Any], after: str | None = None) -> PageInfo:
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
    id: strawberry.ID = _FROM_ROW
    external_id: str = _FROM_ROW
    username: str = _FROM_ROW
    display_name: str = _FROM_ROW
    avatar_url: str | None = _FROM_ROW
    status: MemberStatus = _FROM_ROW

    def __post_init__(self) -> None:
        row = self.row
        self.id = strawberry.ID(str(row.id))
        self.external_id = row.external_id
        self.username = row.username
        self.display_name = row.display_name
        self.avatar_url = row.avatar_url
        self.status = MemberStatus(row.status)

    @strawberry.field
    async def follower_count(self, info: ContextInfo) -> int:
        return (await info.context.loaders.member_stats.load(self.row.id))[0]

    @strawberry.field
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
        return await FeedConnection.load(info, page, after)

    @strawberry.field
    async def liked_playlist(
        self, info: ContextInfo
    ) -> Annotated[Playlist, strawberry.lazy("feedfabric.schema.playlists")]:  # noqa: F821
        from feedfabric.schema.playlists import liked_playlist_of

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
    ) -> Annotated[PlaylistConnection, strawberry.lazy("feedfabric.schema.playlists")]:  # noqa: F821
        from feedfabric.schema.playlists import PlaylistConnection

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
    row = await info.context.loaders.visible_post.load(post_id)
    if row is None:
        raise NotFound("post not found")
    return Post(row=row)


def member_or_none(row: models.Member | None) -> Member | None:
    return Member(row=row) if row is not None else None


@strawberry.type
class Media:
    row: strawberry.Private[Any]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.row["id"]))

    @strawberry.field
    def status(self) -> MediaStatus:
        return MediaStatus(self.row["status"])

    @strawberry.field(description="Sniffed from the bytes, never taken from the upload's declared type.")
    def content_type(self) -> str | None:
        return self.row["content_type"]

    @strawberry.field
    def width(self) -> int | None:
        return self.row["width"]

    @strawberry.field
    def height(self) -> int | None:
        return self.row["height"]

    @strawberry.field
    def url(self) -> str | None:
        return f"/media/{self.row['id']}" if self.row["status"] == "ready" else None

    @strawberry.field
    def score(self) -> float | None:
        return self.row["score"]

    @strawberry.field(description="Why worker-media refused the upload (REJECTED only).")
    def reject_reason(self) -> str | None:
        return self.row["reason"] if self.row["status"] == "rejected" else None


@strawberry.type
class Post:
    """Scalar fields are copied from the row at construction (see Member)."""

    row: strawberry.Private[models.Post]
    id: strawberry.ID = _FROM_ROW
    content: str = _FROM_ROW
    status: PostStatus = _FROM_ROW
    created_at: datetime = _FROM_ROW
    updated_at: datetime | None = _FROM_ROW
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

    @strawberry.field
    def author(self, info: ContextInfo) -> Member:
        value = self._loaded("author")
        return (
            value if value is not _NOT_LOADED else _wrap(Member, info.context.loaders.member.load(self.row.author_id))
        )

    @strawberry.field(description="Hashtags and inferred topics, lower case, without '#'.")
    def tags(self, info: ContextInfo) -> list[str]:
        value = self._loaded("tags")
        return value if value is not _NOT_LOADED else info.context.loaders.tags.load(self.row.id)

    @strawberry.field(metadata={"max_items": MAX_MENTIONS_PER_POST})  # the query cost's bound (schema/cost.py)
    async def mentions(self, info: ContextInfo) -> list[Member]:
        ids = await info.context.loaders.mentions.load(self.row.id)
        rows = await info.context.loaders.member.load_many(ids)
        return [Member(row=r) for r in rows if r is not None]

    @strawberry.field(metadata={"max_items": MAX_MEDIA_PER_POST})  # the query cost's bound (schema/cost.py)
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

    @strawberry.field
    def like_count(self, info: ContextInfo) -> int:
        value = self._loaded("likeCount")
        return value if value is not _NOT_LOADED else info.context.loaders.like_count.load(self.row.id)

    @strawberry.field
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
    # Set by FeedConnection.load: completed directly when the selection allows (schema/prefetched.py).
    prefetched: strawberry.Private[bool] = False


@strawberry.type
class FeedConnection:
    edges: list[FeedEdge]
    page_info: PageInfo
    source: FeedSource = strawberry.field(
        description="Where the page came from. Only the home feed ever says REDIS or REDIS_POSTGRES."
    )
    prefetched: strawberry.Private[bool] = False

    @classmethod
    def of(cls, page: models.Page, after: str | None = None) -> FeedConnection:
        edges = [FeedEdge(cursor=str(p.id), node=Post(row=p)) for p in page.items]
        return cls(edges=edges, page_info=PageInfo.of(page, edges, after), source=FeedSource(page.source))

    @classmethod
    async def load(cls, info: ContextInfo, page: models.Page, after: str | None = None) -> FeedConnection:
        """The page with what the query selects of its posts loaded up front, in one statement for all kinds."""
        connection = cls.of(page, after)
        posts = [edge.node for edge in connection.edges]
        wanted = _node_fields(info) & _PAGE_FIELDS
        if posts and wanted:
            loaded = await load_page(info.context, page)
            for post in posts:
                post.loaded = _prefetched(post.row, loaded, wanted, nested=True)
            connection.prefetched = True
            for edge in connection.edges:
                edge.prefetched = True
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

    @strawberry.field(description="Null when the comment, or the post it is on, is no longer visible to the viewer.")
    async def comment(self, info: ContextInfo) -> Comment | None:
        if self.row.comment_id is None:
            return None
        row = await info.context.loaders.comment.load(self.row.comment_id)
        if row is None or await info.context.loaders.visible_post.load(row.post_id) is None:
            return None
        return Comment(row=row)

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
    """The Post fields selected under `edges { node { ... } }` of this connection, fragments included.

    Walks graphql-core's own nodes: Strawberry's `info.selected_fields` converts the whole selection
    (arguments, directives) into objects of its own on every request, 3% of a GraphQL page's CPU."""
    raw = info._raw_info
    names: set[str] = set()
    for connection in raw.field_nodes:
        for edges, _ in iter_fields(connection.selection_set, raw.fragments):
            if edges.name.value != "edges":
                continue
            for node, _ in iter_fields(edges.selection_set, raw.fragments):
                if node.name.value == "node":
                    names.update(field.name.value for field, _ in iter_fields(node.selection_set, raw.fragments))
    return names
