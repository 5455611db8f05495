"""The event catalogue (docs/api.md, "Events"): each event's topic and key.

Events are thin: IDs and the few facts a consumer cannot look up later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ENGAGEMENT", "MEDIA", "MEMBERS", "NOTIFICATIONS", "POSTS", "TOPIC_OF", "Event"]

POSTS = "feedfabric.posts"
ENGAGEMENT = "feedfabric.engagement"
MEMBERS = "feedfabric.members"
MEDIA = "feedfabric.media"
NOTIFICATIONS = "feedfabric.notifications"

TOPICS = (POSTS, ENGAGEMENT, MEMBERS, MEDIA, NOTIFICATIONS)

TOPIC_OF: dict[str, str] = {
    "PostCreated": POSTS,
    "PostUpdated": POSTS,
    "PostDeleted": POSTS,
    "PostHeld": POSTS,
    "PostReleased": POSTS,
    "PostLiked": ENGAGEMENT,
    "PostUnliked": ENGAGEMENT,
    "CommentCreated": ENGAGEMENT,
    "MemberFollowed": MEMBERS,
    "MemberUnfollowed": MEMBERS,
    "MemberReturned": MEMBERS,
    "TagUnfollowed": MEMBERS,
    "MemberBlocked": MEMBERS,
    "MemberUnblocked": MEMBERS,
    "MemberMuted": MEMBERS,
    "MemberUnmuted": MEMBERS,
    "MutedWordsChanged": MEMBERS,
    "MediaUploaded": MEDIA,
    "NotificationCreated": NOTIFICATIONS,
    "NotificationGroupUpdated": NOTIFICATIONS,
}


@dataclass(frozen=True)
class Event:
    """One event as consumers see it: the outbox row ID is its idempotency key."""

    event_id: int
    type: str
    key: str
    version: int
    data: dict[str, Any]

    def to_message(self) -> dict[str, Any]:
        return {"eventId": self.event_id, "type": self.type, "version": self.version, "data": self.data}

    @classmethod
    def from_message(cls, key: str, message: dict[str, Any]) -> Event:
        return cls(
            event_id=int(message["eventId"]),
            type=str(message["type"]),
            key=key,
            version=int(message["version"]),
            data=dict(message["data"]),
        )
