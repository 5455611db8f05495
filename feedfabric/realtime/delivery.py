"""From events to hub items: hydrate each new post once per polled chunk, route it to connected members.

A PostCreated goes to its author and to the connected members who follow the
author or one of the post's tags (celebrities included: pull on read does not
mean no realtime), filtered by post_visible as the home feed is: a held post
reaches only its author, a post of a suspended author or a repost of a hidden
post reaches nobody; then by each recipient's relations (blocks both ways,
mutes, muted words of HOME), held in this process and applied by set
membership and each one's compiled matcher (realtime.live_filter), with no
execution per recipient. The events of every relation change make every
instance read the changed members' relations again (`forget_relations`). Deletes and holds are not new items and are ignored.
The hydrated rows travel with the item, so each subscriber's loaders are
primed with them and rendering N copies costs no N queries. A chunk costs
three statements, the last two at once: the posts with their visibility and
tags, then the connected followers and the extras (db.post_extras, the feed
page's own statement). Which recipients like a post or the original it
reposts is known from the extras' like counts when nobody does (a new post),
else read in one more statement for the chunk (`_likers`): so each
recipient's `viewerHasLiked` is known without a statement each, and a
per-viewer selection that reads nothing else about the viewer renders once
per value (feedfabric.adapter.execution.live). This is the fixed part of every live item's latency,
so it is kept to as few round trips as the data allows.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence

import asyncpg

from feedfabric.core.events import Event
from feedfabric.core.models import Notification, PageExtras
from feedfabric.db import notification_groups as groups_db
from feedfabric.db import notifications as notifications_db
from feedfabric.db import post_extras
from feedfabric.db import realtime as realtime_db
from feedfabric.feeds import relations
from feedfabric.realtime import live_filter
from feedfabric.realtime.hub import Channel, Hub
from feedfabric.realtime.item import TimelineItem

__all__ = ["deliver"]

log = logging.getLogger(__name__)


RELATION_EVENTS = frozenset({"MemberBlocked", "MemberUnblocked", "MemberMuted", "MemberUnmuted", "MutedWordsChanged"})


def forget_relations(events: Sequence[Event], cache: relations.RelationsCache) -> None:
    """A block, a mute or a muted word changed: the members whose view it changes are read again on the
    next item that reaches them (feeds.relations), on this instance as on every other."""
    for event in events:
        if event.type in RELATION_EVENTS:
            for key in ("memberId", "blockedId"):
                member = _uuid(event.data.get(key))
                if member is not None:
                    cache.forget(member)


async def deliver(pool: asyncpg.Pool, hub: Hub, events: Sequence[Event], cache: relations.RelationsCache) -> int:
    """Publishes a polled chunk's events to the hub; returns how many queue entries were made. `cache`: the
    process's relations (Resources.relations)."""
    forget_relations(events, cache)
    created = [e for e in events if e.type == "PostCreated"]
    notified = [e for e in events if e.type == "NotificationCreated"]
    delivered = 0
    if created and hub.connected(Channel.TIMELINE):
        delivered += await _deliver_posts(pool, hub, created, cache)
    if notified:
        delivered += await _deliver_notifications(pool, hub, notified, cache)
    grouped = [e for e in events if e.type in ("NotificationCreated", "NotificationGroupUpdated")]
    if grouped and hub.connected(Channel.NOTIFICATION_GROUPS):
        delivered += await _deliver_groups(pool, hub, grouped, cache)
    return delivered


async def _deliver_posts(pool: asyncpg.Pool, hub: Hub, events: Sequence[Event], cache: relations.RelationsCache) -> int:
    post_ids = [p for p in dict.fromkeys(_uuid(e.data.get("postId")) for e in events) if p is not None]
    found = await realtime_db.posts_with_visibility(pool, post_ids)
    if not found:
        return 0
    # Who gets each post and what it shows are independent: two statements on two connections at once.
    follows, extras = await asyncio.gather(
        realtime_db.connected_followers(
            pool,
            hub.connected(Channel.TIMELINE),
            list({v.post.author_id for v in found.values()}),
            sorted({t for v in found.values() for t in v.tags}),
        ),
        post_extras.page_extras(pool, list(found), None),
    )
    followers_of: dict[tuple[str, str], set[uuid.UUID]] = {}
    versions: dict[uuid.UUID, int] = {}
    for follower, target_type, target_id, version in follows:
        followers_of.setdefault((target_type, target_id), set()).add(follower)
        versions[follower] = version

    reached: dict[uuid.UUID, set[uuid.UUID]] = {}
    for post_id in post_ids:
        seen = found.get(post_id)
        if seen is None:
            continue
        post = seen.post
        recipients: set[uuid.UUID] = set()
        if seen.public:
            recipients |= followers_of.get(("member", str(post.author_id)), set())
            for tag in seen.tags:
                recipients |= followers_of.get(("tag", tag), set())
        if seen.to_author:
            recipients.add(post.author_id)
        reached[post_id] = recipients
    # Each recipient's relations, held in this process (read once per change, checked against the version
    # the followers' statement read), in one batch for the chunk.
    held = await relations.relations_many(pool, {r for rs in reached.values() for r in rs}, cache, versions)
    likers = await _likers(pool, found, extras, reached)
    delivered = 0
    for post_id, recipients in reached.items():
        post = found[post_id].post
        item = TimelineItem(post=post, extras=extras, likers=likers)
        kept = live_filter.timeline_recipients(post, extras, found[post_id].tags, recipients, held)
        delivered += await hub.publish_many(Channel.TIMELINE, kept, item)
    return delivered


async def _likers(
    pool: asyncpg.Pool,
    found: Mapping[uuid.UUID, realtime_db.PostVisibility],
    extras: PageExtras,
    reached: Mapping[uuid.UUID, set[uuid.UUID]],
) -> dict[uuid.UUID, frozenset[int]]:
    """Which recipients like each post and the original it reposts (TimelineItem.likers), for every
    recipient's `viewerHasLiked` at once. The extras carry each one's like count: a post nobody likes (every
    new post, nearly always) is known to be liked by no recipient, so a chunk costs a statement only when
    some post or original in it has likes, and then one for the chunk, among those posts' recipients."""
    wanted: list[uuid.UUID] = []
    members: set[uuid.UUID] = set()
    for post_id, recipients in reached.items():
        original = found[post_id].post.repost_of
        liked = [
            p
            for p in ([post_id] if original is None else [post_id, original])
            if (e := extras.extras.get(p)) is not None and e.like_count > 0
        ]
        if liked and recipients:
            wanted += liked
            members |= recipients
    return await realtime_db.likers(pool, wanted, list(members)) if wanted else {}


async def _deliver_notifications(
    pool: asyncpg.Pool, hub: Hub, events: Sequence[Event], cache: relations.RelationsCache
) -> int:
    delivered = 0
    for event in events:
        recipient = _uuid(event.data.get("recipientId"))
        notification_id = _uuid(event.data.get("notificationId"))
        if recipient is None or notification_id is None or not hub.is_connected(Channel.NOTIFICATIONS, recipient):
            continue
        row: Notification | None = await notifications_db.by_id(pool, notification_id)
        if row is None:
            continue
        held = (await relations.relations_many(pool, [recipient], cache))[recipient]
        if held.hides_actor(row.actor_id):
            continue
        if held.matcher.applies("NOTIFICATIONS"):
            texts = await notifications_db.texts(pool, [row.id], recipient)
            if held.hides_text([texts.get(row.id, "")], "NOTIFICATIONS"):
                continue
        delivered += hub.publish(Channel.NOTIFICATIONS, recipient, row)
    return delivered


async def _deliver_groups(
    pool: asyncpg.Pool, hub: Hub, events: Sequence[Event], cache: relations.RelationsCache
) -> int:
    """Each changed group once per polled chunk, as it is now: a burst of likes on one post costs one
    statement and one item per chunk, not one per like."""
    wanted = [
        group_id
        for group_id, recipient in ((_uuid(e.data.get("groupId")), _uuid(e.data.get("recipientId"))) for e in events)
        if group_id is not None and recipient is not None and hub.is_connected(Channel.NOTIFICATION_GROUPS, recipient)
    ]
    if not wanted:
        return 0
    found = await groups_db.by_ids(pool, list(dict.fromkeys(wanted)))
    held = await relations.relations_many(pool, {recipient for recipient, _ in found.values()}, cache)
    delivered = 0
    for recipient, group in found.values():
        shown = await live_filter.group_as_shown(pool, recipient, group, held[recipient])
        if shown is not None:
            delivered += hub.publish(Channel.NOTIFICATION_GROUPS, recipient, shown)
    return delivered


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None
