"""Likes and comments, each committed with its engagement event."""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.core.errors import Blocked, NotFound
from feedfabric.core.ids import new_id
from feedfabric.core.models import Comment, Member, Post
from feedfabric.core.settings import Settings
from feedfabric.db import comments as comments_db
from feedfabric.db import likes as likes_db
from feedfabric.db import members as members_db
from feedfabric.db import posts as posts_db
from feedfabric.db.outbox import add_event
from feedfabric.feeds import playlists, text

__all__ = ["comment", "like", "unlike"]


async def _visible_post(conn: asyncpg.Connection, post_id: uuid.UUID, viewer: Member, *, liking: bool = True) -> Post:
    """Locked for share until the transaction ends: a deletion (or hold) under way is waited for and
    seen, so no like or comment commits on a post deleted after it was checked. A like or comment on a
    post of a member blocked either way (or sharing one) is BLOCKED, in the same statement as the
    visibility check (`liking` False: an unlike, which only undoes, is NOT_FOUND as before)."""
    found = await posts_db.get_to_act(conn, post_id, viewer.id)
    if found is None:
        raise NotFound("post not found")
    post, visible, blocked = found
    if blocked and liking:
        raise Blocked("you cannot interact with this member")
    if not visible:
        raise NotFound("post not found")
    return post


async def like(conn: asyncpg.Connection, settings: Settings, member: Member, post_id: uuid.UUID) -> Post:
    post = await _visible_post(conn, post_id, member)
    if await likes_db.add(conn, post.id, member.id):
        # The Liked playlist moves with the like, in its transaction, through the ordinary playlist path.
        await playlists.on_liked(conn, member, post.id)
        await add_event(
            conn,
            "PostLiked",
            str(post.id),
            {"postId": str(post.id), "memberId": str(member.id), "authorId": str(post.author_id)},
            shards=settings.outbox_shards,
        )
    return post


async def unlike(conn: asyncpg.Connection, settings: Settings, member: Member, post_id: uuid.UUID) -> Post:
    post = await _visible_post(conn, post_id, member, liking=False)
    if await likes_db.remove(conn, post.id, member.id):
        await playlists.on_unliked(conn, member, post.id)
        await add_event(
            conn,
            "PostUnliked",
            str(post.id),
            {"postId": str(post.id), "memberId": str(member.id), "authorId": str(post.author_id)},
            shards=settings.outbox_shards,
        )
    return post


async def comment(
    conn: asyncpg.Connection, settings: Settings, member: Member, post_id: uuid.UUID, content: str
) -> Comment:
    content = text.clean_text(content, "content", max_length=settings.comment_max_length)
    post = await _visible_post(conn, post_id, member)
    created = await comments_db.insert(conn, new_id(), post.id, member.id, content)
    names = text.mentions(content)
    found = await members_db.ids_by_usernames(conn, names) if names else {}
    mentioned = sorted(m for m in found.values() if m != member.id)
    await posts_db.replace_mentions(conn, post.id, created.id, mentioned)
    await add_event(
        conn,
        "CommentCreated",
        str(post.id),
        {
            "commentId": str(created.id),
            "postId": str(post.id),
            "memberId": str(member.id),
            "authorId": str(post.author_id),
            "mentionedIds": [str(m) for m in mentioned],
        },
        shards=settings.outbox_shards,
    )
    return created
