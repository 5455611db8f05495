"""Per-reader effects: for each reader, a small regularised logistic model of engaging with a served
post from who wrote it and what it is about, refitted from the feed log alone with the ranker.

For reader r, a post by author a carrying tags T is engaged with log-odds
`base[r] + author[r, a] + sum(topic[r, t] for t in T)`, each author and topic term with a Gaussian
prior (L2 penalty PENALTY) toward 0, the base nearly free. Fitted jointly, the two separate
"likes this author" from "likes this topic" where an author keeps to one topic: a reader who likes
every running post but one runner's far more gets both, rather than one of them taking all. The
rows are train-ranker's (first servings with a known outcome), counted per reader, author and tag
set, so the fit holds as many cells as the model has terms, not the log's rows.

The stored outputs are the `author_effect` and `topic_effect` ranking signals (db.reader_effects);
a pair the fit never saw, and every pair of a new reader, is 0, except a tag the reader follows:
their **declared interest** is the prior of that topic effect, centred on DECLARED_PRIOR instead of
0, so a new member's followed tags count from their first page, and the prior fades as the reader's
own engagement with the tag's posts (or the lack of it) outweighs it. A new member's effects are also
refitted on their own within the day (`refit_reader`, on each engagement, from the outcomes so far),
where everyone's wait for the nightly refit and its complete 24-hour outcomes.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import astuple, dataclass
from datetime import datetime, timedelta
from typing import TypeVar

import asyncpg
import numpy as np

from feedfabric.db import feed_stats
from feedfabric.db import reader_effects as effects_db

__all__ = ["DECLARED_PRIOR", "Cells", "fit", "on_engagement", "on_follow_tag", "refit", "refit_reader"]

log = logging.getLogger("feedfabric.reader_effects")

PENALTY = 1.0
# The base rate is a reader's own, not a leaning: a prior 100 times as wide leaves it to the data.
BASE_PENALTY = 0.01
MAX_ITERATIONS = 50
TOLERANCE = 1e-4
# The prior mean of a followed tag's effect (log-odds): what a declared interest is worth before the
# reader's own engagement says more. Two of three declared topics being real, about a topic's effect
# on engaging in the simulation (docs/foryou.md, "Declared interests").
DECLARED_PRIOR = 1.0
# A member who joined less than this ago is refitted on their own on each engagement (refit_reader).
NEW_READER = timedelta(days=7)
# A reader's refit reads at most their newest this many servings (bounded work however long their log).
READER_ROWS = 2_000
# Effects nearer 0 than this are not stored (0 is what an absent pair reads as).
STORE_FROM = 1e-4
COPY_TIMEOUT_S = 3600.0
# Stored rows are made from the fitted arrays this many at a time.
RECORDS_AT_ONCE = 50_000
T = TypeVar("T")


@dataclass
class Cells:
    """Served and engaged counts per reader, author and tag set; readers, authors and tags as indexes."""

    reader: np.ndarray
    author: np.ndarray
    tagset: np.ndarray  # index into tagsets
    served: np.ndarray
    engaged: np.ndarray
    tagsets: list[tuple[int, ...]]


@dataclass(frozen=True)
class Effects:
    """Per (reader, author) and (reader, tag) pair seen: the indexes and the fitted effect."""

    author_pairs: np.ndarray  # (n, 2): reader, author
    author_effects: np.ndarray
    topic_pairs: np.ndarray  # (n, 2): reader, tag
    topic_effects: np.ndarray


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _pairs(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (first, second) pairs as an (n, 2) array, and each input's pair index."""
    if not len(first):
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int64)
    base = int(second.max()) + 1
    keys, index = np.unique(first.astype(np.int64) * base + second, return_inverse=True)
    return np.column_stack([keys // base, keys % base]), index.reshape(-1)


def fit(
    cells: Cells,
    penalty: float = PENALTY,
    declared: frozenset[tuple[int, int]] = frozenset(),
    prior: float = DECLARED_PRIOR,
) -> Effects:
    """The penalised maximum-likelihood effects, by block Newton steps (bases, authors, topics in
    turn; within a block each term's step is its own, every cell holding one author). Deterministic:
    a refit of the same cells gives the same effects. `declared`: (reader, tag) index pairs whose topic
    effect's prior is centred on `prior` (a followed tag) rather than 0."""
    n = len(cells.served)
    if n == 0:
        return Effects(np.zeros((0, 2), np.int64), np.zeros(0), np.zeros((0, 2), np.int64), np.zeros(0))
    reader, served, engaged = cells.reader, cells.served.astype(np.float64), cells.engaged.astype(np.float64)
    author_keys, author_of = _pairs(reader, cells.author)
    # One entry per tag of each cell's tag set: entry_cell, entry_tag.
    set_lengths = np.array([len(t) for t in cells.tagsets], dtype=np.int64)
    set_starts = np.cumsum(set_lengths) - set_lengths
    flat = np.array([tag for t in cells.tagsets for tag in t], dtype=np.int64)
    lengths = set_lengths[cells.tagset]
    entry_cell = np.repeat(np.arange(n), lengths)
    within = np.arange(len(entry_cell)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    entry_tag = flat[set_starts[cells.tagset][entry_cell] + within]
    topic_keys, topic_of = _pairs(reader[entry_cell], entry_tag)
    readers = int(reader.max()) + 1
    base = np.zeros(readers)
    author = np.zeros(len(author_keys))
    mean = np.array([prior if (int(r), int(t)) in declared else 0.0 for r, t in topic_keys.tolist()])
    topic = mean.copy()

    # Every cell's log-odds, kept up to date as the terms move (the declared topics start at their prior).
    logit = np.bincount(entry_cell, weights=topic[topic_of], minlength=n) if len(topic) else np.zeros(n)
    # A cell with several tags moves each of them: their steps are damped by the most tags a cell has.
    topic_damping = 1.0 / max(1, int(lengths.max()))

    def step(
        index: np.ndarray,
        terms: np.ndarray,
        prior: float,
        per: np.ndarray | None,
        damping: float,
        centre: np.ndarray | float = 0.0,
    ) -> float:
        p = _sigmoid(logit)
        residual, curvature = engaged - served * p, served * p * (1.0 - p)
        if per is not None:
            residual, curvature = residual[per], curvature[per]
        gradient = np.bincount(index, weights=residual, minlength=len(terms)) - prior * (terms - centre)
        hessian = np.bincount(index, weights=curvature, minlength=len(terms)) + prior
        change = damping * gradient / hessian
        terms += change
        if per is None:
            logit[:] += change[index]
        else:
            logit[:] += np.bincount(per, weights=change[index], minlength=n)
        return float(np.abs(change).max()) if len(terms) else 0.0

    for _ in range(MAX_ITERATIONS):
        moved = step(reader, base, BASE_PENALTY, None, 1.0)
        moved = max(moved, step(author_of, author, penalty, None, 1.0))
        if len(topic):
            moved = max(moved, step(topic_of, topic, penalty, entry_cell, topic_damping, mean))
        if moved < TOLERANCE:
            break
    return Effects(author_keys, author, topic_keys, topic)


class CellReader:
    """A COPY sink for db.feed_stats.copy_effect_cells: turns its text lines into Cells as they come,
    keeping the IDs once each (readers, authors, tag sets) and the counts as compact arrays."""

    def __init__(self) -> None:
        self.pending = b""
        self.members: dict[str, int] = {}
        self.authors: dict[str, int] = {}
        self.tags: dict[str, int] = {}
        self.tagset_index: dict[str, int] = {}
        self.tagsets: list[tuple[int, ...]] = []
        self.columns: list[list[int]] = [[], [], [], [], []]
        self.parts: list[np.ndarray] = []

    async def __call__(self, chunk: bytes) -> None:
        data = self.pending + chunk
        cut = data.rfind(b"\n") + 1
        self.pending = data[cut:]
        for line in data[:cut].decode().splitlines():
            member, author, tags, served, engaged = line.split("\t")
            tagset = self.tagset_index.get(tags)
            if tagset is None:
                tagset = self.tagset_index[tags] = len(self.tagsets)
                self.tagsets.append(
                    tuple(self.tags.setdefault(bytes.fromhex(h).decode(), len(self.tags)) for h in tags.split())
                )
            row = self.columns
            row[0].append(self.members.setdefault(member, len(self.members)))
            row[1].append(self.authors.setdefault(author, len(self.authors)))
            row[2].append(tagset)
            row[3].append(int(served))
            row[4].append(int(engaged))
        if len(self.columns[0]) >= 100_000:
            self._flush()

    def _flush(self) -> None:
        if self.columns[0]:
            # int32: indexes and counts of one reader's cell (a log of billions of rows would need more).
            self.parts.append(np.array(self.columns, dtype=np.int32))
            self.columns = [[], [], [], [], []]

    def cells(self) -> Cells:
        """The cells read (once: the blocks they were read in are let go)."""
        self._flush()
        table = np.hstack(self.parts) if self.parts else np.zeros((5, 0), dtype=np.int32)
        self.parts = []
        return Cells(table[0], table[1], table[2], table[3], table[4], self.tagsets)


@dataclass(frozen=True)
class Refitted:
    rows: int
    authors: int
    topics: int


async def refit(pool: asyncpg.Pool, *, since: datetime | None, until: datetime) -> Refitted:
    """Fits every reader's effects on the log's training rows served in [since, until) and stores
    them in place of the last fit's."""
    cells = CellReader()
    async with pool.acquire() as conn:
        async with conn.transaction(isolation="repeatable_read"):
            await conn.execute("SET LOCAL statement_timeout = 0")
            await feed_stats.stage_training_rows(conn, since, until, COPY_TIMEOUT_S)
            await feed_stats.copy_effect_cells(conn, cells, COPY_TIMEOUT_S)
    return await store(pool, cells, until)


def _records(
    members: list[uuid.UUID], others: Sequence[T], pairs: np.ndarray, effects: np.ndarray
) -> Iterator[tuple[uuid.UUID, T, float]]:
    """(member, author or tag, effect) for each pair, made a slice at a time."""
    for start in range(0, len(pairs), RECORDS_AT_ONCE):
        part = slice(start, start + RECORDS_AT_ONCE)
        for (r, o), e in zip(pairs[part].tolist(), effects[part].tolist(), strict=True):
            yield members[r], others[o], e


async def store(pool: asyncpg.Pool, read: CellReader, until: datetime) -> Refitted:
    """Fits the effects on the cells read, the followed tags as their topics' priors, and stores them in
    place of the last fit's; a followed tag the reader was never served keeps its prior as its effect."""
    cells = read.cells()
    follows = await effects_db.declared_tags(pool)
    declared = frozenset(
        (read.members[str(m)], read.tags[t]) for m, t in follows if str(m) in read.members and t in read.tags
    )
    fitted = fit(cells, declared=declared)
    members = [uuid.UUID(m) for m in read.members]
    authors = [uuid.UUID(a) for a in read.authors]
    tags = list(read.tags)
    seen = {(members[r], tags[t]) for r, t in fitted.topic_pairs.tolist()}
    unseen = [(m, t, DECLARED_PRIOR) for m, t in follows if (m, t) not in seen]
    keep_a = np.abs(fitted.author_effects) >= STORE_FROM
    keep_t = np.abs(fitted.topic_effects) >= STORE_FROM
    rows = int(cells.served.sum())
    del cells
    # Generators over slices: the rows are made as COPY sends them, never held as millions of tuples.
    author_rows = _records(members, authors, fitted.author_pairs[keep_a], fitted.author_effects[keep_a])
    topic_rows = itertools.chain(
        _records(members, tags, fitted.topic_pairs[keep_t], fitted.topic_effects[keep_t]), unseen
    )
    topics = int(keep_t.sum()) + len(unseen)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL statement_timeout = 0")
        await effects_db.replace(
            conn,
            authors=author_rows,
            topics=topic_rows,
            log_until=until,
            rows=rows,
            counts=(int(keep_a.sum()), topics),
            timeout=COPY_TIMEOUT_S,
        )
    refitted = Refitted(rows, int(keep_a.sum()), topics)
    log.info("reader effects refitted on %d rows: %d authors, %d topics", *astuple(refitted))
    return refitted


async def refit_reader(conn: asyncpg.Connection, member_id: uuid.UUID, now: datetime) -> int:
    """Refits one reader's effects from their newest READER_ROWS servings and the outcomes so far,
    their followed tags as priors, and stores them in place of theirs: a new member's effects learn
    within the day instead of waiting for the nightly refit. Call inside a transaction; returns the
    servings fitted on. The cells are one reader's, so the fit is a few milliseconds."""
    found = await effects_db.reader_cells(conn, member_id, now, READER_ROWS)
    follows = await effects_db.declared_tags_of(conn, member_id)
    authors: dict[uuid.UUID, int] = {}
    tags: dict[str, int] = {t: n for n, t in enumerate(follows)}
    tagsets: dict[tuple[int, ...], int] = {}
    columns: list[list[int]] = [[], [], [], []]
    for author, post_tags, served, engaged in found:
        tagset = tuple(tags.setdefault(t, len(tags)) for t in post_tags)
        columns[0].append(authors.setdefault(author, len(authors)))
        columns[1].append(tagsets.setdefault(tagset, len(tagsets)))
        columns[2].append(served)
        columns[3].append(engaged)
    table = np.array(columns, dtype=np.int64).reshape(4, -1)
    cells = Cells(np.zeros(table.shape[1], np.int64), table[0], table[1], table[2], table[3], list(tagsets))
    fitted = fit(cells, declared=frozenset((0, n) for n in range(len(follows))))
    author_of, tag_of = list(authors), list(tags)
    fitted_topics = {tag_of[t]: e for (_, t), e in zip(fitted.topic_pairs.tolist(), fitted.topic_effects.tolist())}
    topic_rows = [(t, fitted_topics.get(t, DECLARED_PRIOR)) for t in follows]
    topic_rows += [(t, e) for t, e in fitted_topics.items() if t not in follows and abs(e) >= STORE_FROM]
    author_rows = [
        (author_of[a], e)
        for (_, a), e in zip(fitted.author_pairs.tolist(), fitted.author_effects.tolist(), strict=True)
        if abs(e) >= STORE_FROM
    ]
    await effects_db.replace_reader(conn, member_id, author_rows, topic_rows)
    return int(table[2].sum())


async def on_engagement(conn: asyncpg.Connection, member_id: uuid.UUID, now: datetime) -> bool:
    """A new member's engagement refits their effects at once (refit_reader); True when it did. Older
    members wait for the nightly refit, whose complete outcomes they have enough of."""
    if not await effects_db.joined_since(conn, member_id, now - NEW_READER):
        return False
    await refit_reader(conn, member_id, now)
    return True


async def on_follow_tag(conn: asyncpg.Connection, member_id: uuid.UUID, tag: str) -> None:
    """A followed tag's declared prior as the reader's topic effect, where they have none yet: it counts
    on their next For You page, not after the next refit."""
    await effects_db.declare(conn, member_id, tag, DECLARED_PRIOR)
