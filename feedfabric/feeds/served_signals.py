"""Each served row's ranking signals, computed once in the API process from what the page read and the
reader's signals kept in memory, instead of by correlated subqueries in Postgres for every row.

Per post the page itself read its author, tags, creation time, like and comment counts and whether
the reader had liked it (the page's extras): popularity, age and those facts are exact as of serving.
Per reader, a `SignalBook` keeps what the log needs (db.feed_log.ReaderSignals) by member, checked
against the member's signal version once per batch (migration 350) and reloaded only when it moved;
the exposure counts the log adds are counted here as the rows are made, folded into Postgres once
per batch aggregated by pair, and the fold's new versions keep the book current without a reload.

Each formula is the one For You's candidates statement reads (db.exposure, db.reader_effects), so a
learned weight means the same thing in training and in ranking: see docs/foryou.md, "as served".
"""

from __future__ import annotations

import uuid
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import asyncpg

from feedfabric.db import feed_log as feed_log_db
from feedfabric.db.feed_log import LogRow, PostSeen, ReaderSignals


class ServedPost(NamedTuple):
    """A logged post of a page: its position on the page, what the page showed of it, and For You's
    candidate source and similarity (NULL and 0 on the other feeds)."""

    post_id: uuid.UUID
    position: int
    seen: PostSeen
    reason: str | None = None
    similarity: float = 0.0


@dataclass(frozen=True, slots=True)
class Served:
    """A served page with what it showed of each logged post (a repost as the post it shares)."""

    member_id: uuid.UUID
    feed: str
    source: str
    served_at: datetime
    posts: tuple[ServedPost, ...]
    preset: str | None = None


@dataclass(frozen=True)
class Batch:
    """A batch's rows and the exposure they add, by (member, author) and (member, tag)."""

    rows: list[LogRow]
    authors: Counter[tuple[uuid.UUID, uuid.UUID]]
    tags: Counter[tuple[uuid.UUID, str]]


def row(page: Served, post: ServedPost, reader: ReaderSignals, comment_weight: float) -> LogRow:
    """One row's signals as of serving; the reader's exposure counts are those before this page."""
    seen = post.seen
    author = seen.author_id
    affinity = reader.affinity.get(author, 0.0)
    # The best interest and the best rate among the post's tags the reader has an interest in.
    scores: list[float] = []
    rates: list[float] = []
    for tag in seen.tags:
        score = reader.interest.get(tag)
        if score is not None:
            scores.append(score)
            rates.append(score / (1 + reader.topic_exposure.get(tag, 0)))
    # The best effect among the post's tags, a tag without one counting 0; 0 untagged.
    topic_effect = max((reader.topic_effect.get(tag, 0.0) for tag in seen.tags), default=0.0)
    return LogRow(
        page.member_id,
        page.feed,
        post.post_id,
        post.position,
        page.source,
        affinity,
        max(scores, default=0.0),
        author in reader.favourites,
        max((page.served_at - seen.created_at).total_seconds(), 0.0),
        page.served_at,
        page.preset,
        post.reason,
        post.similarity,
        seen.likes + comment_weight * seen.comments,
        affinity / (1 + reader.author_exposure.get(author, 0)),
        max(rates, default=0.0),
        reader.author_effect.get(author, 0.0),
        topic_effect,
    )


class SignalBook:
    """Readers' signals by member, at most `capacity` of them (least recently served out first), and the
    exposure counted but not yet folded into Postgres. One per API process, used by its one writer."""

    def __init__(self, capacity: int = 5_000) -> None:
        self.capacity = capacity
        self.readers: OrderedDict[uuid.UUID, ReaderSignals] = OrderedDict()
        self.fit = -1  # the effects refit the kept readers were read after
        self.unfolded_authors: Counter[tuple[uuid.UUID, uuid.UUID]] = Counter()
        self.unfolded_tags: Counter[tuple[uuid.UUID, str]] = Counter()
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
            for (member, author), count in self.unfolded_authors.items():
                if member in loaded:
                    s = loaded[member]
                    s.author_exposure[author] = s.author_exposure.get(author, 0) + count
            for (member, tag), count in self.unfolded_tags.items():
                if member in loaded:
                    s = loaded[member]
                    s.topic_exposure[tag] = s.topic_exposure.get(tag, 0) + count
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
        asked = [(p.member_id, post.post_id) for p in pages if readers[p.member_id].commented for post in p.posts]
        commented = await feed_log_db.commented(conn, asked) if asked else set()
        rows: list[LogRow] = []
        authors: Counter[tuple[uuid.UUID, uuid.UUID]] = Counter()
        tags: Counter[tuple[uuid.UUID, str]] = Counter()
        for page in pages:
            reader = readers[page.member_id]
            rows.extend(row(page, post, reader, comment_weight) for post in page.posts)
            for post in page.posts:
                if post.seen.liked or (page.member_id, post.post_id) in commented:
                    continue
                author = post.seen.author_id
                reader.author_exposure[author] = reader.author_exposure.get(author, 0) + 1
                authors[page.member_id, author] += 1
                for tag in post.seen.tags:
                    reader.topic_exposure[tag] = reader.topic_exposure.get(tag, 0) + 1
                    tags[page.member_id, tag] += 1
        return Batch(rows, authors, tags)

    def forget(self, members: Sequence[uuid.UUID]) -> None:
        """Drops these readers (a batch counted into them was not written): read again when next served."""
        for member in members:
            self.readers.pop(member, None)

    def counted(self, batch: Batch) -> None:
        """The batch was written: its exposure waits for the next fold."""
        self.unfolded_authors.update(batch.authors)
        self.unfolded_tags.update(batch.tags)

    async def fold(self, conn: asyncpg.Connection) -> None:
        """Adds the unfolded exposure to Postgres. A kept reader whose version the fold moved by exactly
        its own bump stays current; one that moved more (another process or a like changed it) is
        read again when next served. If the fold fails the counts stay unfolded, to go with the next."""
        if not self.unfolded_authors and not self.unfolded_tags:
            return
        bumped = await feed_log_db.fold_exposure(conn, dict(self.unfolded_authors), dict(self.unfolded_tags))
        self.unfolded_authors.clear()
        self.unfolded_tags.clear()
        for member, version in bumped.items():
            kept = self.readers.get(member)
            if kept is not None:
                if kept.version + 1 == version:
                    kept.version = version
                else:
                    del self.readers[member]
