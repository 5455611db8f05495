"""From events to hub items: hydrate each new post once per polled chunk, route it to connected members.

A PostCreated goes to its author and to the connected members who follow the
author or one of the post's tags (celebrities included: pull on read does not
mean no realtime), filtered by post_visible as the home feed is: a held post
reaches only its author, a post of a suspended author or a repost of a hidden
post reaches nobody. Deletes and holds are not new items and are ignored.
The hydrated rows travel with the item, so each subscriber's loaders are
primed with them and rendering N copies costs no N queries.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg

from feedfabric.db import comments as comments_db
from feedfabric.db import likes as likes_db
from feedfabric.db import members as members_db
from feedfabric.db import notifications as notifications_db
from feedfabric.db import posts as posts_db
from feedfabric.db import realtime as realtime_db
from feedfabric.db.loaders import Loaders
from feedfabric.events import Event
from feedfabric.models import Member, Notification, Post
from feedfabric.realtime.hub import Channel, Hub
from feedfabric.realtime.render import SharedRenders

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TimelineItem:
    """A new home-feed post with the rows every recipient renders alike."""

    post: Post
    original: Post | None = None
    members: dict[uuid.UUID, Member] = field(default_factory=dict)
    tags: dict[uuid.UUID, list[str]] = field(default_factory=dict)
    like_counts: dict[uuid.UUID, int] = field(default_factory=dict)
    comment_counts: dict[uuid.UUID, int] = field(default_factory=dict)
    # False for replayed rows: only the post itself is known, the loaders fetch the rest.
    hydrated: bool = False
    # Every recipient of this item shares its renderings (feedfabric.schema.shared).
    renders: SharedRenders = field(default_factory=SharedRenders, compare=False, repr=False)

    def prime(self, loaders: Loaders) -> None:
        """Fills a subscriber's fresh loaders with what is the same for every viewer."""
        loaders.post.prime(self.post.id, self.post)
        if not self.hydrated:
            return
        for p in [self.post] + ([self.original] if self.original else []):
            loaders.post.prime(p.id, p)
            loaders.tags.prime(p.id, self.tags.get(p.id, []))
            loaders.like_count.prime(p.id, self.like_counts.get(p.id, 0))
            loaders.comment_count.prime(p.id, self.comment_counts.get(p.id, 0))
        if self.original is not None:
            # Only set when visible to everyone, so any viewer's visible_post agrees.
            loaders.visible_post.prime(self.original.id, self.original)
        loaders.member.prime_many(self.members)


async def deliver(pool: asyncpg.Pool, hub: Hub, events: Sequence[Event]) -> int:
    """Publishes a polled chunk's events to the hub; returns how many queue entries were made."""
    created = [e for e in events if e.type == "PostCreated"]
    notified = [e for e in events if e.type == "NotificationCreated"]
    delivered = 0
    if created and hub.connected(Channel.TIMELINE):
        delivered += await _deliver_posts(pool, hub, created)
    if notified:
        delivered += await _deliver_notifications(pool, hub, notified)
    return delivered


async def _deliver_posts(pool: asyncpg.Pool, hub: Hub, events: Sequence[Event]) -> int:
    post_ids = [p for p in dict.fromkeys(_uuid(e.data.get("postId")) for e in events) if p is not None]
    found = await realtime_db.posts_with_visibility(pool, post_ids)
    if not found:
        return 0
    tags = await posts_db.tags_of(pool, list(found))
    connected = hub.connected(Channel.TIMELINE)
    follows = await realtime_db.connected_followers(
        pool, connected, list({v.post.author_id for v in found.values()}), sorted({t for ts in tags.values() for t in ts})
    )
    followers_of: dict[tuple[str, str], set[uuid.UUID]] = {}
    for follower, target_type, target_id in follows:
        followers_of.setdefault((target_type, target_id), set()).add(follower)

    originals = await posts_db.visible_by_ids(pool, [v.post.repost_of for v in found.values() if v.post.repost_of], None)
    shown = list(found) + list(originals)
    authors = {v.post.author_id for v in found.values()} | {p.author_id for p in originals.values()}
    members = await members_db.by_ids(pool, list(authors))
    if originals:
        tags.update(await posts_db.tags_of(pool, list(originals)))
    likes = await likes_db.counts(pool, shown)
    comments = await comments_db.counts(pool, shown)

    delivered = 0
    for post_id in post_ids:
        seen = found.get(post_id)
        if seen is None:
            continue
        post = seen.post
        item = TimelineItem(
            post=post,
            original=originals.get(post.repost_of) if post.repost_of else None,
            members=members,
            tags=tags,
            like_counts=likes,
            comment_counts=comments,
            hydrated=True,
        )
        recipients: set[uuid.UUID] = set()
        if seen.public:
            recipients |= followers_of.get(("member", str(post.author_id)), set())
            for tag in tags.get(post.id, []):
                recipients |= followers_of.get(("tag", tag), set())
        if seen.to_author:
            recipients.add(post.author_id)
        for member_id in recipients:
            delivered += hub.publish(Channel.TIMELINE, member_id, item)
    return delivered


async def _deliver_notifications(pool: asyncpg.Pool, hub: Hub, events: Sequence[Event]) -> int:
    delivered = 0
    for event in events:
        recipient = _uuid(event.data.get("recipientId"))
        notification_id = _uuid(event.data.get("notificationId"))
        if recipient is None or notification_id is None or not hub.is_connected(Channel.NOTIFICATIONS, recipient):
            continue
        row: Notification | None = await notifications_db.by_id(pool, notification_id)
        if row is not None:
            delivered += hub.publish(Channel.NOTIFICATIONS, recipient, row)
    return delivered


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None
