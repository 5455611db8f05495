"""The feed log: served pages become one row per post, batched off the request path."""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.feeds.feedlog import FeedLog
from feedfabric.models import Page, Post
from tests.support import Api


async def _posts(api: Api, pool: asyncpg.Pool, count: int) -> list[Post]:
    author = await api.member("author")
    ids = [uuid.UUID(await api.post(author, f"post {i}")) for i in range(count)]
    rows = await pool.fetch("SELECT * FROM posts WHERE id = ANY($1::uuid[]) ORDER BY id DESC", ids)
    return [Post.of(r) for r in rows]


async def test_pages_of_one_batch_are_logged_one_row_per_post_at_its_position(api: Api, pool: asyncpg.Pool) -> None:
    posts = await _posts(api, pool, 5)
    maya, theo = uuid.uuid4(), uuid.uuid4()
    log = FeedLog(pool)
    log.record(maya, "following", Page(posts[:3], None, "redis"))
    log.record(theo, "favourites", Page(posts[3:], None, "postgres"))
    log.record(theo, "following", Page([], None, "redis"))
    assert await log.flush() == 2
    rows = await pool.fetch("SELECT member_id, feed, post_id, position, source FROM feed_log ORDER BY feed, position")
    assert [(r["member_id"], r["feed"], r["post_id"], r["position"], r["source"]) for r in rows] == [
        (theo, "favourites", posts[3].id, 0, "postgres"),
        (theo, "favourites", posts[4].id, 1, "postgres"),
        (maya, "following", posts[0].id, 0, "redis"),
        (maya, "following", posts[1].id, 1, "redis"),
        (maya, "following", posts[2].id, 2, "redis"),
    ]


async def test_a_full_queue_drops_pages_and_counts_their_rows(api: Api, pool: asyncpg.Pool) -> None:
    posts = await _posts(api, pool, 3)
    log = FeedLog(pool, max_queue=1)
    log.record(uuid.uuid4(), "following", Page(posts, None, "redis"))
    log.record(uuid.uuid4(), "following", Page(posts[:2], None, "redis"))
    assert log.dropped == 2
    assert await log.flush() == 1
    assert await pool.fetchval("SELECT count(*) FROM feed_log") == 3
