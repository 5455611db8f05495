"""Post embeddings, inferred topics in post_tags, and similarPosts over the stored vectors.

A vector (384 little-endian float32, normalised) is written twice: to
post_embeddings in Postgres, in the handler's transaction, which is the truth
that similarPosts scans and that survives a Redis flush; and to Redis as
`post:{id}:vec`, the per-post copy readers fetch without touching Postgres.
Reposts and blank posts (text.is_blank) are not embedded (a repost's topics are its
original's).

similarPosts is a brute-force cosine scan over the newest
`similar_scan_limit` embedded posts (5,000 by default), read from Postgres,
which answers it faster than the same scan over Redis (docs/benchmarks.md).
Past that size an ANN index (pgvector HNSW) would replace the scan behind
the same function. The asked-about post must be visible to the viewer (else
the answer is [], as for an unknown ID); candidates are then checked for
visibility in rank order.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence

import asyncpg
import numpy as np
import redis.asyncio as aioredis

from feedfabric.db import embeddings as embeddings_db
from feedfabric.db import post_text, tags
from feedfabric.db.redisclient import REDIS_FAILURES
from feedfabric.feeds import minilm as embeddings
from feedfabric.feeds import paging, text

__all__ = ["embeddable", "encode", "forget", "similar_posts", "store", "vector_key"]

log = logging.getLogger(__name__)


def vector_key(post_id: uuid.UUID | str) -> str:
    return f"post:{post_id}:vec"


def embeddable(post: post_text.PostText) -> bool:
    return post.status != "deleted" and post.repost_of is None and not text.is_blank(post.content)


async def encode(embedder: embeddings.Embedder, texts: list[str]) -> np.ndarray:
    """Encodes off the event loop (the model is CPU-bound), a chunk per replica in parallel."""
    chunks = embeddings.split(texts, len(embedder.models))
    if not chunks:
        return np.zeros((0, embeddings.DIMENSIONS), dtype=np.float32)
    done = await asyncio.gather(
        *(asyncio.to_thread(embeddings.encode, model, chunk) for model, chunk in zip(embedder.models, chunks))
    )
    return np.concatenate(done)


async def store(
    conn: asyncpg.Connection,
    redis: aioredis.Redis,
    embedder: embeddings.Embedder,
    post: post_text.PostText,
    vector: np.ndarray,
) -> list[str]:
    """Writes the post's inferred tags and vector (in the caller's transaction) and the Redis copy."""
    topics = embeddings.infer_topics(embedder, vector.reshape(1, -1))[0]
    data = embeddings.to_bytes(vector)
    await tags.replace_inferred_tags(conn, post.id, topics)
    await embeddings_db.upsert_vector(conn, post.id, data)
    await redis.set(vector_key(post.id), data)
    return topics


async def forget(conn: asyncpg.Connection, redis: aioredis.Redis, post_id: uuid.UUID) -> None:
    """A deleted, emptied or repost-only post leaves the similarity scan and loses its inferred tags."""
    await tags.replace_inferred_tags(conn, post_id, [])
    await embeddings_db.delete_vector(conn, post_id)
    await redis.delete(vector_key(post_id))


async def vector_of(
    redis: aioredis.Redis, pool: asyncpg.Pool | asyncpg.Connection, post_id: uuid.UUID
) -> np.ndarray | None:
    """The post's vector from Redis, else from Postgres (Redis down or flushed)."""
    raw: bytes | None = None
    try:
        raw = await redis.get(vector_key(post_id))  # type: ignore[assignment]  # bytes: no decode_responses
    except REDIS_FAILURES as exc:
        log.warning("vector_of: Redis unavailable (%s); reading Postgres", type(exc).__name__)
    if raw is None:
        raw = await embeddings_db.get_vector(pool, post_id)
    return None if raw is None else embeddings.from_bytes(raw)


async def similar_posts(
    redis: aioredis.Redis,
    pool: asyncpg.Pool | asyncpg.Connection,
    post_id: uuid.UUID,
    first: int = 10,
    *,
    viewer_id: uuid.UUID | None = None,
    scan_limit: int = 5_000,
) -> list[uuid.UUID]:
    """IDs of the posts most similar to `post_id`, best first, visible to the viewer; [] if it has no
    vector, and [] if the viewer may not see it (held, deleted, its author suspended: visible_posts),
    the answer for an unknown ID, so its neighbours never tell what a hidden post is about."""
    paging.page_size(first)
    if not await post_text.visible_ids(pool, [post_id], viewer_id):
        return []
    query = await vector_of(redis, pool, post_id)
    if query is None:
        return []
    rows = await embeddings_db.newest_vectors(pool, scan_limit, exclude=post_id)
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(v for _, v in rows), dtype="<f4").reshape(len(rows), embeddings.DIMENSIONS)
    scores = matrix @ query
    ranked = [rows[i][0] for i in np.argsort(-scores, kind="stable")]
    return await _visible_prefix(pool, ranked, first, viewer_id)


async def _visible_prefix(
    pool: asyncpg.Pool | asyncpg.Connection, ranked: Sequence[uuid.UUID], first: int, viewer_id: uuid.UUID | None
) -> list[uuid.UUID]:
    """The first `first` visible IDs in rank order, checking candidates a window at a time (at most 10)."""
    out: list[uuid.UUID] = []
    window = max(first * 3, 100)
    for start in range(0, min(len(ranked), 10 * window), window):
        chunk = ranked[start : start + window]
        visible = await post_text.feed_ids(pool, chunk, viewer_id)
        out.extend(i for i in chunk if i in visible)
        if len(out) >= first:
            break
    return out[:first]
