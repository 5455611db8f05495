"""The visibility rule's two forms agree: post_visible (per row) and visible_posts (a relation, inlined)."""

from __future__ import annotations

import uuid

import asyncpg
from feedfabric.core.ids import new_id

from tests import factories as f

STATUSES = ("live", "held", "deleted")


async def _post(pool: asyncpg.Pool, author: uuid.UUID, status: str, repost_of: uuid.UUID | None = None) -> uuid.UUID:
    post_id = new_id()
    await pool.execute(
        "INSERT INTO posts (id, author_id, content, status, repost_of) VALUES ($1, $2, 'x', $3, $4)",
        post_id,
        author,
        status,
        repost_of,
    )
    return post_id


async def _author(pool: asyncpg.Pool, suspended: bool) -> uuid.UUID:
    member = await f.member(pool)
    if suspended:
        await pool.execute("UPDATE members SET status = 'suspended' WHERE id = $1", member)
    return member


async def test_visible_posts_and_post_visible_agree_for_every_status_author_repost_and_viewer(
    pool: asyncpg.Pool,
) -> None:
    authors = [await _author(pool, suspended) for suspended in (False, True)]
    originals = [await _post(pool, author, status) for author in authors for status in STATUSES]
    reposters: list[uuid.UUID] = []
    reposts: list[uuid.UUID] = []
    for original in originals:
        for suspended in (False, True):
            for status in STATUSES:
                reposters.append(await _author(pool, suspended))
                reposts.append(await _post(pool, reposters[-1], status, repost_of=original))
    everything = originals + reposts
    stranger = await f.member(pool)
    seen_by_someone: set[uuid.UUID] = set()
    for viewer in [None, stranger, *authors, *reposters]:
        per_row = {
            r["id"]
            for r in await pool.fetch(
                "SELECT id FROM posts WHERE id = ANY($1) AND post_visible(status, author_id, repost_of, $2)",
                everything,
                viewer,
            )
        }
        relation = {
            r["id"]
            for r in await pool.fetch(
                "SELECT id FROM visible_posts($2) WHERE id = ANY($1)",
                everything,
                viewer,
            )
        }
        assert relation == per_row, viewer
        seen_by_someone |= relation
    # The cases are real ones: some posts are visible, some never are (deleted, suspended authors).
    assert originals[0] in seen_by_someone and originals[2] not in seen_by_someone
    assert 0 < len(seen_by_someone) < len(everything)
