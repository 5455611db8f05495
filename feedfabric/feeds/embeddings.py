"""Post embeddings in Redis, inferred topics in post_tags, and similarPosts over the stored vectors.

Each embedded post has `post:{id}:vec` (384 little-endian float32, normalised)
and a member in the sorted set `posts:vec` scored by its creation time in
milliseconds. Reposts and empty posts are not embedded (a repost's topics are
its original's). Redis holds the only copy of a vector: after a flush,
similarPosts answers from what has been embedded since, until posts are
re-embedded (replaying PostCreated or `reembed`).

similarPosts is a brute-force cosine scan over the newest
`similar_scan_limit` vectors (5,000 by default). Measured here with one local
Redis: 5,000 vectors ≈ 60-90 ms, 20,000 ≈ 250-340 ms, nearly all of it
redis-py's pure-Python reply parser (hiredis would cut that). Past that size
an ANN index (RediSearch HNSW, pgvector) would replace the scan behind the
same function. Without Redis, similarPosts answers [] rather than failing.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence

import asyncpg
import numpy as np
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from feedfabric import embeddings
from feedfabric.db import post_text, tags
from feedfabric.errors import BadInput

log = logging.getLogger(__name__)

INDEX_KEY = "posts:vec"
_MGET_CHUNK = 1000


def vector_key(post_id: uuid.UUID | str) -> str:
    return f"post:{post_id}:vec"


def embeddable(post: post_text.PostText) -> bool:
    return post.status != "deleted" and post.repost_of is None and bool(post.content.strip())


async def encode(embedder: embeddings.Embedder, texts: list[str]) -> np.ndarray:
    """Encodes off the event loop: the model is CPU-bound."""
    return await asyncio.to_thread(embeddings.encode, embedder.model, texts)


async def store(
    conn: asyncpg.Connection,
    redis: aioredis.Redis,
    embedder: embeddings.Embedder,
    post: post_text.PostText,
    vector: np.ndarray,
) -> list[str]:
    """Writes the post's inferred tags (in the caller's transaction) and its vector; returns the tags."""
    topics = embeddings.infer_topics(embedder, vector.reshape(1, -1))[0]
    await tags.replace_inferred_tags(conn, post.id, topics)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.set(vector_key(post.id), embeddings.to_bytes(vector))
        pipe.zadd(INDEX_KEY, {str(post.id): post.created_ms})
        await pipe.execute()
    return topics


async def forget(conn: asyncpg.Connection, redis: aioredis.Redis, post_id: uuid.UUID) -> None:
    """A deleted, emptied or repost-only post leaves the similarity index and loses its inferred tags."""
    await tags.replace_inferred_tags(conn, post_id, [])
    async with redis.pipeline(transaction=False) as pipe:
        pipe.delete(vector_key(post_id))
        pipe.zrem(INDEX_KEY, str(post_id))
        await pipe.execute()


async def similar_posts(
    redis: aioredis.Redis,
    pool: asyncpg.Pool | asyncpg.Connection,
    post_id: uuid.UUID,
    first: int = 10,
    *,
    viewer_id: uuid.UUID | None = None,
    scan_limit: int = 5_000,
) -> list[uuid.UUID]:
    """IDs of the posts most similar to `post_id`, best first, visible to the viewer; [] if it has no vector."""
    if not 1 <= first <= 100:
        raise BadInput("first must be between 1 and 100")
    try:
        ids, matrix, query = await _load(redis, post_id, scan_limit)
    except (RedisError, OSError, asyncio.TimeoutError) as exc:
        log.warning("similar_posts: Redis unavailable (%s); answering none", type(exc).__name__)
        return []
    if query is None or not ids:
        return []
    scores = matrix @ query
    ranked = [uuid.UUID(ids[i]) for i in np.argsort(-scores, kind="stable")]
    return await _visible_prefix(pool, ranked, first, viewer_id)


async def _load(
    redis: aioredis.Redis, post_id: uuid.UUID, scan_limit: int
) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """The query vector and the matrix of the newest `scan_limit` other vectors."""
    empty = np.zeros((0, embeddings.DIMENSIONS), dtype=np.float32)
    raw = await redis.get(vector_key(post_id))
    if raw is None:
        return [], empty, None
    query = embeddings.from_bytes(raw)
    members = [m.decode() if isinstance(m, bytes) else m for m in await redis.zrevrange(INDEX_KEY, 0, scan_limit - 1)]
    members = [m for m in members if m != str(post_id)]
    ids: list[str] = []
    blobs: list[bytes] = []
    for start in range(0, len(members), _MGET_CHUNK):
        chunk = members[start : start + _MGET_CHUNK]
        for member, blob in zip(chunk, await redis.mget([vector_key(m) for m in chunk])):
            if blob is not None and len(blob) == embeddings.DIMENSIONS * 4:
                ids.append(member)
                blobs.append(blob)
    if not ids:
        return [], empty, query
    return ids, np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(ids), embeddings.DIMENSIONS), query


async def _visible_prefix(
    pool: asyncpg.Pool | asyncpg.Connection, ranked: Sequence[uuid.UUID], first: int, viewer_id: uuid.UUID | None
) -> list[uuid.UUID]:
    """The first `first` visible IDs in rank order, checking candidates a window at a time (at most 10)."""
    out: list[uuid.UUID] = []
    window = max(first * 3, 100)
    for start in range(0, min(len(ranked), 10 * window), window):
        chunk = ranked[start : start + window]
        visible = await post_text.visible_ids(pool, chunk, viewer_id)
        out.extend(i for i in chunk if i in visible)
        if len(out) >= first:
            break
    return out[:first]
