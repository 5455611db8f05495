"""Each served row's ranking signals, computed once in the API process from what the page read and the
reader's signals kept in memory, instead of by correlated subqueries in Postgres for every row.

Per post the page itself read its author, tags, creation time, like and comment counts and whether
the reader had liked it (the page's extras): popularity, age and those facts are exact as of serving.
Per reader, a `SignalBook` keeps what the log needs (db.feed_log.ReaderSignals) by member, checked
against the member's signal version once per batch (migration 350) and reloaded only when it moved;
the exposure counts the log adds are counted here as the rows are made, folded into Postgres on the
writer's schedule aggregated by pair, and the fold's new versions keep the book current without a
reload.

Each formula is the one For You's candidates statement reads (db.exposure, db.reader_effects), so a
learned weight means the same thing in training and in ranking: see docs/foryou.md, "as served".
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, TypeAlias, TypeVar

import asyncpg

from feedfabric.db import feed_log as feed_log_db
from feedfabric.db.feed_log import LogRows, PostSeen, ReaderSignals

__all__ = ["Served", "ServedPost", "SignalBook"]

_K = TypeVar("_K")


class ServedPost(NamedTuple):
    """A logged post of a page: its position on the page, what the page showed of it (db.feed_log.PostSeen's
    fields, flat: one tuple a post on the request path), and For You's candidate source and similarity
    (NULL and 0 on the other feeds)."""

    post_id: uuid.UUID
    position: int
    author_id: uuid.UUID
    tags: tuple[str, ...]
    created_at: datetime
    likes: int
    comments: int
    liked: bool
    reason: str | None = None
    similarity: float = 0.0

    @classmethod
    def of(
        cls, post_id: uuid.UUID, position: int, seen: PostSeen, reason: str | None = None, similarity: float = 0.0
    ) -> ServedPost:
        return cls(post_id, position, *seen, reason, similarity)


# A ServedPost's fields as a plain tuple: what the API makes a post on the request path (a tuple
# literal costs a fraction of a NamedTuple's constructor); a ServedPost is one.
ServedRow: TypeAlias = tuple[
    uuid.UUID, int, uuid.UUID, tuple[str, ...], datetime, int, int, bool, str | None, float
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Served:
    """A served page with what it showed of each logged post (a repost as the post it shares)."""

    member_id: uuid.UUID
    feed: str
    source: str
    served_at: datetime
    posts: tuple[ServedRow, ...]
    preset: str | None = None


@dataclass(frozen=True)
class Batch:
    """A batch's rows (encoded for COPY) and the exposure they add, by (member, author) and (member, tag)."""

    rows: LogRows
    authors: dict[uuid.UUID, dict[uuid.UUID, int]]
    tags: dict[uuid.UUID, dict[str, int]]


def rows(
    page: Served,
    reader: ReaderSignals,
    comment_weight: float,
    out: LogRows,
    commented: set[tuple[uuid.UUID, uuid.UUID]],
) -> tuple[dict[uuid.UUID, int], dict[str, int]]:
    """Adds the page's rows to `out`, each signal as of serving (the reader's exposure counts are those
    from before this page), and returns the exposure the page adds, by author and by tag: a post the
    reader liked (when served) or commented on is not counted, it cannot be engaged with again.
    (Written for speed: one pass a served post, its fields unpacked rather than read by name.)"""
    member = page.member_id
    prefix, into = out.page(member, page.feed, page.source, page.served_at, page.preset)
    add = out.add
    served_at = page.served_at
    affinities, favourites = reader.affinity, reader.favourites
    author_exposure, author_effects = reader.author_exposure, reader.author_effect
    interests, topic_exposure, topic_effects = reader.interest, reader.topic_exposure, reader.topic_effect
    added_authors: dict[uuid.UUID, int] = {}
    added_tags: dict[str, int] = {}
    for post_id, position, author, tags, created_at, likes, comments, liked, reason, similarity in page.posts:
        affinity = affinities.get(author, 0.0)
        interest = interest_rate = topic_effect = 0.0
        if tags:
            # The best interest and the best rate among the post's tags the reader has an interest in;
            # the best effect among its tags, a tag without one counting 0.
            found = False
            topic_effect = topic_effects.get(tags[0], 0.0)
            for tag in tags:
                effect = topic_effects.get(tag, 0.0)
                if effect > topic_effect:
                    topic_effect = effect
                score = interests.get(tag)
                if score is not None:
                    rate = score / (1 + topic_exposure.get(tag, 0))
                    if not found:
                        interest, interest_rate, found = score, rate, True
                    else:
                        interest = max(interest, score)
                        interest_rate = max(interest_rate, rate)
        age = (served_at - created_at).total_seconds()
        add(
            prefix,
            into,
            post_id,
            position,
            affinity,
            interest,
            author in favourites,
            age if age > 0.0 else 0.0,
            similarity,
            likes + comment_weight * comments,
            affinity / (1 + author_exposure.get(author, 0)),
            interest_rate,
            author_effects.get(author, 0.0),
            topic_effect,
            reason,
        )
        if not liked and not (commented and (member, post_id) in commented):
            added_authors[author] = added_authors.get(author, 0) + 1
            for tag in tags:
                added_tags[tag] = added_tags.get(tag, 0) + 1
    return added_authors, added_tags


def _add(counts: dict[_K, int], more: dict[_K, int]) -> None:
    for key, n in more.items():
        counts[key] = counts.get(key, 0) + n


class SignalBook:
    """Readers' signals by member, at most `capacity` of them (least recently served out first), and the
    exposure counted but not yet folded into Postgres. One per API process, used by its one writer."""

    def __init__(self, capacity: int = 5_000) -> None:
        self.capacity = capacity
        self.readers: OrderedDict[uuid.UUID, ReaderSignals] = OrderedDict()
        self.fit = -1  # the effects refit the kept readers were read after
        self.unfolded_authors: dict[uuid.UUID, dict[uuid.UUID, int]] = {}
        self.unfolded_tags: dict[uuid.UUID, dict[str, int]] = {}
        self.unfolded_pairs = 0  # at most this many rows the next fold upserts (its memory, bounded)
        self.loads = 0  # readers read from Postgres (a kept reader is not)

    async def current(self, conn: asyncpg.Connection, members: Sequence[uuid.UUID]) -> dict[uuid.UUID, ReaderSignals]:
        """The members' signals as committed now: kept ones whose version still holds, the rest read
        (with what this process counted and has not folded yet added to their exposure)."""
        versions, fit = await feed_log_db.versions(conn, members)
        if fit != self.fit:  # a refit replaced every reader's effects
            self.readers.clear()
            self.fit = fit
        stale = [m for m in members if (kept := self.readers.get(m)) is None or kept.version != versions[m]]
        if stale:
            # A refit between the two reads is seen by the next batch's version check (fit moved).
            loaded, _ = await feed_log_db.reader_signals(conn, stale)
            self.loads += len(stale)
            for member, reader in loaded.items():
                _add(reader.author_exposure, self.unfolded_authors.get(member, {}))
                _add(reader.topic_exposure, self.unfolded_tags.get(member, {}))
            self.readers.update(loaded)
        for member in members:
            self.readers.move_to_end(member)
        while len(self.readers) > self.capacity:
            self.readers.popitem(last=False)
        return {m: self.readers[m] for m in members}

    async def batch(self, conn: asyncpg.Connection, pages: Sequence[Served], comment_weight: float) -> Batch:
        """The pages' rows in order: each page's rows see the exposure of every page before it (this
        batch's included), not their own. A post the reader liked (when served) or commented on is
        not counted: it cannot be engaged with again."""
        members = list(dict.fromkeys(p.member_id for p in pages))
        readers = await self.current(conn, members)
        asked = [(p.member_id, post[0]) for p in pages if readers[p.member_id].commented for post in p.posts]
        commented = await feed_log_db.commented(conn, asked) if asked else set()
        made = LogRows()
        authors: dict[uuid.UUID, dict[uuid.UUID, int]] = {}
        tags: dict[uuid.UUID, dict[str, int]] = {}
        for page in pages:
            member = page.member_id
            reader = readers[member]
            added_authors, added_tags = rows(page, reader, comment_weight, made, commented)
            _add(reader.author_exposure, added_authors)
            _add(reader.topic_exposure, added_tags)
            _add(authors.setdefault(member, {}), added_authors)
            _add(tags.setdefault(member, {}), added_tags)
        return Batch(made, authors, tags)

    def forget(self, members: Sequence[uuid.UUID]) -> None:
        """Drops these readers (a batch counted into them was not written): read again when next served."""
        for member in members:
            self.readers.pop(member, None)

    def counted(self, batch: Batch) -> None:
        """The batch was written: its exposure waits for the next fold."""
        for member, counts in batch.authors.items():
            if counts:
                _add(self.unfolded_authors.setdefault(member, {}), counts)
                self.unfolded_pairs += len(counts)
        for member, tag_counts in batch.tags.items():
            if tag_counts:
                _add(self.unfolded_tags.setdefault(member, {}), tag_counts)
                self.unfolded_pairs += len(tag_counts)

    async def fold(self, conn: asyncpg.Connection) -> None:
        """Adds the unfolded exposure to Postgres. A kept reader whose version the fold moved by exactly
        its own bump stays current; one that moved more (another process or a like changed it) is
        read again when next served. If the fold fails the counts stay unfolded, to go with the next."""
        if not self.unfolded_authors and not self.unfolded_tags:
            return
        bumped = await feed_log_db.fold_exposure(conn, self.unfolded_authors, self.unfolded_tags)
        self.unfolded_authors.clear()
        self.unfolded_tags.clear()
        self.unfolded_pairs = 0
        for member, version in bumped.items():
            kept = self.readers.get(member)
            if kept is not None:
                if kept.version + 1 == version:
                    kept.version = version
                else:
                    del self.readers[member]
