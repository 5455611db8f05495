"""The item a new home-feed post travels as, from the realtime consumer to every subscriber it reaches.

A module of its own: the hub, the listeners and the delivery all name it, and
none of them needs the others to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from feedfabric.core.models import Post
from feedfabric.db.loaders import Loaders
from feedfabric.db.post_extras import PageExtras

__all__ = ["TimelineItem"]


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

    @property
    def original(self) -> Post | None:
        """The reposted original, when it is visible to everyone (so any viewer's visible_post agrees)."""
        if self.extras is None or self.post.repost_of is None:
            return None
        return self.extras.originals.get(self.post.repost_of)

    def prime(self, loaders: Loaders) -> None:
        """Fills a subscriber's fresh loaders with what is the same for every viewer."""
        if self.extras is None:
            return
        if self.post.repost_of is None:
            # The extras were read for no viewer: right for every viewer of a post this new (nobody has liked
            # it yet), not of a repost's original, whose viewerHasLiked is each viewer's own.
            loaders.post_extras.prime(self.post.id, self.extras)
        original = self.original
        if original is not None:
            loaders.visible_post.prime(original.id, original)
        for post_id in [self.post.id] + ([original.id] if original else []):
            extras = self.extras.extras.get(post_id)
            if extras is None:
                continue
            if extras.author is not None:
                loaders.member.prime(extras.author.id, extras.author)
