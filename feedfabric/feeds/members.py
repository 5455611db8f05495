"""Profiles, follows of members and tags, favourites and suspension."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from feedfabric.core.errors import BadInput, Blocked, FavouriteLimitReached, NotFound
from feedfabric.core.ids import new_id
from feedfabric.core.models import Member, Page
from feedfabric.core.settings import Settings
from feedfabric.db import favourites as favourites_db
from feedfabric.db import follows as follows_db
from feedfabric.db import members as members_db
from feedfabric.db import relations as relations_db
from feedfabric.db.outbox import add_event
from feedfabric.feeds import paging, reader_effects, text
from feedfabric.feeds.blocking import ensure_not_blocked

__all__ = [
    "add_favourite",
    "follow",
    "follow_tag",
    "followed_tags",
    "followers",
    "following",
    "remove_favourite",
    "set_suspended",
    "unfollow",
    "upsert_profile",
]


async def upsert_profile(
    conn: asyncpg.Connection,
    external_id: str,
    username: str,
    display_name: str,
    avatar_url: str | None,
) -> Member:
    username = text.username(username)
    display_name = text.clean_text(display_name, "displayName", max_length=100)
    avatar_url = text.url(avatar_url, "avatarUrl")
    taken = await members_db.by_username(conn, username)
    if taken is not None and taken.external_id != external_id:
        raise BadInput("that username is taken")
    try:
        async with conn.transaction():
            return await members_db.upsert(conn, new_id(), external_id, username, display_name, avatar_url)
    except asyncpg.UniqueViolationError:
        raise BadInput("that username is taken") from None


async def target(conn: asyncpg.Connection | asyncpg.Pool, external_id: str) -> Member:
    if not external_id or "\x00" in external_id or len(external_id) > 200:
        raise BadInput("externalUserId is not valid")
    member = await members_db.by_external_id(conn, external_id)
    if member is None:
        raise NotFound("member not found")
    return member


async def follow(conn: asyncpg.Connection, settings: Settings, follower: Member, external_id: str) -> Member:
    """BLOCKED when either member blocks the other: the lookup takes the pair's lock (feeds.blocking) and
    the insert checks for a block, so a follow racing a block never outlives it."""
    if not external_id or "\x00" in external_id or len(external_id) > 200:
        raise BadInput("externalUserId is not valid")
    row = await relations_db.member_locking_pair(conn, external_id, follower.id)
    if row is None:
        raise NotFound("member not found")
    followed = Member.of(row)
    if followed.id == follower.id:
        raise BadInput("you cannot follow yourself")
    if not followed.active:
        raise NotFound("member not found")
    added = await relations_db.follow_unless_blocked(conn, follower.id, followed.id)
    if added is None:
        raise Blocked("you cannot interact with this member")
    if added:
        await add_event(
            conn,
            "MemberFollowed",
            str(follower.id),
            {"followerId": str(follower.id), "memberId": str(followed.id)},
            shards=settings.outbox_shards,
        )
    return followed


async def unfollow(conn: asyncpg.Connection, settings: Settings, follower: Member, external_id: str) -> Member:
    followed = await target(conn, external_id)
    if await follows_db.remove(conn, follower.id, "member", str(followed.id)):
        await add_event(
            conn,
            "MemberUnfollowed",
            str(follower.id),
            {"followerId": str(follower.id), "memberId": str(followed.id)},
            shards=settings.outbox_shards,
        )
    return followed


async def follow_tag(conn: asyncpg.Connection, settings: Settings, follower: Member, tag: str, *, on: bool) -> bool:
    """An unfollow is an event, as a member's is: worker-events takes the tag's posts out of the
    timeline. A follow of a tag is none: it merges nothing (a member's follow merges their posts)."""
    tag = text.normalise_tag(tag)
    if on:
        await follows_db.add(conn, follower.id, "tag", tag)
        # A declared interest: the tag's topic effect starts at its prior for the next For You page.
        await reader_effects.on_follow_tag(conn, follower.id, tag)
    elif await follows_db.remove(conn, follower.id, "tag", tag):
        await add_event(
            conn,
            "TagUnfollowed",
            str(follower.id),
            {"followerId": str(follower.id), "tag": tag},
            shards=settings.outbox_shards,
        )
    return True


async def add_favourite(conn: asyncpg.Connection, settings: Settings, member: Member, external_id: str) -> Member:
    """A suspended member is NOT_FOUND here, as in `follow`: otherwise they would take one of the
    limited slots while every list of favourites leaves them out."""
    favourite = await target(conn, external_id)
    if favourite.id == member.id:
        raise BadInput("you cannot favourite yourself")
    if not favourite.active:
        raise NotFound("member not found")
    await ensure_not_blocked(conn, member.id, favourite.id)
    await members_db.lock(conn, member.id)
    if await favourites_db.exists(conn, member.id, favourite.id):
        return favourite
    if await favourites_db.count_active(conn, member.id) >= settings.favourite_limit:
        raise FavouriteLimitReached(f"you already have {settings.favourite_limit} favourites; remove one first")
    await favourites_db.add(conn, member.id, favourite.id)
    return favourite


async def remove_favourite(conn: asyncpg.Connection, member: Member, external_id: str) -> Member:
    favourite = await target(conn, external_id)
    await favourites_db.remove(conn, member.id, favourite.id)
    return favourite


async def set_suspended(conn: asyncpg.Connection, external_id: str, suspended: bool) -> Member:
    member = await target(conn, external_id)
    return await members_db.set_status(conn, member.id, "suspended" if suspended else "active")


@dataclass(frozen=True, slots=True)
class Listed:
    """A member in a follow list, with the list's cursor at that member."""

    member: Member
    cursor: str


def lists_hidden(member: Member, viewer_id: uuid.UUID | None) -> bool:
    """A suspended member's lists (follows, playlists) are hidden from everyone but themselves, as
    their posts are."""
    return not member.active and member.id != viewer_id


def _follow_page(rows: list[asyncpg.Record], limit: int) -> Page:
    items = [Listed(Member.of(r), paging.position_cursor(r["followed_at"], str(r["id"]))) for r in rows[:limit]]
    return Page(items, items[-1].cursor if len(rows) > limit else None)


async def followers(
    conn: asyncpg.Connection | asyncpg.Pool, member: Member, viewer_id: uuid.UUID | None, after: str | None, limit: int
) -> Page:
    """Active members following `member`, most recent follow first; one statement a page."""
    before = paging.position(after)
    if lists_hidden(member, viewer_id):
        return Page([], None)
    return _follow_page(await follows_db.followers_page(conn, member.id, before, limit + 1), limit)


async def following(
    conn: asyncpg.Connection | asyncpg.Pool, member: Member, viewer_id: uuid.UUID | None, after: str | None, limit: int
) -> Page:
    """Active members `member` follows, most recent follow first; one statement a page."""
    before = paging.position(after)
    if lists_hidden(member, viewer_id):
        return Page([], None)
    return _follow_page(await follows_db.following_page(conn, member.id, before, limit + 1), limit)


async def followed_tags(conn: asyncpg.Connection | asyncpg.Pool, member: Member) -> list[str]:
    return await follows_db.followed_tags(conn, member.id)
