"""The three ML/media groups end to end: outbox → relay → Kafka → the real runner → effects."""

from __future__ import annotations

import asyncpg
import redis.asyncio as aioredis
from feedfabric.core.settings import Settings
from feedfabric.db import media as media_db
from feedfabric.db.outbox import add_event
from feedfabric.feeds import embeddings as post_embeddings
from feedfabric.feeds import media as uploads
from feedfabric.workers import embeddings, engagement, media
from feedfabric.workers.base import WorkerContext
from feedfabric.workers.runner import GroupRunner

from tests import db_reads
from tests import factories_ml as f
from tests.feeds.test_media import jpeg_with_gps
from tests.pipeline_support import eventually, quick_join_consumer, relay, running


def _runner(settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, spec, **resources) -> GroupRunner:
    ctx = WorkerContext(settings=settings, pool=pool, redis=redis, resources=dict(resources))
    return GroupRunner(spec, ctx, poll_ms=50, consumer_factory=quick_join_consumer)


async def test_upload_post_and_like_flow_through_the_pipeline(settings, pool, redis):
    owner, fan = await f.member(pool), await f.member(pool)
    runners = [
        _runner(settings, pool, redis, media.GROUP),
        _runner(settings, pool, redis, embeddings.GROUP, **{embeddings.EMBEDDER: f.shared_embedder()}),
        _runner(settings, pool, redis, engagement.GROUP),
    ]
    async with running(relay(settings).run, *(r.run for r in runners)):
        photo = await uploads.store_upload(pool, settings, owner, jpeg_with_gps())
        html = await uploads.store_upload(pool, settings, owner, b"<html><script>x</script></html>")
        post = await f.post(pool, owner, "Marathon training: 30 km long run done this morning")
        async with pool.acquire() as conn, conn.transaction():
            await add_event(
                conn,
                "PostCreated",
                str(post),
                {"postId": str(post), "authorId": str(owner), "createdAtMs": 0, "repostOf": None},
                shards=settings.outbox_shards,
            )

        async def decided():
            async with pool.acquire() as conn:
                rows = await media_db.get_media(conn, [photo, html])
            return all(r["status"] != "pending" for r in rows.values()) and rows

        rows = await eventually(decided)
        assert rows[photo]["status"] == "ready" and uploads.processed_path(settings, rows[photo]) is not None
        assert (rows[html]["status"], rows[html]["reason"]) == ("rejected", "unsupported_type")

        async def tagged():
            async with pool.acquire() as conn:
                return await db_reads.inferred_tags(conn, post)

        assert {"running", "fitness"} & set(await eventually(tagged))
        assert await redis.exists(post_embeddings.vector_key(post))

        async with pool.acquire() as conn, conn.transaction():
            await add_event(
                conn,
                "PostLiked",
                str(post),
                {"postId": str(post), "memberId": str(fan), "authorId": str(owner)},
                shards=settings.outbox_shards,
            )

        async def interest():
            return await pool.fetchval("SELECT sum(score) FROM topic_interest WHERE member_id = $1", fan)

        assert await eventually(interest) == len(await tagged())
        assert (
            await pool.fetchval("SELECT score FROM author_affinity WHERE member_id = $1 AND author_id = $2", fan, owner)
            == settings.like_weight
        )
