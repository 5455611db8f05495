"""Queries over playlists and playlist_items.

Items are ordered by (rank, id): rank is a fractional string key compared
byte-wise (the column is COLLATE "C"), id breaks ties so the order is total
even if two keys were ever equal. Pages are keyset on that pair, never OFFSET.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from feedfabric.core.models import Playlist, PlaylistItem
from feedfabric.db.queryable import Queryable

__all__ = [
    "count_items",
    "delete_item",
    "get",
    "insert",
    "insert_item",
    "item",
    "item_for_post",
    "last_rank",
    "liked_of",
    "liked_playlist_id",
    "max_rank_length",
    "next_after",
    "ordered_item_ids",
    "owned_page",
    "page",
    "prev_before",
    "rewrite_ranks",
    "set_rank",
]

# Fixed forever: a member's Liked playlist is the row with ID uuid5(LIKED_NAMESPACE, str(member_id)).
LIKED_NAMESPACE = uuid.UUID("6f1c3a52-4a8e-5b7e-9d0c-2f5a1b3c4d5e")
LIKED_NAME = "Liked"

_PL = "id, owner_id, name, kind, created_at"
_IT = "id, playlist_id, post_id, rank, added_at"
_I_IT = "i.id, i.playlist_id, i.post_id, i.rank, i.added_at"


async def insert(
    conn: asyncpg.Connection, playlist_id: uuid.UUID, owner_id: uuid.UUID, name: str, kind: str
) -> Playlist:
    row = await conn.fetchrow(
        f"INSERT INTO playlists (id, owner_id, name, kind) VALUES ($1, $2, $3, $4) RETURNING {_PL}",
        playlist_id,
        owner_id,
        name,
        kind,
    )
    return Playlist.of(row)


async def ensure_many(
    conn: Queryable, ids: Sequence[uuid.UUID], owner_ids: Sequence[uuid.UUID], name: str, kind: str
) -> dict[uuid.UUID, Playlist]:
    """Creates the rows that do not exist yet (fixed IDs, so racing callers agree) and returns all of them."""
    rows = await conn.fetch(
        f"""WITH wanted AS (SELECT * FROM unnest($1::uuid[], $2::uuid[]) AS w(id, owner_id)),
                 made AS (
                    INSERT INTO playlists (id, owner_id, name, kind)
                    SELECT id, owner_id, $3, $4 FROM wanted
                    ON CONFLICT (id) DO NOTHING
                    RETURNING {_PL})
            SELECT {_PL} FROM made
            UNION ALL
            SELECT {_PL} FROM playlists WHERE id = ANY($1::uuid[])""",
        list(ids),
        list(owner_ids),
        name,
        kind,
    )
    found = {r["id"]: Playlist.of(r) for r in rows}
    if len(found) < len(set(ids)):
        # A racing creator committed after this statement's snapshot: its row is visible now.
        found.update(await by_ids(conn, [i for i in ids if i not in found]))
    return found


def liked_playlist_id(member_id: uuid.UUID) -> uuid.UUID:
    return uuid.uuid5(LIKED_NAMESPACE, str(member_id))


async def liked_of(conn: Queryable, member_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Playlist]:
    """Each member's Liked playlist by member ID, upserted on first use (its ID is fixed, so racers agree)."""
    ids = [liked_playlist_id(m) for m in member_ids]
    rows = await ensure_many(conn, ids, member_ids, LIKED_NAME, "liked")
    return {m: rows[i] for m, i in zip(member_ids, ids, strict=True) if i in rows}


async def get(conn: Queryable, playlist_id: uuid.UUID, *, for_update: bool = False) -> Playlist | None:
    """FOR UPDATE serialises writers of one playlist, so each computes its key from settled neighbours."""
    lock = " FOR UPDATE" if for_update else ""
    row = await conn.fetchrow(f"SELECT {_PL} FROM playlists WHERE id = $1{lock}", playlist_id)
    return Playlist.of(row) if row else None


async def by_ids(conn: Queryable, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Playlist]:
    rows = await conn.fetch(f"SELECT {_PL} FROM playlists WHERE id = ANY($1::uuid[])", list(ids))
    return {r["id"]: Playlist.of(r) for r in rows}


async def item(conn: Queryable, item_id: uuid.UUID) -> PlaylistItem | None:
    row = await conn.fetchrow(f"SELECT {_IT} FROM playlist_items WHERE id = $1", item_id)
    return PlaylistItem.of(row) if row else None


async def item_for_post(conn: Queryable, playlist_id: uuid.UUID, post_id: uuid.UUID) -> PlaylistItem | None:
    row = await conn.fetchrow(
        f"SELECT {_IT} FROM playlist_items WHERE playlist_id = $1 AND post_id = $2 ORDER BY rank, id LIMIT 1",
        playlist_id,
        post_id,
    )
    return PlaylistItem.of(row) if row else None


async def next_after(
    conn: Queryable, playlist_id: uuid.UUID, rank: str, item_id: uuid.UUID, exclude: uuid.UUID | None
) -> tuple[str, uuid.UUID] | None:
    """(rank, id) of the item right after (rank, id), skipping the item being moved."""
    row = await conn.fetchrow(
        """SELECT rank, id FROM playlist_items
           WHERE playlist_id = $1 AND (rank, id) > ($2::text COLLATE "C", $3::uuid)
             AND ($4::uuid IS NULL OR id <> $4)
           ORDER BY rank, id LIMIT 1""",
        playlist_id,
        rank,
        item_id,
        exclude,
    )
    return (row["rank"], row["id"]) if row else None


async def prev_before(
    conn: Queryable, playlist_id: uuid.UUID, rank: str, item_id: uuid.UUID, exclude: uuid.UUID | None
) -> tuple[str, uuid.UUID] | None:
    """(rank, id) of the item right before (rank, id), skipping the item being moved."""
    row = await conn.fetchrow(
        """SELECT rank, id FROM playlist_items
           WHERE playlist_id = $1 AND (rank, id) < ($2::text COLLATE "C", $3::uuid)
             AND ($4::uuid IS NULL OR id <> $4)
           ORDER BY rank DESC, id DESC LIMIT 1""",
        playlist_id,
        rank,
        item_id,
        exclude,
    )
    return (row["rank"], row["id"]) if row else None


async def last_rank(conn: Queryable, playlist_id: uuid.UUID, exclude: uuid.UUID | None) -> str | None:
    found: str | None = await conn.fetchval(
        """SELECT rank FROM playlist_items WHERE playlist_id = $1 AND ($2::uuid IS NULL OR id <> $2)
           ORDER BY rank DESC, id DESC LIMIT 1""",
        playlist_id,
        exclude,
    )
    return found


async def count_items(conn: Queryable, playlist_id: uuid.UUID) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM playlist_items WHERE playlist_id = $1", playlist_id))


async def insert_item(
    conn: asyncpg.Connection, item_id: uuid.UUID, playlist_id: uuid.UUID, post_id: uuid.UUID, rank: str
) -> PlaylistItem:
    row = await conn.fetchrow(
        f"""INSERT INTO playlist_items (id, playlist_id, post_id, rank) VALUES ($1, $2, $3, $4)
            RETURNING {_IT}""",
        item_id,
        playlist_id,
        post_id,
        rank,
    )
    return PlaylistItem.of(row)


async def set_rank(conn: asyncpg.Connection, item_id: uuid.UUID, rank: str) -> PlaylistItem:
    """A move: exactly one row is written."""
    row = await conn.fetchrow(f"UPDATE playlist_items SET rank = $2 WHERE id = $1 RETURNING {_IT}", item_id, rank)
    return PlaylistItem.of(row)


async def delete_item(conn: asyncpg.Connection, item_id: uuid.UUID) -> bool:
    status = await conn.execute("DELETE FROM playlist_items WHERE id = $1", item_id)
    return bool(status.endswith(" 1"))


async def max_rank_length(conn: Queryable, playlist_id: uuid.UUID) -> int:
    return int(
        await conn.fetchval(
            "SELECT coalesce(max(length(rank)), 0) FROM playlist_items WHERE playlist_id = $1", playlist_id
        )
    )


async def ordered_item_ids(conn: Queryable, playlist_id: uuid.UUID) -> list[uuid.UUID]:
    rows = await conn.fetch("SELECT id FROM playlist_items WHERE playlist_id = $1 ORDER BY rank, id", playlist_id)
    return [r["id"] for r in rows]


async def rewrite_ranks(conn: asyncpg.Connection, item_ids: Sequence[uuid.UUID], ranks: Sequence[str]) -> None:
    """Rebalancing: one statement for the whole playlist."""
    await conn.execute(
        """UPDATE playlist_items i SET rank = n.rank
           FROM unnest($1::uuid[], $2::text[]) AS n(id, rank)
           WHERE i.id = n.id AND i.rank <> n.rank""",
        list(item_ids),
        list(ranks),
    )


async def page(
    conn: Queryable,
    playlist_id: uuid.UUID,
    viewer_id: uuid.UUID | None,
    after: tuple[str, uuid.UUID] | None,
    limit: int,
) -> list[PlaylistItem]:
    """Items in playlist order after the (rank, id) cursor, dropping posts the viewer must not see."""
    after_rank, after_id = after if after is not None else (None, None)
    rows = await conn.fetch(
        f"""SELECT {_I_IT} FROM playlist_items i JOIN visible_posts($4) p ON p.id = i.post_id
            WHERE i.playlist_id = $1
              AND ($2::text IS NULL OR (i.rank, i.id) > ($2::text COLLATE "C", $3::uuid))
            ORDER BY i.rank, i.id LIMIT $5""",
        playlist_id,
        after_rank,
        after_id,
        viewer_id,
        limit,
    )
    return [PlaylistItem.of(r) for r in rows]


async def owned_page(conn: Queryable, owner_id: uuid.UUID, before: uuid.UUID | None, limit: int) -> list[Playlist]:
    """A member's USER playlists, newest first (IDs are time-ordered; index playlists_owner_idx)."""
    after = "AND id < $2" if before is not None else ""
    args: list[object] = [owner_id, *([before] if before is not None else []), limit]
    rows = await conn.fetch(
        f"SELECT {_PL} FROM playlists WHERE owner_id = $1 AND kind = 'user' {after}"
        f" ORDER BY id DESC LIMIT ${len(args)}",
        *args,
    )
    return [Playlist.of(r) for r in rows]
