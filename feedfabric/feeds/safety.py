"""Blocks, mutes and muted words: the writes. Each commits its relations version bump and its event with it.

A block is mutual in effect: from its commit, the visibility rule (migration
320) hides each member's posts from the other everywhere, follows and
favourites between them end both ways, and any interaction between them is
BLOCKED (feeds.blocking, called by follows, favourites, likes, comments and
reposts); two API instances applying one block at once agree on one row and
one event.

Who blocked whom is private: nothing here tells the blocked member.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from feedfabric.core.errors import BadInput, LimitReached
from feedfabric.core.ids import new_id
from feedfabric.core.models import Member, Page
from feedfabric.core.settings import Settings
from feedfabric.db import favourites as favourites_db
from feedfabric.db import follows as follows_db
from feedfabric.db import members as members_db
from feedfabric.db import relations as relations_db
from feedfabric.db.outbox import add_event
from feedfabric.db.queryable import Queryable
from feedfabric.feeds import paging
from feedfabric.feeds.matcher import CONTEXTS
from feedfabric.feeds.members import Listed, target

__all__ = [
    "MAX_MUTED_WORDS",
    "MutedWord",
    "add_muted_word",
    "block",
    "blocked_members",
    "mute",
    "muted_members",
    "muted_words",
    "remove_muted_word",
    "unblock",
    "unmute",
]

MAX_MUTED_WORDS = 1000
MAX_PHRASE_LENGTH = 100
# The longest expiry a mute or a word may be given (ten years): past it, give none.
MAX_EXPIRY_SECONDS = 10 * 365 * 24 * 3600


async def block(conn: asyncpg.Connection, settings: Settings, blocker: Member, external_id: str) -> Member:
    """Idempotent. Ends follows and favourites both ways (each ended follow is a MemberUnfollowed, so
    counts, timelines and follow notifications follow as on an unfollow)."""
    blocked = await target(conn, external_id)
    return await block_member(conn, settings, blocker, blocked)


async def block_member(conn: asyncpg.Connection, settings: Settings, blocker: Member, blocked: Member) -> Member:
    """`block` for a member already looked up (reports' alsoBlock, importBlocks)."""
    if blocked.id == blocker.id:
        raise BadInput("you cannot block yourself")
    await relations_db.lock_pair(conn, blocker.id, blocked.id, exclusive=True)
    if not await relations_db.add_block(conn, blocker.id, blocked.id):
        return blocked
    for follower, followed in ((blocker.id, blocked.id), (blocked.id, blocker.id)):
        if await follows_db.remove(conn, follower, "member", str(followed)):
            await add_event(
                conn,
                "MemberUnfollowed",
                str(follower),
                {"followerId": str(follower), "memberId": str(followed), "reason": "block"},
                shards=settings.outbox_shards,
            )
        await favourites_db.remove(conn, follower, followed)
    await relations_db.bump(conn, [blocker.id, blocked.id])
    await add_event(
        conn,
        "MemberBlocked",
        str(blocker.id),
        {"memberId": str(blocker.id), "blockedId": str(blocked.id)},
        shards=settings.outbox_shards,
    )
    return blocked


async def unblock(conn: asyncpg.Connection, settings: Settings, blocker: Member, external_id: str) -> Member:
    """Idempotent; restores what is shown, not the follows."""
    blocked = await target(conn, external_id)
    if blocked.id == blocker.id:
        raise BadInput("you cannot block yourself")
    await relations_db.lock_pair(conn, blocker.id, blocked.id, exclusive=True)
    if await relations_db.remove_block(conn, blocker.id, blocked.id):
        await relations_db.bump(conn, [blocker.id, blocked.id])
        await add_event(
            conn,
            "MemberUnblocked",
            str(blocker.id),
            {"memberId": str(blocker.id), "blockedId": str(blocked.id)},
            shards=settings.outbox_shards,
        )
    return blocked


def _expiry(seconds: int | None) -> int | None:
    if seconds is not None and not (1 <= seconds <= MAX_EXPIRY_SECONDS):
        raise BadInput(f"expiresInSeconds must be between 1 and {MAX_EXPIRY_SECONDS}")
    return seconds


async def mute(
    conn: asyncpg.Connection,
    settings: Settings,
    muter: Member,
    external_id: str,
    notifications: bool,
    expires_in_seconds: int | None,
) -> Member:
    """A second call replaces the choice of notifications and the expiry. The muted member is told nothing."""
    expiry = _expiry(expires_in_seconds)
    muted = await target(conn, external_id)
    if muted.id == muter.id:
        raise BadInput("you cannot mute yourself")
    await relations_db.put_mute(conn, muter.id, muted.id, notifications, expiry)
    await relations_db.bump(conn, [muter.id])
    await add_event(
        conn,
        "MemberMuted",
        str(muter.id),
        {
            "memberId": str(muter.id),
            "mutedId": str(muted.id),
            "notifications": notifications,
            "expiresInSeconds": expiry,
        },
        shards=settings.outbox_shards,
    )
    return muted


async def unmute(conn: asyncpg.Connection, settings: Settings, muter: Member, external_id: str) -> Member:
    muted = await target(conn, external_id)
    if await relations_db.remove_mute(conn, muter.id, muted.id):
        await relations_db.bump(conn, [muter.id])
        await add_event(
            conn,
            "MemberUnmuted",
            str(muter.id),
            {"memberId": str(muter.id), "mutedId": str(muted.id)},
            shards=settings.outbox_shards,
        )
    return muted


def clean_phrase(phrase: str) -> str:
    """1 to 100 characters once surrounding spaces are gone; no control characters."""
    cleaned = phrase.strip()
    if not cleaned:
        raise BadInput("a muted phrase may not be empty")
    if len(cleaned) > MAX_PHRASE_LENGTH:
        raise BadInput(f"a muted phrase is at most {MAX_PHRASE_LENGTH} characters")
    if any(ord(c) < 32 or c == "\x7f" for c in cleaned):
        raise BadInput("a muted phrase may not hold control characters")
    return cleaned


async def _words_changed(conn: asyncpg.Connection, settings: Settings, member: Member) -> None:
    """Every API instance's live filters read the member's words again (realtime.consumer)."""
    await relations_db.bump(conn, [member.id])
    await add_event(
        conn, "MutedWordsChanged", str(member.id), {"memberId": str(member.id)}, shards=settings.outbox_shards
    )


async def add_muted_word(
    conn: asyncpg.Connection,
    settings: Settings,
    member: Member,
    phrase: str,
    whole_word: bool,
    contexts: list[str] | None,
    expires_in_seconds: int | None,
) -> relations_db.MutedWordRow:
    cleaned = clean_phrase(phrase)
    expiry = _expiry(expires_in_seconds)
    chosen = sorted(set(contexts or ()), key=CONTEXTS.index)
    await members_db.lock(conn, member.id)  # the cap is counted with the member's other writes serialised
    if await relations_db.count_words(conn, member.id) >= MAX_MUTED_WORDS:
        raise LimitReached(f"you already have {MAX_MUTED_WORDS} muted words; remove one first")
    word = await relations_db.add_word(conn, new_id(), member.id, cleaned, whole_word, chosen, expiry)
    await _words_changed(conn, settings, member)
    return word


async def remove_muted_word(conn: asyncpg.Connection, settings: Settings, member: Member, word_id: uuid.UUID) -> bool:
    """False when the member has no such word (someone else's included)."""
    removed = await relations_db.remove_word(conn, member.id, word_id)
    if removed:
        await _words_changed(conn, settings, member)
    return removed


@dataclass(frozen=True)
class MutedWord:
    """A muted word as the API shows it: its contexts listed even when it was given none (all)."""

    row: relations_db.MutedWordRow

    @property
    def contexts(self) -> list[str]:
        return list(self.row.contexts) or list(CONTEXTS)


async def muted_words(conn: Queryable, member: Member) -> list[MutedWord]:
    return [MutedWord(r) for r in await relations_db.words(conn, member.id)]


def _listed_page(rows: list[asyncpg.Record], limit: int) -> Page:
    items = [Listed(Member.of(r), paging.position_cursor(r["listed_at"], str(r["id"]))) for r in rows[:limit]]
    return Page(items, items[-1].cursor if len(rows) > limit else None)


async def blocked_members(conn: Queryable, member: Member, after: str | None, limit: int) -> Page:
    """Most recently blocked first."""
    rows = await relations_db.blocked_page(conn, member.id, paging.position(after), limit + 1)
    return _listed_page(rows, limit)


async def muted_members(conn: Queryable, member: Member, after: str | None, limit: int) -> Page:
    """Most recently muted first; expired mutes are not listed."""
    rows = await relations_db.muted_page(conn, member.id, paging.position(after), limit + 1)
    return _listed_page(rows, limit)
