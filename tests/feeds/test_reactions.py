"""A like checks and locks its post in one statement, and still sees a deletion or hold that was under way."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from feedfabric.core.errors import NotFound
from feedfabric.core.settings import Settings
from feedfabric.db import members as members_db
from feedfabric.feeds import reactions

from tests import factories


@pytest.mark.parametrize("status", ["deleted", "held"])
async def test_a_like_waits_for_a_status_change_under_way_and_sees_it(
    settings: Settings, pool: asyncpg.Pool, status: str
) -> None:
    author = await factories.member(pool)
    liker_id = await factories.member(pool)
    liker = (await members_db.by_ids(pool, [liker_id]))[liker_id]
    post_id = await factories.post(pool, author)
    async with pool.acquire() as changer, pool.acquire() as liking:
        changing = changer.transaction()
        await changing.start()
        # As the author's delete (or a moderator's hold) does: the row locked for update, its status changed.
        await changer.execute("UPDATE posts SET status = $2 WHERE id = $1", post_id, status)

        async def like() -> None:
            async with liking.transaction():
                await reactions.like(liking, settings, liker, post_id)

        attempt = asyncio.create_task(like())
        # The like's statement is waiting on the row lock, not finished before the change commits.
        await _waiting_on_a_lock(pool, liking)
        assert not attempt.done()
        await changing.commit()
        with pytest.raises(NotFound):
            await attempt
    assert await pool.fetchval("SELECT count(*) FROM likes WHERE post_id = $1", post_id) == 0


async def _waiting_on_a_lock(pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
    pid = conn.get_server_pid()
    for _ in range(2400):
        if await pool.fetchval("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the like never waited on the post's lock")


async def test_a_like_of_a_visible_post_counts(settings: Settings, pool: asyncpg.Pool) -> None:
    author = await factories.member(pool)
    liker_id = await factories.member(pool)
    liker = (await members_db.by_ids(pool, [liker_id]))[liker_id]
    post_id = await factories.post(pool, author)
    async with pool.acquire() as conn, conn.transaction():
        post = await reactions.like(conn, settings, liker, post_id)
    assert post.id == post_id
    assert await pool.fetchval("SELECT count(*) FROM likes WHERE post_id = $1", post_id) == 1
