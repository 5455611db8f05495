"""The item a new home-feed post travels as, from the realtime consumer to every subscriber it reaches.

A module of its own: the hub, the listeners and the delivery all name it, and
none of them needs the others to.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from feedfabric.core.models import Post
from feedfabric.db.loaders import Loaders
from feedfabric.db.post_extras import PageExtras

__all__ = ["TimelineItem"]

NOBODY: frozenset[int] = frozenset()


@dataclass(frozen=True)
class TimelineItem:
    """A new home-feed post with the rows every recipient renders alike."""

    post: Post
    # The polled chunk's extras as any viewer sees them (db.post_extras); None for replayed rows, whose
    # loaders fetch the rest.
    extras: PageExtras | None = None
    # What renders the item keeps here for its other recipients, by its own key: the GraphQL engine's
    # renderings, shared by every subscriber of one selection (feedfabric.adapter.execution.renderings).
    renders: dict[object, Any] = field(default_factory=dict, compare=False, repr=False)
    # Who among the members connected here likes the post and the original it reposts (db.realtime.likers:
    # one statement for every recipient), as UUID integers by post ID; None: not read (a replayed row).
    likers: Mapping[uuid.UUID, frozenset[int]] | None = field(default=None, compare=False, repr=False)

    @property
    def original(self) -> Post | None:
        """The reposted original, when it is visible to everyone (so any viewer's visible_post agrees)."""
        if self.extras is None or self.post.repost_of is None:
            return None
        return self.extras.originals.get(self.post.repost_of)

    def viewer_liked(self, member: int) -> bool | None:
        """The post's `viewerHasLiked` for the member (its UUID's integer), None when the likers were not read."""
        likers = self.likers
        return None if likers is None else member in likers.get(self.post.id, NOBODY)

    def prime(self, loaders: Loaders) -> None:
        """Fills a subscriber's fresh loaders with what is the same for every viewer, and with the viewer's
        own likes of the post and its original when the delivery read them."""
        if self.extras is None:
            return
        extras = self._extras_for(loaders.viewer_id)
        if extras is not None:
            loaders.post_extras.prime(self.post.id, extras)
        original = self.original
        if original is not None:
            loaders.visible_post.prime(original.id, original)
        for post_id in [self.post.id] + ([original.id] if original else []):
            found = self.extras.extras.get(post_id)
            if found is None:
                continue
            if found.author is not None:
                loaders.member.prime(found.author.id, found.author)

    def _extras_for(self, viewer: uuid.UUID | None) -> PageExtras | None:
        """The extras as the viewer sees them: read for no viewer, so nobody's like is in them. Without the
        likers that is right only for a post this new that reposts nothing (nobody has liked it yet); with
        them each `viewer_liked` is set from them, a repost's original's too. None: the loaders read them."""
        extras = self.extras
        assert extras is not None
        likers = self.likers
        original = self.original
        if likers is None:
            return extras if self.post.repost_of is None else None
        if self.post.repost_of is not None and original is None:
            return None
        member = viewer.int if viewer is not None else None
        changed = {}
        for post_id in [self.post.id] + ([original.id] if original else []):
            found = extras.extras.get(post_id)
            liked = member is not None and member in likers.get(post_id, NOBODY)
            if found is not None and found.viewer_liked != liked:
                changed[post_id] = dataclasses.replace(found, viewer_liked=liked)
        if not changed:
            return extras
        return PageExtras({**extras.extras, **changed}, extras.originals)
