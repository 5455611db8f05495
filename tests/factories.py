"""Rows for tests, written with plain SQL, and their events through the real outbox; and the live items
that unit tests of delivery hand around without a database."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence

import asyncpg
from feedfabric.core.ids import id_millis, new_id
from feedfabric.core.models import Post
from feedfabric.db.outbox import add_event
from feedfabric.realtime.item import TimelineItem


async def member(
    conn: asyncpg.Connection | asyncpg.Pool, *, seen_days_ago: float = 0, name: str | None = None
) -> uuid.UUID:
    member_id = new_id()
    name = name or f"m{member_id.hex[-12:]}"
    await conn.execute(
        "INSERT INTO members (id, external_id, username, display_name, last_seen_at)"
        " VALUES ($1, $2, $3, $3, now() - $4::interval)",
        member_id,
        f"ext-{member_id}",
        name,
        dt.timedelta(days=seen_days_ago),
    )
    return member_id


async def members(conn: asyncpg.Connection | asyncpg.Pool, count: int, *, seen_days_ago: float = 0) -> list[uuid.UUID]:
    ids = [new_id() for _ in range(count)]
    await conn.execute(
        "INSERT INTO members (id, external_id, username, display_name, last_seen_at)"
        " SELECT id, 'ext-' || id::text, 'm' || id::text, 'm', now() - $2::interval FROM unnest($1::uuid[]) AS id",
        ids,
        dt.timedelta(days=seen_days_ago),
    )
    return ids


async def follow(
    conn: asyncpg.Connection | asyncpg.Pool, follower: uuid.UUID, target: uuid.UUID | str, target_type: str = "member"
) -> None:
    await conn.execute(
        "INSERT INTO follows (follower_id, target_type, target_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        follower,
        target_type,
        str(target),
    )


async def followers(
    conn: asyncpg.Connection | asyncpg.Pool, target: uuid.UUID, follower_ids: Sequence[uuid.UUID]
) -> None:
    await conn.execute(
        "INSERT INTO follows (follower_id, target_type, target_id) SELECT f, 'member', $2 FROM unnest($1::uuid[]) AS f",
        list(follower_ids),
        str(target),
    )


async def post(
    pool: asyncpg.Pool, author: uuid.UUID, *, tags: Sequence[str] = (), status: str = "live", shards: int = 16
) -> uuid.UUID:
    """A post and its PostCreated event, committed together as the API does."""
    post_id = new_id()
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO posts (id, author_id, content, status) VALUES ($1, $2, $3, $4)",
            post_id,
            author,
            f"post {post_id}",
            status,
        )
        for tag in tags:
            await conn.execute("INSERT INTO post_tags (post_id, tag, source) VALUES ($1, $2, 'hashtag')", post_id, tag)
        await add_event(
            conn,
            "PostCreated",
            str(post_id),
            {"postId": str(post_id), "authorId": str(author), "createdAtMs": id_millis(post_id), "repostOf": None},
            shards=shards,
        )
    return post_id


async def posts(conn: asyncpg.Connection | asyncpg.Pool, author: uuid.UUID, count: int) -> list[uuid.UUID]:
    """`count` live posts by `author`, oldest first, in one statement and with no events: a backlog that
    only reads from Postgres see (nothing fans them out or delivers them live)."""
    ids = [new_id() for _ in range(count)]
    await conn.execute(
        "INSERT INTO posts (id, author_id, content) SELECT id, $2, 'post ' || id::text FROM unnest($1::uuid[]) AS id",
        ids,
        author,
    )
    return ids


async def member_returned(pool: asyncpg.Pool, member_id: uuid.UUID, *, shards: int = 16) -> int:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE members SET last_seen_at = now() WHERE id = $1", member_id)
        return await add_event(conn, "MemberReturned", str(member_id), {"memberId": str(member_id)}, shards=shards)


def timeline_item(n: int) -> TimelineItem:
    """Item `n`: its post's ID is the UUID of `n`, so items order by `n`."""
    at = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)
    return TimelineItem(post=Post(uuid.UUID(int=n), uuid.UUID(int=0), f"post {n}", None, "PUBLISHED", at, None))
