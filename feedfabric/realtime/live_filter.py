"""The viewer's relations on live items: the same rule as the pages (feeds.relations), per recipient.

A new post reaches a set of connected members; each one's relations are held
in this process (read once per change), so keeping or dropping a recipient is
a set lookup of the post's author (and its original's) and, for a recipient
with muted words of HOME, one pass of their compiled matcher over the post's
texts, folded once for every recipient. Nothing is executed per recipient: the
listeners of those who remain write the item's shared bytes as before.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping

from feedfabric.core.models import NotificationGroup, PageExtras, Post
from feedfabric.db import notification_groups as groups_db
from feedfabric.db.queryable import Queryable
from feedfabric.feeds.matcher import context_bit, fold, words_of
from feedfabric.feeds.relations import Relations

HOME = context_bit("HOME")


def _texts(post: Post, extras: PageExtras, tags: list[str]) -> list[str]:
    texts = [post.content, *tags]
    if post.repost_of is not None:
        original = extras.originals.get(post.repost_of)
        if original is not None:
            texts.append(original.content)
            theirs = extras.extras.get(original.id)
            if theirs is not None:
                texts.extend(theirs.tags)
    return [fold(t) for t in texts if t]


def timeline_recipients(
    post: Post,
    extras: PageExtras,
    tags: list[str],
    recipients: Iterable[uuid.UUID],
    held: Mapping[uuid.UUID, Relations],
) -> list[uuid.UUID]:
    """The recipients of a new post whose relations keep it: the author's (and a repost's original's)
    neither blocked either way nor muted, and no muted word of HOME in it (never for one's own post)."""
    author = post.author_id
    author_key = original_key = author.int
    if post.repost_of is not None:
        original = extras.originals.get(post.repost_of)
        if original is not None:
            original_key = original.author_id.int
    folded: list[str] = []
    words: set[str] | None = None
    kept: list[uuid.UUID] = []
    get = held.get
    for member_id in recipients:
        relations = get(member_id)
        if relations is None:
            kept.append(member_id)
            continue
        hidden = relations.feed_hidden
        if hidden and (author_key in hidden or original_key in hidden):
            continue
        home_words = relations.home_words
        if (home_words or relations.home_scan) and author != member_id:
            if words is None:
                folded = _texts(post, extras, tags)
                words = words_of(folded)
            if not words.isdisjoint(home_words):
                continue
            if relations.home_scan and relations.matcher.matches_bit(folded, HOME, words):
                continue
        kept.append(member_id)
    return kept


async def group_as_shown(
    conn: Queryable, recipient: uuid.UUID, group: NotificationGroup, relations: Relations
) -> NotificationGroup | None:
    """A changed notification group as its recipient is shown it: without the actors they block, are
    blocked by or mute with notifications (its sample leaves them out as its count does, through the
    subscriber's loaders), and not at all when none is left or a muted word of NOTIFICATIONS is in it."""
    if relations.empty:
        return group
    if relations.hidden or relations.muted_notifying:
        hidden = await groups_db.hidden_actor_counts(conn, [group.id], recipient)
        left = group.actor_count - hidden.get(group.id, 0)
        if group.actor_count > 0 and left <= 0:
            return None  # every actor left is hidden (an emptied group is still sent at zero: the client drops it)
        group = dataclasses.replace(group, actor_count=max(left, 0))
    if relations.matcher.applies("NOTIFICATIONS"):
        text = (await groups_db.texts(conn, [group.id], recipient)).get(group.id, "")
        if text and relations.hides_text([text], "NOTIFICATIONS"):
            return None
    return group
