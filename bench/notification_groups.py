"""Grouped notifications under a burst: one post liked by 10,000 members.

Each like is the API's own transaction (`reactions.like`: the like, the Liked
playlist, the PostLiked outbox event), written by 16 concurrent connections;
the real relay publishes to the broker and the real runner of
worker-notifications applies the events. Two paths, each in a fresh database
and its own topics, in the same run:

- grouped: the worker as shipped (notification, group, actors, NotificationCreated);
- ungrouped: the same worker without the group step (the notification and its event only).

Two figures per path:

- worker throughput (likes/s): the burst is written and published first, then
  the runner starts; the rate is taken between the first and last notification
  written, so the consumer's group join is not counted;
- time from the last like's commit to the author's group showing every actor
  (ungrouped: to the last notification existing), with the relay and runner
  running through the burst.

    PYTHONPATH=$PWD python bench/notification_groups.py [--likes 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402
from feedfabric.core.events import Event  # noqa: E402
from feedfabric.core.ids import new_id  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from feedfabric.db import members as members_db  # noqa: E402
from feedfabric.db import notifications as notifications_db  # noqa: E402
from feedfabric.db.outbox import add_event  # noqa: E402
from feedfabric.db.pool import create_pool  # noqa: E402
from feedfabric.feeds import reactions  # noqa: E402
from feedfabric.workers import notifications  # noqa: E402
from feedfabric.workers.base import GroupSpec, WorkerContext  # noqa: E402
from feedfabric.workers.relay import Relay  # noqa: E402
from feedfabric.workers.runner import GroupRunner  # noqa: E402

from bench._stack import env_or, fresh_database, services  # noqa: E402

WRITERS = 16


async def ungrouped_handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
    """worker-notifications without its group step: what each like cost before groups."""
    for item in notifications.plan(event):
        created = await notifications_db.add_for_event(
            conn,
            event_id=event.event_id,
            kind=item.kind,
            actor_id=item.actor_id,
            recipients=[(new_id(), r) for r in item.recipients],
            post_id=item.post_id,
            comment_id=item.comment_id,
        )
        for notification_id, recipient_id in created:
            payload = {"notificationId": str(notification_id), "recipientId": str(recipient_id)}
            await add_event(conn, "NotificationCreated", str(recipient_id), payload, shards=ctx.settings.outbox_shards)


PATHS: dict[str, GroupSpec] = {
    "grouped": notifications.GROUP,
    "ungrouped": dataclasses.replace(notifications.GROUP, handle=ungrouped_handle),
}


@dataclasses.dataclass
class World:
    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis
    author: uuid.UUID
    post: uuid.UUID
    likers: list[uuid.UUID]


async def make_world(env: dict[str, str], url: str, likes: int) -> World:
    settings = Settings(
        database_url=url,
        redis_url=env_or(env, "REDIS_URL"),
        kafka_bootstrap_servers=env_or(env, "KAFKA_BOOTSTRAP_SERVERS"),
        kafka_topic_prefix=f"bench{uuid.uuid4().hex[:8]}.",
        outbox_idle_ms=50,
    )
    pool = await create_pool(url, min_size=2, max_size=WRITERS + 4)
    author, post = new_id(), new_id()
    likers = [new_id() for _ in range(likes)]
    await pool.execute(
        "INSERT INTO members (id, external_id, username, display_name) VALUES ($1, 'author', 'author', 'Author')",
        author,
    )
    await pool.execute(
        "INSERT INTO members (id, external_id, username, display_name)"
        " SELECT id, 'l-' || id::text, 'l' || replace(id::text, '-', ''), 'Liker' FROM unnest($1::uuid[]) AS id",
        likers,
    )
    await pool.execute("INSERT INTO posts (id, author_id, content) VALUES ($1, $2, 'viral')", post, author)
    await pool.execute("ANALYZE")
    return World(settings, pool, aioredis.from_url(settings.redis_url or ""), author, post, likers)


async def burst(world: World) -> float:
    """Every liker likes the post, each in its own transaction; returns when the last one committed."""
    members = await members_db.by_ids(world.pool, world.likers)
    queue = list(members.values())

    async def writer() -> None:
        while queue:
            member = queue.pop()
            async with world.pool.acquire() as conn, conn.transaction():
                await reactions.like(conn, world.settings, member, world.post)

    await asyncio.gather(*(writer() for _ in range(WRITERS)))
    return time.monotonic()


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError("the worker did not finish")
        await asyncio.sleep(0.02)
    return time.monotonic()


def done_check(world: World, path: str) -> Callable[[], Awaitable[bool]]:
    want = len(world.likers)

    async def grouped() -> bool:
        count = await world.pool.fetchval(
            "SELECT actor_count FROM notification_groups WHERE recipient_id = $1 AND kind = 'like'", world.author
        )
        return bool(count == want)

    async def ungrouped() -> bool:
        return bool(await world.pool.fetchval("SELECT count(*) FROM notifications") == want)

    return grouped if path == "grouped" else ungrouped


def runner(world: World, spec: GroupSpec) -> GroupRunner:
    return GroupRunner(spec, WorkerContext(settings=world.settings, pool=world.pool, redis=world.redis), poll_ms=50)


async def throughput(env: dict[str, str], url: str, path: str, likes: int) -> float:
    world = await make_world(env, url, likes)
    stop = asyncio.Event()
    relay = asyncio.create_task(Relay(world.settings).run(stop))
    try:
        await burst(world)
        await until(lambda: _published(world.pool))
        work = asyncio.create_task(runner(world, PATHS[path]).run(stop))
        await until(done_check(world, path))
        span = await world.pool.fetchval(
            "SELECT extract(epoch FROM max(created_at) - min(created_at)) FROM notifications"
        )
        stop.set()
        await asyncio.gather(relay, work)
        return (likes - 1) / float(span)
    finally:
        stop.set()
        await world.redis.aclose()
        await world.pool.close()


async def latency(env: dict[str, str], url: str, path: str, likes: int) -> tuple[float, float]:
    """(seconds from the last like's commit to done, the burst's own seconds) with everything running."""
    world = await make_world(env, url, likes)
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(Relay(world.settings).run(stop)),
        asyncio.create_task(runner(world, PATHS[path]).run(stop)),
    ]
    try:
        await asyncio.sleep(3)  # the consumer joins its group before the burst
        started = time.monotonic()
        last = await burst(world)
        finished = await until(done_check(world, path))
        stop.set()
        await asyncio.gather(*tasks)
        return finished - last, last - started
    finally:
        stop.set()
        await world.redis.aclose()
        await world.pool.close()


async def _published(pool: asyncpg.Pool) -> bool:
    return bool(await pool.fetchval("SELECT count(*) = 0 FROM outbox WHERE published_at IS NULL"))


async def measure(env: dict[str, str], urls: list[str], likes: int) -> None:
    rates = {path: await throughput(env, urls.pop(), path, likes) for path in PATHS}
    waits = {path: await latency(env, urls.pop(), path, likes) for path in PATHS}
    print(f"notification groups: one post liked by {likes:,} members, {WRITERS} concurrent writers")
    print("| path | worker likes/s | last like -> done | burst written in |")
    print("|---|---|---|---|")
    for path in PATHS:
        wait, written = waits[path]
        print(f"| {path} | {rates[path]:,.0f} | {wait:.2f} s | {written:.1f} s |")
    print(f"grouped / ungrouped worker throughput: {rates['grouped'] / rates['ungrouped']:.2f}")


def main(likes: int) -> None:
    with services() as env:
        urls = [fresh_database(env_or(env, "DATABASE_URL")) for _ in range(2 * len(PATHS))]
        asyncio.run(measure(env, urls, likes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--likes", type=int, default=10_000)
    main(parser.parse_args().likes)
