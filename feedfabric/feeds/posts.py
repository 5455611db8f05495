"""Writing posts: create, repost, edit, delete. Each write commits its outbox event with it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from feedfabric.core import failpoints
from feedfabric.core.errors import BadInput, Blocked, Forbidden, NotFound
from feedfabric.core.ids import id_millis, new_id
from feedfabric.core.models import Extras, Member, PageExtras, Post
from feedfabric.core.moderation import Target
from feedfabric.core.settings import Settings
from feedfabric.db import members as members_db
from feedfabric.db import posts as posts_db
from feedfabric.db import reports as reports_db
from feedfabric.db.outbox import EventRow, add_event
from feedfabric.feeds import moderation_terms, text

__all__ = [
    "MAX_HASHTAGS_PER_POST",
    "MAX_MEDIA_PER_POST",
    "MAX_MENTIONS_PER_POST",
    "create_post",
    "delete_post",
    "fresh_extras",
    "repost",
    "set_held",
    "update_post",
]

MAX_MEDIA_PER_POST = 4
# Post.mentions has no `first`: the query cost multiplies it by this bound (schema/cost.py).
MAX_MENTIONS_PER_POST = 50
# Each hashtag puts the post in a tag feed and before that tag's followers: a post carrying hundreds
# would spam them all at once.
MAX_HASHTAGS_PER_POST = 30


def _entities(content: str) -> tuple[list[str], list[str]]:
    """The hashtags and @mentioned usernames of a text, within their bounds."""
    tags = text.hashtags(content)
    if len(tags) > MAX_HASHTAGS_PER_POST:
        raise BadInput(f"a post carries at most {MAX_HASHTAGS_PER_POST} hashtags")
    names = text.mentions(content)
    if len(names) > MAX_MENTIONS_PER_POST:
        raise BadInput(f"a post mentions at most {MAX_MENTIONS_PER_POST} members")
    return list(tags), list(names)


async def _write_entities(conn: asyncpg.Connection, post: Post, author: Member) -> list[uuid.UUID]:
    """Replaces the hashtags and @mentions of an edited text; returns the members mentioned (never the author)."""
    tags, names = _entities(post.content)
    await posts_db.replace_hashtags(conn, post.id, tags)
    found = await members_db.ids_by_usernames(conn, names) if names else {}
    mentioned = sorted(m for m in found.values() if m != author.id)
    await posts_db.replace_mentions(conn, post.id, None, mentioned)
    return mentioned


async def create_post(
    conn: asyncpg.Connection,
    settings: Settings,
    author: Member,
    content: str,
    media_ids: Sequence[uuid.UUID] = (),
) -> Post:
    content = text.clean_text(content, "content", max_length=settings.post_max_length)
    if len(set(media_ids)) != len(media_ids) or len(media_ids) > MAX_MEDIA_PER_POST:
        raise BadInput(f"a post takes at most {MAX_MEDIA_PER_POST} distinct media")
    tags, names = _entities(content)
    post_id = new_id()
    # The PostCreated event is written by the post's own statement, which adds its mentionedIds.
    created = EventRow.of(
        "PostCreated",
        str(post_id),
        {"postId": str(post_id), "authorId": str(author.id), "createdAtMs": id_millis(post_id), "repostOf": None},
        shards=settings.outbox_shards,
    )
    post, mentioned, terms_version = await posts_db.insert_with_entities(
        conn, post_id, author.id, content, tags, names, created
    )
    if media_ids:
        await _attach_media(conn, post.id, author.id, media_ids)
    post = await _screen(conn, settings, post, terms_version)
    failpoints.crash_point("post-before-commit", content=content)  # fault suite: dies with the transaction open
    return post


async def _screen(conn: asyncpg.Connection, settings: Settings, post: Post, terms_version: int | None = None) -> Post:
    """A text carrying a moderation term is held as holdPost holds (after its PostCreated or
    PostUpdated, so every consumer sees it written, then held) and a report with no reporter is filed
    for a moderator, all in the writing transaction: the post is never shown to anyone but its author.
    `terms_version`, when the caller read it with its own statement, spares the round trip that reads it."""
    if not await moderation_terms.holds(conn, post.content, terms_version):
        return post
    post = await set_held(conn, settings, post.id, True)
    target = Target("post", post.id, post.author_id, post_id=post.id)
    await reports_db.insert(conn, new_id(), None, target, "other", None)
    return post


def fresh_extras(post: Post, author: Member) -> PageExtras:
    """What a post created without media shows beside its row the moment it commits: its author, the hashtags
    of its text, no likes or comments. The mutation answers with these rather than reading them back (one
    statement less a createPost, issue 50); inferred topics come later, from worker-embeddings."""
    return PageExtras({post.id: Extras(author, text.hashtags(post.content), [], 0, 0, False)}, {})


async def _attach_media(
    conn: asyncpg.Connection, post_id: uuid.UUID, owner_id: uuid.UUID, media_ids: Sequence[uuid.UUID]
) -> None:
    attached = await conn.fetch(
        """INSERT INTO post_media (post_id, media_id, position)
           SELECT $1, m.id, a.position::smallint
           FROM unnest($3::uuid[]) WITH ORDINALITY AS a(id, position)
           JOIN media m ON m.id = a.id AND m.owner_id = $2 AND m.status = 'ready'
           RETURNING media_id""",
        post_id,
        owner_id,
        list(media_ids),
    )
    if len(attached) != len(media_ids):
        raise BadInput("a post may attach only your own media once it is ready")


async def repost(conn: asyncpg.Connection, settings: Settings, author: Member, post_id: uuid.UUID) -> Post:
    """Sharing a repost shares its original; sharing twice returns the first repost."""
    target = await posts_db.get(conn, post_id)
    if target is None:
        raise NotFound("post not found")
    _visible_or_raise(*await posts_db.visibility(conn, post_id, author.id))
    original_id = target.repost_of or target.id
    # The original locked for share, as a like locks its post (feeds.reactions): a deletion under way is seen.
    original = await posts_db.get(conn, original_id, for_share=True)
    if original is None:
        raise NotFound("post not found")
    _visible_or_raise(*await posts_db.visibility(conn, original_id, author.id))
    existing = await posts_db.live_repost(conn, author.id, original_id)
    if existing is not None:
        return existing
    post = await posts_db.insert_repost(conn, new_id(), author.id, original_id)
    if post is None:  # a concurrent share of the same post committed first
        existing = await posts_db.live_repost(conn, author.id, original_id)
        if existing is None:
            raise NotFound("post not found")
        return existing
    await add_event(
        conn,
        "PostCreated",
        str(post.id),
        {
            "postId": str(post.id),
            "authorId": str(author.id),
            "createdAtMs": id_millis(post.id),
            "repostOf": str(original_id),
            "originalAuthorId": str(original.author_id),
            "mentionedIds": [],
        },
        shards=settings.outbox_shards,
    )
    return post


def _visible_or_raise(visible: bool, blocked: bool) -> None:
    """BLOCKED before NOT_FOUND: sharing a post of a member blocked either way is refused as such."""
    if blocked:
        raise Blocked("you cannot interact with this member")
    if not visible:
        raise NotFound("post not found")


async def _own_post(conn: asyncpg.Connection, author: Member, post_id: uuid.UUID) -> Post:
    post = await posts_db.get(conn, post_id, for_update=True)
    if post is None or post.status == "deleted":
        raise NotFound("post not found")
    if post.author_id != author.id:
        raise Forbidden("only the author may change this post")
    return post


async def update_post(
    conn: asyncpg.Connection, settings: Settings, author: Member, post_id: uuid.UUID, content: str
) -> Post:
    content = text.clean_text(content, "content", max_length=settings.post_max_length)
    post = await _own_post(conn, author, post_id)
    if post.repost_of is not None:
        raise BadInput("a repost has no text to edit")
    post = await posts_db.update_content(conn, post.id, content)
    mentioned = await _write_entities(conn, post, author)
    await add_event(
        conn,
        "PostUpdated",
        str(post.id),
        {"postId": str(post.id), "authorId": str(author.id), "mentionedIds": [str(m) for m in mentioned]},
        shards=settings.outbox_shards,
    )
    return await _screen(conn, settings, post)


async def delete_post(
    conn: asyncpg.Connection, settings: Settings, actor: Member, post_id: uuid.UUID, *, as_admin: bool = False
) -> bool:
    post = await posts_db.get(conn, post_id, for_update=True)
    if post is None or post.status == "deleted":
        raise NotFound("post not found")
    if post.author_id != actor.id and not as_admin:
        raise Forbidden("only the author may delete this post")
    await posts_db.set_status(conn, post.id, "deleted")
    await add_event(
        conn,
        "PostDeleted",
        str(post.id),
        {"postId": str(post.id), "authorId": str(post.author_id)},
        shards=settings.outbox_shards,
    )
    return True


async def set_held(conn: asyncpg.Connection, settings: Settings, post_id: uuid.UUID, held: bool) -> Post:
    """Moderation: a held post is seen only by its author until released."""
    post = await posts_db.get(conn, post_id, for_update=True)
    if post is None or post.status == "deleted":
        raise NotFound("post not found")
    wanted = "held" if held else "live"
    if post.status == wanted:
        return post
    post = await posts_db.set_status(conn, post.id, wanted)
    await add_event(
        conn,
        "PostHeld" if held else "PostReleased",
        str(post.id),
        {"postId": str(post.id), "authorId": str(post.author_id)},
        shards=settings.outbox_shards,
    )
    return post
