"""The feed log: what was served, where, and the ranking signals it had then.

The table is partitioned by UTC day (migration 201): a day's partition is made when the first row of
that day arrives (or ahead of time by `ensure_partitions`), and retention drops whole days.

Rows arrive finished (feeds.feed_log computes every signal in the API process, from what the page
read and the reader's cached signals), so writing them is a binary COPY into the day's partition;
the exposure counts they add are folded in one statement per fold, aggregated by pair.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple

import asyncpg

from feedfabric.db import binary_copy
from feedfabric.db.queryable import Queryable

__all__ = [
    "LogRows",
    "PostSeen",
    "ReaderSignals",
    "ServedPage",
    "apply_retention",
    "commented",
    "copy_rows",
    "describe",
    "ensure_partitions",
    "fold_exposure",
    "partition_days",
    "reader_signals",
    "versions",
]

_PARTITION = re.compile(r"^feed_log_(\d{8})$")
# The columns in the order the writer sends them: a page's five shared ones first (encoded once a
# page), then a post's fixed-width ones (one struct a row), the variable-width `reason` last.
COLUMNS = (
    "member_id", "feed", "source", "served_at", "preset",
    "post_id", "position", "affinity", "interest", "favourite", "age_seconds", "similarity", "popularity",
    "affinity_rate", "interest_rate", "author_effect", "topic_effect",
    "reason",
)  # fmt: skip
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_PAGE = struct.Struct(">hi16s")  # field count, member_id
_TIME = struct.Struct(">iq")  # served_at: microseconds since 2000-01-01 UTC
# A post's fields, each its length then its value: post_id, position, affinity, interest, favourite,
# age_seconds, then the six float8 signals.
_POST = struct.Struct(">i16sii" + "id" * 2 + "i?" + "id" * 7)


def _text(value: str | None) -> bytes:
    if value is None:
        return binary_copy.NULL
    data = value.encode()
    return len(data).to_bytes(4, "big") + data


class LogRows:
    """A batch's feed_log rows in binary COPY form, by UTC day: made as the signals are computed (one
    struct a post; a page's shared columns encoded once), sent without asyncpg's per-field codecs."""

    __slots__ = ("count", "days")

    def __init__(self) -> None:
        self.days: dict[date, list[bytes]] = {}
        self.count = 0

    def page(
        self, member_id: uuid.UUID, feed: str, source: str, served_at: datetime, preset: str | None
    ) -> tuple[bytes, list[bytes]]:
        """The page's shared columns, encoded, and the list its rows go to (`add`)."""
        prefix = b"".join(
            (
                _PAGE.pack(len(COLUMNS), 16, member_id.bytes),
                _text(feed),
                _text(source),
                _TIME.pack(8, (served_at - _PG_EPOCH) // _MICROSECOND),
                _text(preset),
            )
        )
        return prefix, self.days.setdefault(served_at.astimezone(UTC).date(), [])

    def add(
        self,
        prefix: bytes,
        out: list[bytes],
        post_id: uuid.UUID,
        position: int,
        affinity: float,
        interest: float,
        favourite: bool,
        age_seconds: float,
        similarity: float,
        popularity: float,
        affinity_rate: float,
        interest_rate: float,
        author_effect: float,
        topic_effect: float,
        reason: str | None,
    ) -> None:
        """One row of the page `prefix` came from."""
        out.append(
            prefix
            + _POST.pack(
                16,
                post_id.bytes,
                4,
                position,
                8,
                affinity,
                8,
                interest,
                1,
                favourite,
                8,
                age_seconds,
                8,
                similarity,
                8,
                popularity,
                8,
                affinity_rate,
                8,
                interest_rate,
                8,
                author_effect,
                8,
                topic_effect,
            )  # fmt: skip
            + _text(reason)
        )
        self.count += 1


@dataclass(frozen=True, slots=True)
class ServedPage:
    """One served page known only by its posts' IDs, in position order (a repost as the post it
    shares): what tools, tests and the simulation log; feeds.feed_log reads what the page showed
    (`describe`) as of `served_at`.

    For You pages also carry their preset, and per post the candidate source that brought it and its
    similarity to the reader's recent likes; the other feeds log NULL and 0 for those.
    """

    member_id: uuid.UUID
    feed: str
    post_ids: tuple[uuid.UUID, ...]
    source: str
    served_at: datetime
    preset: str | None = None
    reasons: tuple[str, ...] | None = None
    similarities: tuple[float, ...] | None = None


class PostSeen(NamedTuple):
    """What a page showed of one post: its author, tags, creation time, likes and comments (post_stats'
    rule), and whether the reader had liked it."""

    author_id: uuid.UUID
    tags: tuple[str, ...]
    created_at: datetime
    likes: int
    comments: int
    liked: bool


@dataclass(slots=True)
class ReaderSignals:
    """What the feed log reads about one reader, at `version` (migration 350): by author their
    affinity, exposure count, per-reader effect and whether a favourite; by tag their interest,
    exposure count and effect; whether they ever commented. The writer adds the exposure it counts."""

    version: int
    affinity: dict[uuid.UUID, float]
    author_exposure: dict[uuid.UUID, int]
    author_effect: dict[uuid.UUID, float]
    favourites: set[uuid.UUID]
    interest: dict[str, float]
    topic_exposure: dict[str, int]
    topic_effect: dict[str, float]
    commented: bool = False


def _empty(version: int = 0) -> ReaderSignals:
    return ReaderSignals(version, {}, {}, {}, set(), {}, {}, {})


async def versions(conn: Queryable, member_ids: Sequence[uuid.UUID]) -> tuple[dict[uuid.UUID, int], int]:
    """Each member's signal version (0 without a row), and the last refit of the per-reader effects
    (0 before any): one small statement a batch says which cached readers are still current."""
    rows = await conn.fetch(
        """SELECT m AS member_id, COALESCE(v.version, 0) AS version
           FROM unnest($1::uuid[]) AS m LEFT JOIN member_signal_versions v ON v.member_id = m
           UNION ALL
           SELECT NULL, COALESCE(max(id), 0) FROM reader_effect_fits""",
        list(member_ids),
    )
    found = {r["member_id"]: int(r["version"]) for r in rows if r["member_id"] is not None}
    fit = next(int(r["version"]) for r in rows if r["member_id"] is None)
    return found, fit


async def reader_signals(
    conn: Queryable, member_ids: Sequence[uuid.UUID]
) -> tuple[dict[uuid.UUID, ReaderSignals], int]:
    """The readers' signals and versions read in one statement (one snapshot: a version always names
    the rows read with it), and the last refit of the effects."""
    rows = await conn.fetch(
        """SELECT 0 AS kind, member_id, author_id AS author, NULL::text AS tag, score AS value
           FROM author_affinity WHERE member_id = ANY($1::uuid[])
           UNION ALL SELECT 1, member_id, author_id, NULL, served::float8
           FROM author_exposure WHERE member_id = ANY($1::uuid[])
           UNION ALL SELECT 2, member_id, author_id, NULL, effect
           FROM reader_author_effects WHERE member_id = ANY($1::uuid[])
           UNION ALL SELECT 3, member_id, favourite_id, NULL, 1
           FROM favourites WHERE member_id = ANY($1::uuid[])
           UNION ALL SELECT 4, member_id, NULL, tag, score
           FROM topic_interest WHERE member_id = ANY($1::uuid[])
           UNION ALL SELECT 5, member_id, NULL, tag, served::float8
           FROM topic_exposure WHERE member_id = ANY($1::uuid[])
           UNION ALL SELECT 6, member_id, NULL, tag, effect
           FROM reader_topic_effects WHERE member_id = ANY($1::uuid[])
           UNION ALL SELECT 7, m, NULL, NULL, 1
           FROM unnest($1::uuid[]) AS m WHERE EXISTS (SELECT 1 FROM comments c WHERE c.author_id = m)
           UNION ALL SELECT 8, member_id, NULL, NULL, version::float8
           FROM member_signal_versions WHERE member_id = ANY($1::uuid[])
           UNION ALL SELECT 9, NULL, NULL, NULL, COALESCE(max(id), 0)::float8 FROM reader_effect_fits""",
        list(member_ids),
    )
    found = {m: _empty() for m in member_ids}
    fit = 0
    for kind, member, author, tag, value in rows:
        if kind == 9:
            fit = int(value)
            continue
        s = found[member]
        if kind == 0:
            s.affinity[author] = value
        elif kind == 1:
            s.author_exposure[author] = int(value)
        elif kind == 2:
            s.author_effect[author] = value
        elif kind == 3:
            s.favourites.add(author)
        elif kind == 4:
            s.interest[tag] = value
        elif kind == 5:
            s.topic_exposure[tag] = int(value)
        elif kind == 6:
            s.topic_effect[tag] = value
        elif kind == 7:
            s.commented = True
        else:
            s.version = int(value)
    return found, fit


async def commented(conn: Queryable, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> set[tuple[uuid.UUID, uuid.UUID]]:
    """Which of these (member, post) pairs the member has commented on."""
    members = [m for m, _ in pairs]
    posts = [p for _, p in pairs]
    rows = await conn.fetch(
        """SELECT u.m, u.p FROM unnest($1::uuid[], $2::uuid[]) AS u(m, p)
           WHERE EXISTS (SELECT 1 FROM comments c WHERE c.author_id = u.m AND c.post_id = u.p)""",
        members,
        posts,
    )
    return {(r["m"], r["p"]) for r in rows}


async def fold_exposure(
    conn: Queryable,
    authors: dict[uuid.UUID, dict[uuid.UUID, int]],
    tags: dict[uuid.UUID, dict[str, int]],
) -> dict[uuid.UUID, int]:
    """Adds counts (by member, then author or tag) to the exposure tables and bumps the version of every
    member whose counts grew, in one statement; returns those members' new versions. Rows are written
    in key order, so two API processes folding at once take their row locks in the same order."""
    members = sorted(authors.keys() | tags.keys())
    if not members:
        return {}
    pairs = [(m, a, n) for m, counts in authors.items() for a, n in counts.items()]
    tag_pairs = [(m, t, n) for m, counts in tags.items() for t, n in counts.items()]
    rows = await conn.fetch(
        """WITH authors AS (
               INSERT INTO author_exposure AS e (member_id, author_id, served)
               SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bigint[]) ORDER BY 1, 2
               ON CONFLICT (member_id, author_id) DO UPDATE SET served = e.served + EXCLUDED.served
           ), tags AS (
               INSERT INTO topic_exposure AS e (member_id, tag, served)
               SELECT * FROM unnest($4::uuid[], $5::text[], $6::bigint[]) ORDER BY 1, 2
               ON CONFLICT (member_id, tag) DO UPDATE SET served = e.served + EXCLUDED.served
           )
           INSERT INTO member_signal_versions AS v (member_id, version)
           SELECT m, 1 FROM unnest($7::uuid[]) AS m ORDER BY 1
           ON CONFLICT (member_id) DO UPDATE SET version = v.version + 1
           RETURNING member_id, version""",
        [m for m, _, _ in pairs],
        [a for _, a, _ in pairs],
        [n for _, _, n in pairs],
        [m for m, _, _ in tag_pairs],
        [t for _, t, _ in tag_pairs],
        [n for _, _, n in tag_pairs],
        members,
    )
    return {r["member_id"]: int(r["version"]) for r in rows}


async def describe(conn: Queryable, pages: Sequence[ServedPage]) -> dict[tuple[int, uuid.UUID], PostSeen]:
    """What each page (by its index in `pages`) showed of its posts as of its `served_at`: likes and
    comments made by then (comments of active members, post_stats' rule), whether the reader had
    liked the post by then. A post that does not exist is left out. For pages known only by their
    IDs (tools, tests, the simulation's backdated servings); the API's pages carry what they read."""
    index: list[int] = []
    posts: list[uuid.UUID] = []
    for n, page in enumerate(pages):
        index.extend([n] * len(page.post_ids))
        posts.extend(page.post_ids)
    rows = await conn.fetch(
        """SELECT u.n, p.id, p.author_id, p.created_at,
                  ARRAY(SELECT pt.tag FROM post_tags pt WHERE pt.post_id = p.id ORDER BY pt.tag) AS tags,
                  (SELECT count(*) FROM likes l WHERE l.post_id = p.id AND l.created_at <= u.at) AS likes,
                  (SELECT count(*) FROM comments c JOIN members m ON m.id = c.author_id
                   WHERE c.post_id = p.id AND c.created_at <= u.at AND m.status = 'active') AS comments,
                  EXISTS (SELECT 1 FROM likes l WHERE l.post_id = p.id AND l.member_id = u.member
                                                  AND l.created_at <= u.at) AS liked
           FROM (SELECT s.n, s.post, ($3::uuid[])[s.n + 1] AS member, ($4::timestamptz[])[s.n + 1] AS at
                 FROM unnest($1::int[], $2::uuid[]) AS s(n, post)) u
           JOIN posts p ON p.id = u.post""",
        index,
        posts,
        [p.member_id for p in pages],
        [p.served_at for p in pages],
    )
    return {
        (r["n"], r["id"]): PostSeen(
            r["author_id"], tuple(r["tags"]), r["created_at"], int(r["likes"]), int(r["comments"]), r["liked"]
        )
        for r in rows
    }


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def copy_rows(conn: asyncpg.Connection, rows: LogRows) -> None:
    """One binary COPY a served day, into its partition (made first when it is missing): no routing
    through the parent, no statement to plan, no per-field encoding."""
    for day, part in sorted(rows.days.items()):
        if not part:
            continue
        table = f"feed_log_{day:%Y%m%d}"
        data = b"".join((binary_copy.HEADER, *part, binary_copy.TRAILER))
        try:
            await conn.copy_to_table(table, source=_once(data), columns=COLUMNS, format="binary")
        except asyncpg.UndefinedTableError:
            await ensure_partitions(conn, {day})
            await conn.copy_to_table(table, source=_once(data), columns=COLUMNS, format="binary")


async def ensure_partitions(conn: asyncpg.Connection | asyncpg.Pool, days: Sequence[date] | set[date]) -> None:
    """Makes the partitions of these UTC days; two writers making the same one at once is harmless."""
    for day in sorted(days):
        try:
            await conn.execute("SELECT feed_log_partition($1)", day)
        except asyncpg.DuplicateTableError:
            pass


async def partition_days(conn: asyncpg.Connection | asyncpg.Pool) -> list[date]:
    """The UTC days the log has partitions for, oldest first."""
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'feed_log'::regclass"
    )
    days = [datetime.strptime(m.group(1), "%Y%m%d").date() for r in rows if (m := _PARTITION.match(r["relname"]))]
    return sorted(days)


async def apply_retention(
    conn: asyncpg.Connection | asyncpg.Pool, retention_days: int, *, today: date | None = None, ahead_days: int = 2
) -> list[date]:
    """One retention pass (`feedfabric maintain`): drops the partitions of days older than
    `retention_days` before today (UTC), so today and the `retention_days` before it are kept, and
    makes the partitions of the next `ahead_days` so inserts never wait on one. Returns the days dropped."""
    if retention_days < 1:
        raise ValueError("retention_days must be at least 1")
    today = today or datetime.now(UTC).date()
    oldest_kept = today - timedelta(days=retention_days)
    dropped = []
    for day in await partition_days(conn):
        if day < oldest_kept:
            await conn.execute(f'DROP TABLE IF EXISTS "feed_log_{day:%Y%m%d}"')
            dropped.append(day)
    await ensure_partitions(conn, {today + timedelta(days=n) for n in range(ahead_days + 1)})
    return dropped
