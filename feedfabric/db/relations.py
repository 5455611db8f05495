"""Queries over a member's relations: blocks, mutes, muted words, and the version that names them.

Every change bumps members.relations_version of each member whose view it
changes (both sides of a block, the muter of a mute or a word) in the same
transaction, so a reader holding relations keyed by that version knows they
are current (feeds.relations). Expiries are compared with now() by every
reader; nothing deletes an expired row on time.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from feedfabric.db.queryable import Queryable

__all__ = [
    "MutedWordRow",
    "RelationRows",
    "add_block",
    "add_blocks",
    "add_word",
    "blocked_either_way",
    "blocked_page",
    "bump",
    "count_words",
    "follow_unless_blocked",
    "load",
    "load_many",
    "lock_pair",
    "member_locking_pair",
    "muted_page",
    "put_mute",
    "remove_block",
    "remove_mute",
    "remove_word",
    "words",
]

_M = "m.id, m.external_id, m.username, m.display_name, m.avatar_url, m.status, m.last_seen_at"
Position = tuple[datetime, str]


async def bump(conn: asyncpg.Connection, member_ids: Sequence[uuid.UUID]) -> None:
    """A new relations version for each member; rows locked in ID order, so two transactions bumping the
    same pair (A blocks B while B blocks A) wait on each other instead of deadlocking."""
    await conn.execute(
        """UPDATE members SET relations_version = relations_version + 1
           WHERE id IN (SELECT id FROM members WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE)""",
        list(member_ids),
    )


async def version(conn: Queryable, member_id: uuid.UUID) -> int:
    return int(await conn.fetchval("SELECT relations_version FROM members WHERE id = $1", member_id) or 0)


# -- blocks --------------------------------------------------------------------


async def lock_pair(conn: asyncpg.Connection, a: uuid.UUID, b: uuid.UUID, *, exclusive: bool) -> None:
    """The pair's advisory lock until the transaction ends, the same key whichever member acts:
    exclusive for a block or an unblock, shared for an interaction (feeds.blocking)."""
    low, high = sorted((str(a), str(b)))
    if exclusive:
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 320))", f"{low}:{high}")
    else:
        await conn.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 320))", f"{low}:{high}")


async def member_locking_pair(conn: asyncpg.Connection, external_id: str, actor_id: uuid.UUID) -> asyncpg.Record | None:
    """The member named by `external_id`, taking the pair's shared lock (`lock_pair`) in the same statement:
    an interaction's lookup and lock in one round trip. The statement after it sees any block that
    committed while it waited (READ COMMITTED: a new snapshot per statement)."""
    row: asyncpg.Record | None = await conn.fetchrow(
        f"""SELECT {_M.replace("m.", "")},
                   pg_advisory_xact_lock_shared(hashtextextended(
                       least(id::text COLLATE "C", $2::uuid::text) || ':' || greatest(id::text COLLATE "C", $2::uuid::text),
                       320)) IS NULL AS locked
            FROM members WHERE external_id = $1""",
        external_id,
        actor_id,
    )
    return row


async def follow_unless_blocked(conn: asyncpg.Connection, follower_id: uuid.UUID, member_id: uuid.UUID) -> bool | None:
    """The follow, unless either member blocks the other, in one statement: True when new, False when it
    was there, None when a block stands between them (the caller answers BLOCKED)."""
    row = await conn.fetchrow(
        """WITH blocked AS (
               SELECT EXISTS (SELECT 1 FROM blocks WHERE blocker_id = $1 AND blocked_id = $2)
                   OR EXISTS (SELECT 1 FROM blocks WHERE blocker_id = $2 AND blocked_id = $1) AS yes
           ), added AS (
               INSERT INTO follows (follower_id, target_type, target_id)
               SELECT $1, 'member', $2::uuid::text FROM blocked WHERE NOT blocked.yes
               ON CONFLICT DO NOTHING RETURNING 1
           )
           SELECT (SELECT yes FROM blocked) AS blocked, EXISTS (SELECT 1 FROM added) AS added""",
        follower_id,
        member_id,
    )
    if row["blocked"]:
        return None
    return bool(row["added"])


async def add_block(conn: asyncpg.Connection, blocker_id: uuid.UUID, blocked_id: uuid.UUID) -> bool:
    """True when the block is new."""
    status = await conn.execute(
        "INSERT INTO blocks (blocker_id, blocked_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", blocker_id, blocked_id
    )
    return bool(status.endswith(" 1"))


async def add_blocks(
    conn: asyncpg.Connection, blocker_id: uuid.UUID, blocked_ids: Sequence[uuid.UUID]
) -> list[uuid.UUID]:
    """Many blocks in one statement (importBlocks); returns those that are new."""
    rows = await conn.fetch(
        """INSERT INTO blocks (blocker_id, blocked_id)
           SELECT $1, b FROM unnest($2::uuid[]) AS b WHERE b <> $1
           ON CONFLICT DO NOTHING RETURNING blocked_id""",
        blocker_id,
        list(blocked_ids),
    )
    return [r["blocked_id"] for r in rows]


async def remove_block(conn: asyncpg.Connection, blocker_id: uuid.UUID, blocked_id: uuid.UUID) -> bool:
    status = await conn.execute("DELETE FROM blocks WHERE blocker_id = $1 AND blocked_id = $2", blocker_id, blocked_id)
    return bool(status.endswith(" 1"))


async def blocked_either_way(conn: Queryable, a: uuid.UUID, b: uuid.UUID) -> bool:
    """Whether either member blocks the other (BLOCKED on any interaction between them)."""
    return bool(
        await conn.fetchval(
            """SELECT EXISTS (SELECT 1 FROM blocks WHERE blocker_id = $1 AND blocked_id = $2)
                   OR EXISTS (SELECT 1 FROM blocks WHERE blocker_id = $2 AND blocked_id = $1)""",
            a,
            b,
        )
    )


async def blocks_among(conn: Queryable, viewer_id: uuid.UUID, member_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of these members the viewer blocks (Member.viewerBlocks, batched)."""
    rows = await conn.fetch(
        "SELECT blocked_id FROM blocks WHERE blocker_id = $1 AND blocked_id = ANY($2::uuid[])",
        viewer_id,
        list(member_ids),
    )
    return {r["blocked_id"] for r in rows}


async def mutes_among(conn: Queryable, viewer_id: uuid.UUID, member_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of these members the viewer mutes, unexpired (Member.viewerMutes, batched)."""
    rows = await conn.fetch(
        """SELECT muted_id FROM mutes WHERE muter_id = $1 AND muted_id = ANY($2::uuid[])
             AND (expires_at IS NULL OR expires_at > now())""",
        viewer_id,
        list(member_ids),
    )
    return {r["muted_id"] for r in rows}


async def blocked_page(
    conn: Queryable, blocker_id: uuid.UUID, before: Position | None, limit: int
) -> list[asyncpg.Record]:
    """Members the blocker blocks, most recent first, with `listed_at` (blocks_recent_idx: one range)."""
    after = "AND (b.created_at, b.blocked_id) < ($2, $3::uuid)" if before is not None else ""
    args: list[Any] = [blocker_id, *(before or ()), limit]
    found: list[asyncpg.Record] = await conn.fetch(
        f"""SELECT {_M}, b.created_at AS listed_at FROM blocks b JOIN members m ON m.id = b.blocked_id
            WHERE b.blocker_id = $1 {after}
            ORDER BY b.created_at DESC, b.blocked_id DESC LIMIT ${len(args)}""",
        *args,
    )
    return found


async def muted_page(conn: Queryable, muter_id: uuid.UUID, before: Position | None, limit: int) -> list[asyncpg.Record]:
    """Members the muter mutes and whose mute has not expired, most recent first, with `listed_at`."""
    after = "AND (u.created_at, u.muted_id) < ($2, $3::uuid)" if before is not None else ""
    args: list[Any] = [muter_id, *(before or ()), limit]
    found: list[asyncpg.Record] = await conn.fetch(
        f"""SELECT {_M}, u.created_at AS listed_at FROM mutes u JOIN members m ON m.id = u.muted_id
            WHERE u.muter_id = $1 AND (u.expires_at IS NULL OR u.expires_at > now()) {after}
            ORDER BY u.created_at DESC, u.muted_id DESC LIMIT ${len(args)}""",
        *args,
    )
    return found


# -- mutes ---------------------------------------------------------------------


async def put_mute(
    conn: asyncpg.Connection,
    muter_id: uuid.UUID,
    muted_id: uuid.UUID,
    notifications: bool,
    expires_in_seconds: int | None,
) -> bool:
    """A mute, or a new choice of notifications and expiry for an existing one. True when it was not
    in force before (new, or its earlier expiry had passed): the caller emits MemberMuted then."""
    row = await conn.fetchrow(
        """WITH before AS (
               SELECT expires_at IS NULL OR expires_at > now() AS active FROM mutes
               WHERE muter_id = $1 AND muted_id = $2 FOR UPDATE
           )
           INSERT INTO mutes (muter_id, muted_id, notifications, expires_at)
           VALUES ($1, $2, $3, CASE WHEN $4::integer IS NULL THEN NULL ELSE now() + make_interval(secs => $4) END)
           ON CONFLICT (muter_id, muted_id) DO UPDATE
              SET notifications = EXCLUDED.notifications, expires_at = EXCLUDED.expires_at,
                  created_at = CASE WHEN mutes.expires_at IS NOT NULL AND mutes.expires_at <= now()
                                    THEN clock_timestamp() ELSE mutes.created_at END
           RETURNING NOT COALESCE((SELECT active FROM before), false) AS new""",
        muter_id,
        muted_id,
        notifications,
        expires_in_seconds,
    )
    return bool(row["new"])


async def remove_mute(conn: asyncpg.Connection, muter_id: uuid.UUID, muted_id: uuid.UUID) -> bool:
    """True when a mute in force was removed (an expired one is removed silently)."""
    found = await conn.fetchval(
        """DELETE FROM mutes WHERE muter_id = $1 AND muted_id = $2
           RETURNING expires_at IS NULL OR expires_at > now()""",
        muter_id,
        muted_id,
    )
    return bool(found)


# -- muted words -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MutedWordRow:
    id: uuid.UUID
    phrase: str
    whole_word: bool
    contexts: list[str]
    expires_at: datetime | None


_W = "id, phrase, whole_word, contexts, expires_at"


def _word(r: asyncpg.Record) -> MutedWordRow:
    return MutedWordRow(r["id"], r["phrase"], r["whole_word"], list(r["contexts"]), r["expires_at"])


async def count_words(conn: asyncpg.Connection, member_id: uuid.UUID) -> int:
    """Words in force (expired ones do not count against the cap)."""
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM muted_words WHERE member_id = $1 AND (expires_at IS NULL OR expires_at > now())",
            member_id,
        )
    )


async def add_word(
    conn: asyncpg.Connection,
    word_id: uuid.UUID,
    member_id: uuid.UUID,
    phrase: str,
    whole_word: bool,
    contexts: Sequence[str],
    expires_in_seconds: int | None,
) -> MutedWordRow:
    row = await conn.fetchrow(
        f"""INSERT INTO muted_words (id, member_id, phrase, whole_word, contexts, expires_at)
            VALUES ($1, $2, $3, $4, $5::text[],
                    CASE WHEN $6::integer IS NULL THEN NULL ELSE now() + make_interval(secs => $6) END)
            RETURNING {_W}""",
        word_id,
        member_id,
        phrase,
        whole_word,
        list(contexts),
        expires_in_seconds,
    )
    return _word(row)


async def remove_word(conn: asyncpg.Connection, member_id: uuid.UUID, word_id: uuid.UUID) -> bool:
    status = await conn.execute("DELETE FROM muted_words WHERE id = $1 AND member_id = $2", word_id, member_id)
    return bool(status.endswith(" 1"))


async def words(conn: Queryable, member_id: uuid.UUID) -> list[MutedWordRow]:
    """The member's words in force, newest first."""
    rows = await conn.fetch(
        f"""SELECT {_W} FROM muted_words WHERE member_id = $1 AND (expires_at IS NULL OR expires_at > now())
            ORDER BY id DESC""",
        member_id,
    )
    return [_word(r) for r in rows]


# -- everything at once, for feeds.relations ------------------------------------------------


@dataclass(frozen=True, slots=True)
class RelationRows:
    """A member's relations as of `version`: read in one statement, so they agree with each other."""

    version: int
    blocked: list[uuid.UUID]
    blocked_by: list[uuid.UUID]
    # (member, notifications, expires_at)
    muted: list[tuple[uuid.UUID, bool, datetime | None]]
    words: list[MutedWordRow]
    now: datetime


async def load(conn: Queryable, member_id: uuid.UUID) -> RelationRows:
    """One member's relations (`load_many`)."""
    return (await load_many(conn, [member_id]))[member_id]


async def load_many(conn: Queryable, member_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, RelationRows]:
    """Each member's version and every relation in force, in two statements for any number of members
    (a page's viewer, or every subscriber a live item reaches), with the server's clock: expiries are
    compared with it, so an API host's clock skew cannot keep a mute alive. The version is read first:
    relations read after it are at least as new, never older than the version they are kept under."""
    rows = await conn.fetch(
        """SELECT m.id, m.relations_version AS version,
                  ARRAY(SELECT blocked_id FROM blocks WHERE blocker_id = m.id) AS blocked,
                  ARRAY(SELECT blocker_id FROM blocks WHERE blocked_id = m.id) AS blocked_by,
                  ARRAY(SELECT muted_id FROM mutes WHERE muter_id = m.id
                          AND (expires_at IS NULL OR expires_at > now()) ORDER BY muted_id) AS muted,
                  ARRAY(SELECT notifications FROM mutes WHERE muter_id = m.id
                          AND (expires_at IS NULL OR expires_at > now()) ORDER BY muted_id) AS muted_notifications,
                  ARRAY(SELECT expires_at FROM mutes WHERE muter_id = m.id
                          AND (expires_at IS NULL OR expires_at > now()) ORDER BY muted_id) AS muted_expiry,
                  now() AS now
           FROM members m WHERE m.id = ANY($1::uuid[])""",
        list(member_ids),
    )
    word_rows = await conn.fetch(
        f"""SELECT member_id, {_W} FROM muted_words
            WHERE member_id = ANY($1::uuid[]) AND (expires_at IS NULL OR expires_at > now())
            ORDER BY member_id, id DESC""",
        list(member_ids),
    )
    words_of: dict[uuid.UUID, list[MutedWordRow]] = {}
    for w in word_rows:
        words_of.setdefault(w["member_id"], []).append(_word(w))
    found: dict[uuid.UUID, RelationRows] = {}
    for row in rows:
        muted = list(zip(row["muted"], row["muted_notifications"], row["muted_expiry"], strict=True))
        found[row["id"]] = RelationRows(
            int(row["version"]),
            list(row["blocked"]),
            list(row["blocked_by"]),
            muted,
            words_of.get(row["id"], []),
            row["now"],
        )
    return found
