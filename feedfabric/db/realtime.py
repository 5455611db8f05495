"""Queries of the realtime consumer: batched per polled chunk, and only among members connected here."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from feedfabric.core.models import Post
from feedfabric.db.queryable import Queryable

__all__ = ["PostVisibility", "connected_followers", "likers", "posts_with_visibility"]

_COLUMNS = "id, author_id, content, repost_of, status, created_at, updated_at"


@dataclass(frozen=True)
class PostVisibility:
    post: Post
    # post_visible for any viewer but its author, and for its author: a held post differs.
    public: bool
    to_author: bool
    tags: list[str]


async def posts_with_visibility(conn: Queryable, post_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, PostVisibility]:
    rows = await conn.fetch(
        f"""SELECT {_COLUMNS},
                   post_visible(status, author_id, repost_of, NULL) AS public,
                   post_visible(status, author_id, repost_of, author_id) AS to_author,
                   ARRAY(SELECT t.tag FROM post_tags t WHERE t.post_id = posts.id ORDER BY t.tag) AS tags
            FROM posts WHERE id = ANY($1::uuid[])""",
        list(post_ids),
    )
    return {r["id"]: PostVisibility(Post.of(r), bool(r["public"]), bool(r["to_author"]), list(r["tags"])) for r in rows}


async def connected_followers(
    conn: Queryable, connected: Sequence[uuid.UUID], author_ids: Sequence[uuid.UUID], tags: Sequence[str]
) -> list[tuple[uuid.UUID, str, str, int]]:
    """(follower, target_type, target_id, the follower's relations_version) for follows of these authors
    or tags by connected members.

    Bounded by the members connected to this process, not by the authors'
    follower counts, so a celebrity's post costs the same as anyone's here.
    One query per target type, so every condition is an index condition (the
    connected IDs are probed in the target index, or the primary key): with one
    `OR` of the two the connected IDs were only a filter, scanned for every
    follow of the author (docs/benchmarks.md). The version lets live delivery
    use its copy of a follower's relations only while it is current: a mute
    committed before the post holds even while its event is still on its way.
    """
    if not connected or (not author_ids and not tags):
        return []
    rows = await conn.fetch(
        """SELECT f.follower_id, f.target_type, f.target_id, m.relations_version
             FROM (SELECT follower_id, target_type, target_id FROM follows
                    WHERE follower_id = ANY($1::uuid[]) AND target_type = 'member' AND target_id = ANY($2::text[])
                   UNION ALL
                   SELECT follower_id, target_type, target_id FROM follows
                    WHERE follower_id = ANY($1::uuid[]) AND target_type = 'tag' AND target_id = ANY($3::text[])) f
             JOIN members m ON m.id = f.follower_id""",
        list(connected),
        [str(a) for a in author_ids],
        list(tags),
    )
    return [(r["follower_id"], r["target_type"], r["target_id"], r["relations_version"]) for r in rows]


async def likers(
    conn: Queryable, post_ids: Sequence[uuid.UUID], members: Sequence[uuid.UUID]
) -> dict[uuid.UUID, frozenset[int]]:
    """Which of `members` (a chunk's recipients) like each of `post_ids` (its posts and reposted originals
    with likes), as the members' UUIDs' integers, for every recipient's `viewerHasLiked` at once
    (realtime.item). One probe of the likes' primary key (post_id, member_id) per pair, so it is bounded by
    the recipients, not by an original's likes; a post none of them likes is absent."""
    if not post_ids or not members:
        return {}
    rows = await conn.fetch(
        "SELECT post_id, array_agg(member_id) AS members FROM likes"
        " WHERE post_id = ANY($1::uuid[]) AND member_id = ANY($2::uuid[]) GROUP BY post_id",
        list(post_ids),
        list(members),
    )
    return {r["post_id"]: frozenset(m.int for m in r["members"]) for r in rows}
