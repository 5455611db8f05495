"""What a feed page shows beside its posts' own rows, in ONE statement.

A page's extras are seven kinds of rows (authors, tags, media, like counts,
comment counts, the viewer's likes, the reposted originals); loaded one kind
at a time they would cost seven statements and seven pool round trips. Here
they come back in one statement: one row per page post and per visible original
of a repost on the page, so the originals carry their own extras too (feeds
show a repost's original with its author, tags and counts).

Each column keeps one kind's rule: READY media only, in attachment order;
comments counted for active commenters only; the originals as the viewer may
see them (visible_posts). tests/feeds/test_page_extras.py checks the statement
against the plainest query for each kind.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from feedfabric.core.models import Extras, Member, PageExtras, Post
from feedfabric.db.queryable import Queryable

__all__ = ["EXTRAS_CTES", "EXTRAS_SELECT", "Extras", "PageExtras", "extras_of", "page_extras"]


# The extras of whatever a statement's `page` CTE (id, author_id, repost_of) holds, with the viewer
# at $2, in two parts: the CTEs that follow `page`, and the select over them (one row per subject:
# each page post and each visible original it reposts). The home feed's first round wraps the select
# to add its candidate rows (db.timeline_queries).
#
# Each kind of extra is read for all subjects at once (`= ANY` of the subjects' IDs, grouped by post),
# then joined by post ID: per-row subqueries were set up and rescanned once per subject and kind,
# a large share of the statement's cost on a page (docs/benchmarks.md). The
# counts are the trigger-kept post_stats (migration 110), so a post's likes are never scanned.
EXTRAS_CTES = """
originals AS (
    SELECT o.id, o.author_id, o.content, o.repost_of, o.status, o.created_at, o.updated_at
    FROM visible_posts($2) o
    WHERE o.id IN (SELECT repost_of FROM page WHERE repost_of IS NOT NULL)
), subjects AS (
    SELECT id, author_id FROM page UNION SELECT id, author_id FROM originals
), subject_ids AS (
    SELECT ARRAY(SELECT id FROM subjects) AS ids
), subject_tags AS (
    SELECT post_id, array_agg(tag ORDER BY tag) AS tags FROM post_tags
    WHERE post_id = ANY((SELECT ids FROM subject_ids)::uuid[]) GROUP BY post_id
), subject_media AS (
    SELECT pm.post_id, json_agg(json_build_object(
               'post_id', pm.post_id, 'position', pm.position, 'id', md.id, 'owner_id', md.owner_id,
               'status', md.status, 'content_type', md.content_type, 'width', md.width, 'height', md.height,
               'byte_size', md.byte_size, 'score', md.score, 'reason', md.reason,
               'created_at', md.created_at, 'updated_at', md.updated_at) ORDER BY pm.position) AS media
    FROM post_media pm JOIN media md ON md.id = pm.media_id
    WHERE pm.post_id = ANY((SELECT ids FROM subject_ids)::uuid[]) AND md.status = 'ready'
    GROUP BY pm.post_id
), viewer_likes AS (
    SELECT post_id FROM likes
    WHERE member_id = $2 AND post_id = ANY((SELECT ids FROM subject_ids)::uuid[])
)
"""

EXTRAS_SELECT = """
SELECT s.id, s.author_id,
       o.id IS NOT NULL AS is_original, o.content, o.repost_of, o.status, o.created_at, o.updated_at,
       m.id AS member_id, m.external_id, m.username, m.display_name, m.avatar_url,
       m.status AS member_status, m.last_seen_at,
       coalesce(t.tags, '{}') AS tags,
       coalesce(md.media, '[]'::json) AS media,
       coalesce(ps.likes, 0) AS like_count,
       coalesce(ps.comments, 0) AS comment_count,
       vl.post_id IS NOT NULL AS viewer_liked
FROM subjects s
LEFT JOIN members m ON m.id = s.author_id
LEFT JOIN originals o ON o.id = s.id
LEFT JOIN subject_tags t ON t.post_id = s.id
LEFT JOIN subject_media md ON md.post_id = s.id
LEFT JOIN post_stats ps ON ps.post_id = s.id
LEFT JOIN viewer_likes vl ON vl.post_id = s.id
"""

_STATEMENT = (
    """
WITH page AS (
    SELECT id, author_id, repost_of FROM posts WHERE id = ANY($1::uuid[])
),"""
    + EXTRAS_CTES
    + EXTRAS_SELECT
)


def _media(item: dict[str, Any]) -> dict[str, Any]:
    for key in ("post_id", "id", "owner_id"):
        item[key] = uuid.UUID(item[key])
    for key in ("created_at", "updated_at"):
        if item[key] is not None:
            item[key] = datetime.fromisoformat(item[key])
    return item


async def page_extras(conn: Queryable, post_ids: Sequence[uuid.UUID], viewer_id: uuid.UUID | None) -> PageExtras:
    """The extras of `post_ids` and of the originals they repost that the viewer may see, in one statement."""
    return extras_of(await conn.fetch(_STATEMENT, list(post_ids), viewer_id))


def extras_of(rows: Iterable[asyncpg.Record]) -> PageExtras:
    """PageExtras from rows carrying the columns of EXTRAS_SELECT."""
    extras: dict[uuid.UUID, Extras] = {}
    originals: dict[uuid.UUID, Post] = {}
    for r in rows:
        author = (
            Member(
                r["member_id"],
                r["external_id"],
                r["username"],
                r["display_name"],
                r["avatar_url"],
                r["member_status"],
                r["last_seen_at"],
            )
            if r["member_id"] is not None
            else None
        )
        media = r["media"]
        extras[r["id"]] = Extras(
            author,
            list(r["tags"]),
            [_media(m) for m in media] if media else [],
            r["like_count"],
            r["comment_count"],
            r["viewer_liked"],
        )
        if r["is_original"]:
            originals[r["id"]] = Post(
                r["id"], r["author_id"], r["content"], r["repost_of"], r["status"], r["created_at"], r["updated_at"]
            )
    return PageExtras(extras, originals)
