"""How likes and comments shape a member's taste: author affinity and topic interest.

A like adds `like_weight` to the liker's affinity for the author and to their
interest in each tag the post has at that moment; what it gave is recorded
(like_grants), so the unlike takes back exactly that even if the post was
re-tagged in between. A comment adds `comment_weight` (above a like: writing
says more than tapping) and is never taken back. Engaging with one's own post
moves no affinity. The likers set in Redis (`post:{id}:likers`) is an
accelerator beside the likes table; SADD/SREM make it idempotent by nature.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg
import redis.asyncio as aioredis

from feedfabric.core.settings import Settings
from feedfabric.db import affinity, tags
from feedfabric.feeds import reader_effects

__all__ = ["apply_comment", "apply_like", "apply_likes", "apply_unlike", "likers"]


def likers_key(post_id: uuid.UUID | str) -> str:
    return f"post:{post_id}:likers"


async def apply_like(
    conn: asyncpg.Connection,
    redis: aioredis.Redis,
    settings: Settings,
    post_id: uuid.UUID,
    member_id: uuid.UUID,
    author_id: uuid.UUID,
) -> None:
    await redis.sadd(likers_key(post_id), str(member_id))
    grant = affinity.LikeGrant(author_id, await tags.tags_of_post(conn, post_id), settings.like_weight)
    if not await affinity.record_like_grant(conn, post_id, member_id, grant):
        return
    await _add(conn, member_id, grant, +1.0)


async def apply_likes(
    conn: asyncpg.Connection, redis: aioredis.Redis, settings: Settings, likes: Sequence[affinity.Like], now: datetime
) -> None:
    """apply_like and reader_effects.on_engagement for many likes of distinct (post, member) pairs, their
    Postgres part in one statement (worker-engagement's batches, issue 50)."""
    for like in likes:
        await redis.sadd(likers_key(like.post_id), str(like.member_id))
    new_readers = await affinity.grant_likes(conn, likes, settings.like_weight, now - reader_effects.NEW_READER)
    for member_id in sorted(new_readers):
        await reader_effects.refit_reader(conn, member_id, now)


async def apply_unlike(
    conn: asyncpg.Connection,
    redis: aioredis.Redis,
    post_id: uuid.UUID,
    member_id: uuid.UUID,
) -> None:
    await redis.srem(likers_key(post_id), str(member_id))
    grant = await affinity.take_like_grant(conn, post_id, member_id)
    if grant is not None:
        await _add(conn, member_id, grant, -1.0)


async def apply_comment(
    conn: asyncpg.Connection,
    settings: Settings,
    post_id: uuid.UUID,
    member_id: uuid.UUID,
    author_id: uuid.UUID,
) -> None:
    grant = affinity.LikeGrant(author_id, await tags.tags_of_post(conn, post_id), settings.comment_weight)
    await _add(conn, member_id, grant, +1.0)


async def _add(conn: asyncpg.Connection, member_id: uuid.UUID, grant: affinity.LikeGrant, sign: float) -> None:
    delta = sign * grant.weight
    if member_id != grant.author_id:
        await affinity.add_affinity(conn, member_id, grant.author_id, delta)
    await affinity.add_interest(conn, member_id, grant.tags, delta)


async def likers(redis: aioredis.Redis, post_id: uuid.UUID) -> set[uuid.UUID]:
    return {uuid.UUID(m.decode() if isinstance(m, bytes) else m) for m in await redis.smembers(likers_key(post_id))}
