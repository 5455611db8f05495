"""Queries over posts, their hashtags and mentions, and the newest-first lists built from them.

Every list applies the one visibility rule through the relation visible_posts(viewer)
(migrations 101 and 320: held, deleted, suspended, blocked either way), and the feeds through
feed_posts(viewer), which also leaves out the members the viewer mutes; Postgres inlines both
into each query, so a page filtered by them is still full.
Cursors are post IDs: UUIDv7, so `id < cursor` is "older than the cursor".
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from feedfabric.core.models import Post
from feedfabric.db.outbox import EventRow, event_ctes, notify_sql
from feedfabric.db.queryable import Queryable

__all__ = [
    "author_page",
    "by_authors_page",
    "favourites_page",
    "feed_by_ids",
    "get",
    "get_to_act",
    "home_after",
    "home_page",
    "insert_repost",
    "insert_with_entities",
    "is_visible",
    "live_repost",
    "mention_page",
    "replace_hashtags",
    "replace_mentions",
    "set_status",
    "tag_page",
    "update_content",
    "visibility",
]

_COLUMNS = "id, author_id, content, repost_of, status, created_at, updated_at"
_P_COLUMNS = "p.id, p.author_id, p.content, p.repost_of, p.status, p.created_at, p.updated_at"


async def insert(
    conn: asyncpg.Connection, post_id: uuid.UUID, author_id: uuid.UUID, content: str, repost_of: uuid.UUID | None
) -> Post:
    row = await conn.fetchrow(
        f"INSERT INTO posts (id, author_id, content, repost_of) VALUES ($1, $2, $3, $4) RETURNING {_COLUMNS}",
        post_id,
        author_id,
        content,
        repost_of,
    )
    return Post.of(row)


async def insert_with_entities(
    conn: asyncpg.Connection,
    post_id: uuid.UUID,
    author_id: uuid.UUID,
    content: str,
    tags: Sequence[str],
    mentioned_names: Sequence[str],
    created: EventRow,
) -> tuple[Post, list[uuid.UUID], int]:
    """A new post with its hashtags, its @mentions and its event (`created`, whose payload gains the
    `mentionedIds` found here), in one statement (one round trip, issue 50); returns the post, the active
    members mentioned (never the author), in ID order, and the moderation terms' version (migration 330),
    read in the same round trip so screening the text for terms costs none of its own while the terms are
    unchanged (feeds.moderation_terms).

    A new post has no tags or mentions to replace, so nothing is deleted first (update_content's path,
    replace_hashtags and replace_mentions, does). The foreign keys of post_tags and mentions are checked at
    the statement's end, when the post's row is there.
    """
    mentioned_ids = "(SELECT coalesce(jsonb_agg(member_id::text ORDER BY member_id), '[]') FROM mentioned)"
    row = await conn.fetchrow(
        f"""WITH post AS (
                INSERT INTO posts (id, author_id, content, repost_of) VALUES ($1, $2, $3, NULL)
                RETURNING {_COLUMNS}
            ), tagged AS (
                INSERT INTO post_tags (post_id, tag, source)
                SELECT $1, t, 'hashtag' FROM unnest($4::text[]) AS t
                ON CONFLICT (post_id, tag) DO UPDATE SET source = 'hashtag'
            ), mentioned AS (
                INSERT INTO mentions (member_id, item_id, post_id, comment_id)
                SELECT m.id, $1, $1, NULL FROM members m
                WHERE lower(m.username) = ANY($5::text[]) AND m.status = 'active' AND m.id <> $2
                ON CONFLICT DO NOTHING
                RETURNING member_id
            ), {event_ctes(6, f"$10::jsonb || jsonb_build_object('mentionedIds', {mentioned_ids})")}
            SELECT post.*, ARRAY(SELECT member_id FROM mentioned ORDER BY member_id) AS mentioned,
                   (SELECT version FROM moderation_terms_version) AS terms_version,
                   (SELECT {notify_sql()} FROM added) AS notified
            FROM post""",
        post_id,
        author_id,
        content,
        list(tags),
        [name.lower() for name in mentioned_names],
        created.topic,
        created.key,
        created.shard,
        created.event_type,
        created.data,
        created.traceparent,
    )
    assert row is not None
    return Post.of(row), list(row["mentioned"]), int(row["terms_version"])


async def insert_repost(
    conn: asyncpg.Connection, post_id: uuid.UUID, author_id: uuid.UUID, original_id: uuid.UUID
) -> Post | None:
    """The new repost, or None when the author already has a live one of the original: one committed
    meanwhile too, as the insert waits on posts_one_repost_idx for a concurrent one to commit."""
    row = await conn.fetchrow(
        f"""INSERT INTO posts (id, author_id, content, repost_of) VALUES ($1, $2, '', $3)
            ON CONFLICT (author_id, repost_of) WHERE repost_of IS NOT NULL AND status <> 'deleted' DO NOTHING
            RETURNING {_COLUMNS}""",
        post_id,
        author_id,
        original_id,
    )
    return Post.of(row) if row else None


async def get(conn: Queryable, post_id: uuid.UUID, *, for_update: bool = False, for_share: bool = False) -> Post | None:
    """`for_update` (its author changes it) or `for_share` (another member acts on it): either way a
    change and an act on the post happen one after the other, and the second sees the first."""
    lock = " FOR UPDATE" if for_update else " FOR SHARE" if for_share else ""
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM posts WHERE id = $1{lock}", post_id)
    return Post.of(row) if row else None


async def live_repost(conn: asyncpg.Connection, author_id: uuid.UUID, original_id: uuid.UUID) -> Post | None:
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM posts WHERE author_id = $1 AND repost_of = $2 AND status <> 'deleted'",
        author_id,
        original_id,
    )
    return Post.of(row) if row else None


async def is_visible(conn: Queryable, post_id: uuid.UUID, viewer_id: uuid.UUID | None) -> bool:
    return bool(
        await conn.fetchval("SELECT EXISTS (SELECT 1 FROM visible_posts($2) WHERE id = $1)", post_id, viewer_id)
    )


async def visibility(conn: Queryable, post_id: uuid.UUID, viewer_id: uuid.UUID) -> tuple[bool, bool]:
    """(visible, blocked) in one statement: whether the viewer may see the post (visible_posts), and whether
    its author or its original's author blocks the viewer or is blocked by them (BLOCKED, not NOT_FOUND)."""
    row = await conn.fetchrow(
        """SELECT EXISTS (SELECT 1 FROM visible_posts($2) WHERE id = $1) AS visible,
                  EXISTS (SELECT 1 FROM posts p LEFT JOIN posts o ON o.id = p.repost_of
                          JOIN blocks b ON (b.blocker_id = $2 AND b.blocked_id IN (p.author_id, o.author_id))
                                        OR (b.blocked_id = $2 AND b.blocker_id IN (p.author_id, o.author_id))
                          WHERE p.id = $1 AND p.status <> 'deleted') AS blocked""",
        post_id,
        viewer_id,
    )
    return bool(row["visible"]), bool(row["blocked"])


async def get_to_act(conn: Queryable, post_id: uuid.UUID, viewer_id: uuid.UUID) -> tuple[Post, bool, bool] | None:
    """The post locked for share with its (visible, blocked) for the viewer, in one statement: `get` with
    `for_share` and `visibility` (issue 50: a like's round trip fewer).

    A deletion or hold under way is waited for by the lock and then seen: the row's own status is read from
    the row the lock returns (the version its deleter committed), while visible_posts, run on the
    statement's snapshot, answers for the rest of the rule (its author, the original, blocks).
    """
    row = await conn.fetchrow(
        f"""SELECT {_COLUMNS},
                   (status = 'live' OR (status = 'held' AND author_id = $2))
                   AND EXISTS (SELECT 1 FROM visible_posts($2) v WHERE v.id = $1) AS visible,
                   EXISTS (SELECT 1 FROM posts p LEFT JOIN posts o ON o.id = p.repost_of
                           JOIN blocks b ON (b.blocker_id = $2 AND b.blocked_id IN (p.author_id, o.author_id))
                                         OR (b.blocked_id = $2 AND b.blocker_id IN (p.author_id, o.author_id))
                           WHERE p.id = $1 AND p.status <> 'deleted') AS blocked
            FROM posts WHERE id = $1 FOR SHARE""",
        post_id,
        viewer_id,
    )
    return (Post.of(row), bool(row["visible"]), bool(row["blocked"])) if row else None


async def update_content(conn: asyncpg.Connection, post_id: uuid.UUID, content: str) -> Post:
    row = await conn.fetchrow(
        f"UPDATE posts SET content = $2, updated_at = now(), version = version + 1 WHERE id = $1 RETURNING {_COLUMNS}",
        post_id,
        content,
    )
    return Post.of(row)


async def set_status(conn: asyncpg.Connection, post_id: uuid.UUID, status: str) -> Post:
    row = await conn.fetchrow(
        f"UPDATE posts SET status = $2, updated_at = now(), version = version + 1 WHERE id = $1 RETURNING {_COLUMNS}",
        post_id,
        status,
    )
    return Post.of(row)


async def replace_hashtags(conn: asyncpg.Connection, post_id: uuid.UUID, tags: Sequence[str]) -> None:
    """Hashtags come from the text; inferred topics (source 'inferred') are left to the embeddings worker."""
    await conn.execute("DELETE FROM post_tags WHERE post_id = $1 AND source = 'hashtag'", post_id)
    if tags:
        await conn.execute(
            """INSERT INTO post_tags (post_id, tag, source)
               SELECT $1, t, 'hashtag' FROM unnest($2::text[]) AS t
               ON CONFLICT (post_id, tag) DO UPDATE SET source = 'hashtag'""",
            post_id,
            list(tags),
        )


async def replace_mentions(
    conn: asyncpg.Connection,
    post_id: uuid.UUID,
    comment_id: uuid.UUID | None,
    member_ids: Sequence[uuid.UUID],
) -> None:
    item_id = comment_id or post_id
    await conn.execute("DELETE FROM mentions WHERE item_id = $1", item_id)
    if member_ids:
        await conn.execute(
            """INSERT INTO mentions (member_id, item_id, post_id, comment_id)
               SELECT m, $1, $2, $3 FROM unnest($4::uuid[]) AS m ON CONFLICT DO NOTHING""",
            item_id,
            post_id,
            comment_id,
            list(member_ids),
        )


# -- batched loads (DataLoaders call these once per page) ---------------------


async def visible_by_ids(
    conn: Queryable, ids: Sequence[uuid.UUID], viewer_id: uuid.UUID | None
) -> dict[uuid.UUID, Post]:
    """Hydrates a page of timeline IDs in one query, dropping what the viewer must not see."""
    rows = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM visible_posts($2) WHERE id = ANY($1::uuid[])""",
        list(ids),
        viewer_id,
    )
    return {r["id"]: Post.of(r) for r in rows}


async def feed_by_ids(conn: Queryable, ids: Sequence[uuid.UUID], viewer_id: uuid.UUID | None) -> dict[uuid.UUID, Post]:
    """`visible_by_ids` as the viewer's feeds show posts (feed_posts: less the members they mute)."""
    rows = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM feed_posts($2) WHERE id = ANY($1::uuid[])""",
        list(ids),
        viewer_id,
    )
    return {r["id"]: Post.of(r) for r in rows}


async def mentioned_in(conn: Queryable, item_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """The members each item mentions, suspended ones left out: one rule with `sampleActors` and
    `follow` (docs/suspension.md)."""
    rows = await conn.fetch(
        "SELECT m.item_id, m.member_id FROM mentions m"
        " JOIN members ON members.id = m.member_id AND members.status = 'active'"
        " WHERE m.item_id = ANY($1::uuid[]) ORDER BY m.item_id, m.member_id",
        list(item_ids),
    )
    out: dict[uuid.UUID, list[uuid.UUID]] = {}
    for r in rows:
        out.setdefault(r["item_id"], []).append(r["member_id"])
    return out


# -- newest-first lists (fan-out on read) ---------------------------------------


async def home_page(conn: Queryable, viewer_id: uuid.UUID, before: uuid.UUID | None, limit: int) -> list[Post]:
    """The Following feed from the follow graph: own posts, followed members' and followed tags'.

    One LATERAL index scan per source, each stopping at `limit`, then merged:
    the cost follows the number of sources, not the number of posts.
    """
    rows = await conn.fetch(
        f"""WITH authors AS (
                SELECT $1::uuid AS author_id
                UNION
                SELECT target_id::uuid FROM follows WHERE follower_id = $1 AND target_type = 'member'
            ), candidates AS (
                SELECT p.id FROM authors a CROSS JOIN LATERAL (
                    SELECT p.id FROM feed_posts($1) p
                    WHERE p.author_id = a.author_id AND ($2::uuid IS NULL OR p.id < $2)
                    ORDER BY p.id DESC LIMIT $3) p
                UNION
                SELECT t.post_id FROM follows f CROSS JOIN LATERAL (
                    SELECT pt.post_id FROM post_tags pt JOIN feed_posts($1) p ON p.id = pt.post_id
                    WHERE pt.tag = f.target_id AND ($2::uuid IS NULL OR pt.post_id < $2)
                    ORDER BY pt.post_id DESC LIMIT $3) t
                WHERE f.follower_id = $1 AND f.target_type = 'tag'
            )
            SELECT {_P_COLUMNS} FROM candidates c JOIN posts p ON p.id = c.id
            ORDER BY p.id DESC LIMIT $3""",
        viewer_id,
        before,
        limit,
    )
    return [Post.of(r) for r in rows]


async def home_after(conn: Queryable, viewer_id: uuid.UUID, after: uuid.UUID, limit: int) -> list[Post]:
    """Home-feed items newer than a cursor, oldest first: the replay of a resumed homeTimeline subscription.

    The mirror of home_page (same sources, same visibility), walking forward by ID.
    """
    rows = await conn.fetch(
        f"""WITH authors AS (
                SELECT $1::uuid AS author_id
                UNION
                SELECT target_id::uuid FROM follows WHERE follower_id = $1 AND target_type = 'member'
            ), candidates AS (
                SELECT p.id FROM authors a CROSS JOIN LATERAL (
                    SELECT p.id FROM feed_posts($1) p
                    WHERE p.author_id = a.author_id AND p.id > $2
                    ORDER BY p.id LIMIT $3) p
                UNION
                SELECT t.post_id FROM follows f CROSS JOIN LATERAL (
                    SELECT pt.post_id FROM post_tags pt JOIN feed_posts($1) p ON p.id = pt.post_id
                    WHERE pt.tag = f.target_id AND pt.post_id > $2
                    ORDER BY pt.post_id LIMIT $3) t
                WHERE f.follower_id = $1 AND f.target_type = 'tag'
            )
            SELECT {_P_COLUMNS} FROM candidates c JOIN posts p ON p.id = c.id
            ORDER BY p.id LIMIT $3""",
        viewer_id,
        after,
        limit,
    )
    return [Post.of(r) for r in rows]


async def by_authors_page(
    conn: Queryable,
    author_ids: Sequence[uuid.UUID],
    viewer_id: uuid.UUID | None,
    before: uuid.UUID | None,
    limit: int,
) -> list[Post]:
    """Newest visible posts of a set of authors (favourites feed, celebrity pull)."""
    rows = await conn.fetch(
        f"""SELECT {_P_COLUMNS} FROM unnest($1::uuid[]) AS a(author_id) CROSS JOIN LATERAL (
                SELECT * FROM feed_posts($2) p
                WHERE p.author_id = a.author_id AND ($3::uuid IS NULL OR p.id < $3)
                ORDER BY p.id DESC LIMIT $4) p
            ORDER BY p.id DESC LIMIT $4""",
        list(author_ids),
        viewer_id,
        before,
        limit,
    )
    return [Post.of(r) for r in rows]


async def favourites_page(conn: Queryable, viewer_id: uuid.UUID, before: uuid.UUID | None, limit: int) -> list[Post]:
    rows = await conn.fetch(
        f"""SELECT {_P_COLUMNS} FROM favourites f CROSS JOIN LATERAL (
                SELECT * FROM feed_posts($1) p
                WHERE p.author_id = f.favourite_id AND ($2::uuid IS NULL OR p.id < $2)
                ORDER BY p.id DESC LIMIT $3) p
            WHERE f.member_id = $1
            ORDER BY p.id DESC LIMIT $3""",
        viewer_id,
        before,
        limit,
    )
    return [Post.of(r) for r in rows]


async def tag_page(
    conn: Queryable, tag: str, viewer_id: uuid.UUID | None, before: uuid.UUID | None, limit: int
) -> list[Post]:
    rows = await conn.fetch(
        f"""SELECT {_P_COLUMNS} FROM post_tags t JOIN feed_posts($2) p ON p.id = t.post_id
            WHERE t.tag = $1 AND ($3::uuid IS NULL OR t.post_id < $3)
            ORDER BY t.post_id DESC LIMIT $4""",
        tag,
        viewer_id,
        before,
        limit,
    )
    return [Post.of(r) for r in rows]


async def author_page(
    conn: Queryable,
    author_id: uuid.UUID,
    viewer_id: uuid.UUID | None,
    *,
    newest_first: bool,
    gt: uuid.UUID | None,
    gte: uuid.UUID | None,
    lt: uuid.UUID | None,
    lte: uuid.UUID | None,
    limit: int,
) -> list[Post]:
    order = "DESC" if newest_first else "ASC"
    rows = await conn.fetch(
        f"""SELECT {_COLUMNS} FROM visible_posts($2) p
            WHERE p.author_id = $1
              AND ($3::uuid IS NULL OR p.id > $3) AND ($4::uuid IS NULL OR p.id >= $4)
              AND ($5::uuid IS NULL OR p.id < $5) AND ($6::uuid IS NULL OR p.id <= $6)
            ORDER BY p.id {order} LIMIT $7""",
        author_id,
        viewer_id,
        gt,
        gte,
        lt,
        lte,
        limit,
    )
    return [Post.of(r) for r in rows]


async def mention_page(
    conn: Queryable, viewer_id: uuid.UUID, before: uuid.UUID | None, limit: int
) -> list[asyncpg.Record]:
    """(item_id, post_id, comment_id, author_id, content) of posts and comments that mention the viewer,
    newest first; not those of members the viewer blocks, is blocked by, or mutes with notifications
    (member_hidden, migration 320). `content` and `author_id` are the mentioning item's, for muted words."""
    found: list[asyncpg.Record] = await conn.fetch(
        """SELECT m.item_id, m.post_id, m.comment_id, COALESCE(c.author_id, p.author_id) AS author_id,
                  COALESCE(c.content, p.content) AS content
           FROM mentions m JOIN visible_posts($1) p ON p.id = m.post_id
           LEFT JOIN comments c ON c.id = m.comment_id
           WHERE m.member_id = $1 AND ($2::uuid IS NULL OR m.item_id < $2)
             AND (m.comment_id IS NULL OR EXISTS (
                  SELECT 1 FROM members ca WHERE ca.id = c.author_id AND ca.status = 'active')
                  AND c.deleted_at IS NULL)
             AND NOT member_hidden($1, COALESCE(c.author_id, p.author_id), true)
           ORDER BY m.item_id DESC LIMIT $3""",
        viewer_id,
        before,
        limit,
    )
    return found
