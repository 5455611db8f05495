"""Rows as the domain sees them: plain frozen dataclasses, built from asyncpg records."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self

from asyncpg import Record

__all__ = [
    "SAMPLE_ACTORS",
    "Comment",
    "Extras",
    "FeedPage",
    "FeedPost",
    "Member",
    "Mention",
    "MentionsPage",
    "Notification",
    "NotificationGroup",
    "Page",
    "PageExtras",
    "Playlist",
    "PlaylistItem",
    "Post",
    "RankedPage",
]


class FromRecord:
    """A row dataclass that a query's record builds, column by field name (`Member.of(record)`)."""

    __slots__ = ()

    @classmethod
    def of(cls, record: Record) -> Self:
        names: dict[str, Any] = cls.__dataclass_fields__  # type: ignore[attr-defined]
        return cls(**{name: record[name] for name in names})


@dataclass(frozen=True, slots=True)
class Member(FromRecord):
    id: uuid.UUID
    external_id: str
    username: str
    display_name: str
    avatar_url: str | None
    status: str
    last_seen_at: datetime

    @property
    def active(self) -> bool:
        return self.status == "active"


@dataclass(frozen=True, slots=True)
class Post(FromRecord):
    id: uuid.UUID
    author_id: uuid.UUID
    content: str
    repost_of: uuid.UUID | None
    status: str
    created_at: datetime
    updated_at: datetime | None


@dataclass(frozen=True, slots=True)
class Comment(FromRecord):
    id: uuid.UUID
    post_id: uuid.UUID
    author_id: uuid.UUID
    content: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Notification(FromRecord):
    id: uuid.UUID
    kind: str
    actor_id: uuid.UUID
    post_id: uuid.UUID | None
    comment_id: uuid.UUID | None
    created_at: datetime
    read_at: datetime | None


SAMPLE_ACTORS = 8
"""The most recent actors a notification group lists."""


@dataclass(frozen=True, slots=True)
class NotificationGroup(FromRecord):
    id: uuid.UUID
    kind: str
    post_id: uuid.UUID | None
    comment_id: uuid.UUID | None
    actor_count: int
    notification_count: int
    latest_at: datetime
    read_at: datetime | None


@dataclass(frozen=True, slots=True)
class Extras:
    """One post's extras; `media` are READY media as mappings with the columns of db.media (ids as UUIDs)."""

    author: Member | None
    tags: list[str]
    media: list[dict[str, Any]]
    like_count: int
    comment_count: int
    viewer_liked: bool


@dataclass(frozen=True)
class PageExtras:
    """Extras by post ID (page posts and visible originals), and the visible originals by ID."""

    extras: dict[uuid.UUID, Extras]
    originals: dict[uuid.UUID, Post]


@dataclass(frozen=True, slots=True)
class FeedPost:
    """A post as every feed shows it, built from its row and its extras by feeds.feed_posts alone.

    `media` are READY media (mappings with the columns of db.media); `original` is a repost's
    original when the viewer may see it, itself without an original of its own.
    """

    row: Post
    author: Member | None
    tags: list[str]
    media: list[dict[str, Any]]
    like_count: int
    comment_count: int
    viewer_liked: bool
    original: FeedPost | None = None


@dataclass(frozen=True, slots=True)
class Page:
    """A newest-first (or oldest-first) list page; next_cursor is the last item's ID or None.

    `extras`: the items' extras when the source read them in the statement that found the items
    (the home feed's first round), so serialising the page costs no further round trip.
    """

    items: list[Any]
    next_cursor: str | None
    source: str = "postgres"
    extras: PageExtras | None = None


@dataclass(frozen=True, slots=True)
class FeedPage:
    """A finished page of a feed: its posts as every feed shows them, built once for GraphQL and REST."""

    posts: list[FeedPost]
    next_cursor: str | None
    source: str


@dataclass(frozen=True, slots=True)
class RankedPage:
    """A For You page, finished: its posts, each with the reason, score and cursor it was placed by, and
    the ranking the chain of pages follows."""

    page: FeedPage
    reasons: list[str]
    scores: list[float]
    cursors: list[str]
    preset: str
    ranked_at: datetime


@dataclass(frozen=True, slots=True)
class Mention:
    """One item of the mentions feed: a post that mentions the viewer, or a comment with its author."""

    cursor: str
    post: FeedPost | None = None
    comment: Comment | None = None
    comment_author: Member | None = None


@dataclass(frozen=True, slots=True)
class MentionsPage:
    mentions: list[Mention]
    next_cursor: str | None
    source: str


@dataclass(frozen=True, slots=True)
class Playlist(FromRecord):
    id: uuid.UUID
    owner_id: uuid.UUID
    name: str
    kind: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class PlaylistItem(FromRecord):
    id: uuid.UUID
    playlist_id: uuid.UUID
    post_id: uuid.UUID
    rank: str
    added_at: datetime
