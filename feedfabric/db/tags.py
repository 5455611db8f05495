"""post_tags as the ML workers see them: hashtags belong to post writes, inferred rows to worker-embeddings."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

__all__ = ["replace_inferred_tags", "tags_of_post"]


async def tags_of_post(conn: asyncpg.Connection, post_id: uuid.UUID) -> list[str]:
    """Every tag of the post, hashtag or inferred, in name order."""
    rows = await conn.fetch("SELECT tag FROM post_tags WHERE post_id = $1 ORDER BY tag", post_id)
    return [r["tag"] for r in rows]


async def replace_inferred_tags(conn: asyncpg.Connection, post_id: uuid.UUID, tags: Sequence[str]) -> None:
    """Makes the post's inferred tags exactly `tags`; a hashtag of the same name wins and stays a hashtag."""
    await conn.execute(
        "WITH gone AS (DELETE FROM post_tags WHERE post_id = $1 AND source = 'inferred'"
        " AND NOT (tag = ANY($2::text[])))"
        " INSERT INTO post_tags (post_id, tag, source) SELECT $1, t, 'inferred' FROM unnest($2::text[]) AS t"
        " ON CONFLICT (post_id, tag) DO NOTHING",
        post_id,
        sorted(set(tags)),
    )
