"""Who to follow and topics worth following: types and their root fields (mixed into Query and Mutation)."""

from __future__ import annotations

from enum import Enum

import strawberry

from feedfabric.resolvers import suggestions as resolve
from feedfabric.schema.types import ContextInfo, Member


@strawberry.enum(description="Why a member or topic is suggested.")
class SuggestionReason(Enum):
    FOLLOWED_BY_PEOPLE_YOU_FOLLOW = "followed_by_people_you_follow"
    SIMILAR_ENGAGEMENT = "similar_engagement"
    POPULAR_IN_YOUR_TOPICS = "popular_in_your_topics"
    POPULAR = "popular"


@strawberry.type
class MemberSuggestion:
    member: Member
    reason: SuggestionReason


@strawberry.type
class TopicSuggestion:
    tag: str = strawberry.field(
        description="A hashtag or inferred topic, lower case, without '#'; follow it with followTag."
    )
    reason: SuggestionReason
    recent_post_count: int = strawberry.field(description="Live posts on it in the last 7 days.")


@strawberry.type
class SuggestionQuery:
    @strawberry.field(
        description="Who to follow: never a member the viewer follows, blocks, mutes or is blocked by, nor a"
        " suspended one (GET /suggestions/members)."
    )
    async def suggested_members(self, info: ContextInfo, first: int | None = 20) -> list[MemberSuggestion]:
        return [
            MemberSuggestion(member=Member(row=s.member), reason=SuggestionReason(s.reason))
            for s in await resolve.members(info.context, first)
        ]

    @strawberry.field(description="Topics worth following, for a new member too (GET /suggestions/topics).")
    async def suggested_topics(self, info: ContextInfo, first: int | None = 20) -> list[TopicSuggestion]:
        return [
            TopicSuggestion(tag=s.tag, reason=SuggestionReason(s.reason), recent_post_count=s.recent_post_count)
            for s in await resolve.topics(info.context, first)
        ]


@strawberry.type
class SuggestionMutation:
    @strawberry.mutation(description="Keeps a suggested member out of suggestedMembers for 30 days.")
    async def dismiss_suggestion(self, info: ContextInfo, external_user_id: str) -> bool:
        return await resolve.dismiss(info.context, external_user_id)
