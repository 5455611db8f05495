"""Safety: blocks, mutes and muted words, their types and root fields (mixed into Query and Mutation)."""

from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry

from feedfabric.feeds import safety as safety_svc
from feedfabric.resolvers import safety
from feedfabric.schema.cost import MAX_ITEMS
from feedfabric.schema.types import ContextInfo, Member, MemberConnection


@strawberry.enum(description="Where a muted word applies. HOME covers the home feed and its live items.")
class FilterContext(Enum):
    HOME = "HOME"
    FAVOURITES = "FAVOURITES"
    TAGS = "TAGS"
    MENTIONS = "MENTIONS"
    FOR_YOU = "FOR_YOU"
    NOTIFICATIONS = "NOTIFICATIONS"
    COMMENTS = "COMMENTS"


@strawberry.type
class MutedWord:
    word: strawberry.Private[safety_svc.MutedWord]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.word.row.id))

    @strawberry.field(
        description="As entered. Matching is case-insensitive (NFKC, Unicode case folding); a phrase also"
        " matches the hashtag of the same text."
    )
    def phrase(self) -> str:
        return self.word.row.phrase

    @strawberry.field(description="Match on Unicode word boundaries only (default), or anywhere in the text.")
    def whole_word(self) -> bool:
        return self.word.row.whole_word

    @strawberry.field
    def contexts(self) -> list[FilterContext]:
        return [FilterContext(c) for c in self.word.contexts]

    @strawberry.field
    def expires_at(self) -> datetime | None:
        return self.word.row.expires_at


@strawberry.type
class SafetyQuery:
    @strawberry.field(description="Members the viewer has blocked, most recently blocked first (GET /blocks).")
    async def blocked_members(
        self, info: ContextInfo, first: int | None = 20, after: str | None = None
    ) -> MemberConnection:
        return MemberConnection.of(await safety.blocked_members(info.context, first, after), after)

    @strawberry.field(
        description="Members the viewer has muted, most recently muted first; expired mutes are not listed"
        " (GET /mutes)."
    )
    async def muted_members(
        self, info: ContextInfo, first: int | None = 20, after: str | None = None
    ) -> MemberConnection:
        return MemberConnection.of(await safety.muted_members(info.context, first, after), after)

    # All of them, up to the cap: the query cost counts that many (a page's 100 was less).
    @strawberry.field(
        description="The viewer's muted words that have not expired, newest first.",
        metadata={MAX_ITEMS: safety_svc.MAX_MUTED_WORDS},
    )
    async def muted_words(self, info: ContextInfo) -> list[MutedWord]:
        return [MutedWord(word=w) for w in await safety.muted_words(info.context)]


@strawberry.type
class SafetyMutation:
    @strawberry.mutation(description="PUT /blocks/{externalUserId}; idempotent. Ends follows and favourites both ways.")
    async def block(self, info: ContextInfo, external_user_id: str) -> Member:
        return Member(row=await safety.block(info.context, external_user_id))

    @strawberry.mutation(description="DELETE /blocks/{externalUserId}; idempotent. Restores no follow.")
    async def unblock(self, info: ContextInfo, external_user_id: str) -> Member:
        return Member(row=await safety.unblock(info.context, external_user_id))

    @strawberry.mutation(
        description="PUT /mutes/{externalUserId}; a second call replaces the choice of notifications and the expiry."
    )
    async def mute(
        self,
        info: ContextInfo,
        external_user_id: str,
        notifications: bool | None = True,
        expires_in_seconds: int | None = None,
    ) -> Member:
        return Member(row=await safety.mute(info.context, external_user_id, notifications, expires_in_seconds))

    @strawberry.mutation(description="DELETE /mutes/{externalUserId}; idempotent.")
    async def unmute(self, info: ContextInfo, external_user_id: str) -> Member:
        return Member(row=await safety.unmute(info.context, external_user_id))

    @strawberry.mutation
    async def add_muted_word(
        self,
        info: ContextInfo,
        phrase: str,
        whole_word: bool | None = True,
        contexts: list[FilterContext] | None = None,
        expires_in_seconds: int | None = None,
    ) -> MutedWord:
        names = [c.value for c in contexts] if contexts is not None else None
        word = await safety.add_muted_word(info.context, phrase, whole_word, names, expires_in_seconds)
        return MutedWord(word=word)

    @strawberry.mutation
    async def remove_muted_word(self, info: ContextInfo, id: strawberry.ID) -> bool:
        return await safety.remove_muted_word(info.context, id)
