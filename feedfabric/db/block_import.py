"""The set-based statements of importBlocks: names to members, and the follows and favourites a block
ends, for a whole list at once. Each is one statement whatever the list's length, on the indexes the
single-member paths use, so an import's cost grows linearly with its lines."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from feedfabric.db.queryable import Queryable

__all__ = ["end_favourites", "end_follows", "give_memory", "resolve"]

_RESOLVE = """SELECT g.ord, COALESCE(e.id, u.id{address_id}) AS id
           FROM unnest($1::text[]) WITH ORDINALITY AS g(name, ord)
           LEFT JOIN members e ON e.external_id = g.name
           LEFT JOIN members u ON lower(u.username) = lower(g.name){address_join}
           ORDER BY g.ord"""
_BY_NAME = _RESOLVE.format(address_id="", address_join="")
_BY_NAME_OR_ADDRESS = _RESOLVE.format(
    address_id=", a.id",
    address_join="""
           LEFT JOIN members a ON strpos(g.name, '@') > 1 AND lower(a.username) = lower(split_part(g.name, '@', 1))""",
)


async def resolve(conn: Queryable, names: Sequence[str]) -> list[uuid.UUID | None]:
    """The member each name is, in the order given: its external ID, else its username (any case), else,
    for a Mastodon account address `user@domain`, the username before the `@`; None for no member. The
    address join is left out when no name has an `@` (a plain list of usernames)."""
    query = _BY_NAME_OR_ADDRESS if any("@" in name for name in names) else _BY_NAME
    rows = await conn.fetch(query, list(names))
    return [r["id"] for r in rows]


async def give_memory(conn: asyncpg.Connection) -> None:
    """Room for the import's hash joins and sorts in memory (until the transaction ends): at the default
    work_mem a 100,000-line list spills them to disk in batches."""
    await conn.execute("SET LOCAL work_mem = '64MB'")


async def end_follows(
    conn: asyncpg.Connection, blocker_id: uuid.UUID, blocked_ids: Sequence[uuid.UUID]
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Ends the member follows between the blocker and each blocked member, both ways; returns the
    (follower, followed) pairs that ended, for their MemberUnfollowed events."""
    rows = await conn.fetch(
        """DELETE FROM follows
           WHERE target_type = 'member'
             AND ((follower_id = $1 AND target_id = ANY($2::text[]))
                  OR (follower_id = ANY($3::uuid[]) AND target_id = $1::text))
           RETURNING follower_id, target_id""",
        blocker_id,
        [str(b) for b in blocked_ids],
        list(blocked_ids),
    )
    return [(r["follower_id"], uuid.UUID(r["target_id"])) for r in rows]


async def end_favourites(conn: asyncpg.Connection, blocker_id: uuid.UUID, blocked_ids: Sequence[uuid.UUID]) -> None:
    """Ends the favourites between the blocker and each blocked member, both ways."""
    await conn.execute(
        """DELETE FROM favourites
           WHERE (member_id = $1 AND favourite_id = ANY($2::uuid[]))
              OR (member_id = ANY($2::uuid[]) AND favourite_id = $1)""",
        blocker_id,
        list(blocked_ids),
    )
