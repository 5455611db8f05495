"""The pipeline's floors for bench/write_path.py: the relay's produce, and each consumer group's writes.

Each runs in a process of its own (multiprocessing, spawn) and reports its own CPU, so it is measured the
way the relay and worker processes are.

- relay floor: aiokafka producing the run's own outbox rows, encoded as the relay encodes them, in batches
  of the run's mean batch size, with the relay's acks (all) and linger (0), awaiting each batch's acks:
  no Postgres, no claim, no stamp, no tracing.
- consumer floors: aiokafka consuming the group's topics live beside its worker (a group ID of its own, the
  worker's consumer settings and poll, so the same batches), doing per batch (getmany) only the group's
  required writes, then one offset commit:
  - worker-events: the post's ZADD and trim in its author's and each follower's timeline (the followers
    of the batch's authors read in one statement), one Redis pipeline a batch;
  - worker-notifications: the notification rows (the liked post's author, the followed member, the
    mentioned members), one INSERT a batch;
  - worker-engagement: the likers SADD (one pipeline a batch) and the author affinity, one upsert a batch.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from typing import Any


def _cpu() -> float:
    return time.process_time()


def relay_floor(
    bootstrap: str, topic_prefix: str, records: list[tuple[str, bytes, bytes]], batch: int
) -> dict[str, float]:
    """CPU seconds for producing `records` (base topic, key, value) in batches of `batch`."""
    from aiokafka import AIOKafkaProducer

    async def run() -> dict[str, float]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, max_batch_size=1_000_000)
        await producer.start()
        try:
            # The topics exist (made by the run); a first send loads their metadata outside the measurement.
            for base in sorted({r[0] for r in records}):
                await producer.send_and_wait(topic_prefix + base, b"warm", key=b"warm")
            started = _cpu()
            for i in range(0, len(records), batch):
                futures = [
                    await producer.send(topic_prefix + base, value, key=key)
                    for base, key, value in records[i : i + batch]
                ]
                await asyncio.gather(*futures)
            return {"cpu_s": _cpu() - started, "events": float(len(records))}
        finally:
            await producer.stop()

    return asyncio.run(run())


def consumer_floor(
    group: str,
    bootstrap: str,
    topic_prefix: str,
    topics: list[str],
    types: list[str],
    database_url: str,
    redis_url: str,
) -> None:
    """A consumer floor process: runs live beside the group's worker, from the topics' ends, with the worker's
    consumer settings (feedfabric.workers.runner.default_consumer) and poll, so it gets batches of the same
    sizes; per batch only `group`'s required writes and one offset commit. Runs until terminated; the bench
    reads its CPU from outside, as it reads the worker's."""
    import asyncpg
    import redis.asyncio as aioredis
    from aiokafka import AIOKafkaConsumer
    from feedfabric.feeds.timelines import encode_member, feed_key

    wanted = set(types)

    async def run() -> None:
        pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
        redis = aioredis.from_url(redis_url)
        consumer = AIOKafkaConsumer(
            *[topic_prefix + t for t in topics],
            bootstrap_servers=bootstrap,
            group_id=f"{topic_prefix}floor-{group}",
            enable_auto_commit=False,
            auto_offset_reset="latest",
            max_poll_records=500,
            fetch_max_wait_ms=50,
        )
        await consumer.start()
        while True:
            batch = await consumer.getmany(timeout_ms=500, max_records=500)
            events = [json.loads(m.value) for messages in batch.values() for m in messages]
            if events:
                await _WRITES[group](pool, redis, [e for e in events if e["type"] in wanted], feed_key, encode_member)
                await consumer.commit()

    asyncio.run(run())


async def _events_writes(pool: Any, redis: Any, events: list[dict[str, Any]], feed_key: Any, encode: Any) -> None:
    posts = [e["data"] for e in events if e["type"] == "PostCreated"]
    if not posts:
        return
    authors = sorted({p["authorId"] for p in posts})
    rows = await pool.fetch(
        "SELECT target_id, follower_id FROM follows WHERE target_type = 'member' AND target_id = ANY($1::text[])",
        authors,
    )
    followers: dict[str, list[str]] = {}
    for r in rows:
        followers.setdefault(r["target_id"], []).append(str(r["follower_id"]))
    pipe = redis.pipeline(transaction=False)
    for p in posts:
        member = encode(p["postId"])
        for owner in [p["authorId"], *followers.get(p["authorId"], [])]:
            key = feed_key(owner)
            pipe.zadd(key, {member: "inf"})
            pipe.zremrangebyrank(key, 0, -801)
    await pipe.execute()


async def _notification_writes(pool: Any, redis: Any, events: list[dict[str, Any]], feed_key: Any, encode: Any) -> None:
    """The rows carry the negated event ID: the product's worker writes the same notifications with the real one,
    and rows of the same unique key would make each wait on the other (the worker applies a poll in one
    transaction: two batches of the same rows deadlocked, and the floor died mid-run)."""
    rows: list[tuple[uuid.UUID, str, str, str, str | None, int]] = []
    for e in events:
        d = e["data"]
        if e["type"] == "PostLiked" and d["memberId"] != d["authorId"]:
            rows.append((uuid.uuid4(), d["authorId"], "like", d["memberId"], d["postId"], -e["eventId"]))
        elif e["type"] == "MemberFollowed":
            rows.append((uuid.uuid4(), d["memberId"], "follow", d["followerId"], None, -e["eventId"]))
        elif e["type"] == "PostCreated":
            for m in d.get("mentionedIds") or []:
                rows.append((uuid.uuid4(), m, "mention", d["authorId"], d["postId"], -e["eventId"]))
    if rows:
        await pool.execute(
            "INSERT INTO notifications (id, recipient_id, kind, actor_id, post_id, event_id)"
            " SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::uuid[], $5::uuid[], $6::bigint[])"
            " ON CONFLICT DO NOTHING",
            *[list(column) for column in zip(*rows, strict=True)],
        )


async def _engagement_writes(pool: Any, redis: Any, events: list[dict[str, Any]], feed_key: Any, encode: Any) -> None:
    likes = [e["data"] for e in events if e["type"] == "PostLiked"]
    if not likes:
        return
    pipe = redis.pipeline(transaction=False)
    for d in likes:
        pipe.sadd(f"post:{d['postId']}:likers", d["memberId"])
    await pipe.execute()
    # In key order, as the worker writes them: two writers of the same rows then wait, not deadlock.
    counted = Counter((d["memberId"], d["authorId"]) for d in likes if d["memberId"] != d["authorId"])
    pairs = dict(sorted(counted.items(), key=lambda kv: (uuid.UUID(kv[0][0]), uuid.UUID(kv[0][1]))))
    if pairs:
        await pool.execute(
            "INSERT INTO author_affinity (member_id, author_id, score)"
            " SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::float8[])"
            " ON CONFLICT (member_id, author_id) DO UPDATE SET score = author_affinity.score + EXCLUDED.score",
            [p[0] for p in pairs],
            [p[1] for p in pairs],
            [float(n) for n in pairs.values()],
        )


_WRITES = {
    "worker-events": _events_writes,
    "worker-notifications": _notification_writes,
    "worker-engagement": _engagement_writes,
}
