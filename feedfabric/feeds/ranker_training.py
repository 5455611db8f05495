"""train-ranker: a logistic regression (scikit-learn) on the feed log's signals and outcomes.

The latest 20% of the rows by serving time are held out; the model's ROC AUC on them (within each
feed) is compared with the BALANCED preset's on the same rows, and the model becomes LEARNED's only
when it beats it.
Rows served in the last 24 hours are left out: their outcome (engaged within 24 hours) is not known yet.

The feed that served a row is a covariate of the fit but not of the model: the feeds differ in how
often their posts are engaged with for reasons the signals do not carry (what each feed gathers, the
signals only some feeds log), and without it the signals their rows differ in take the credit.

The rows are streamed (one binary COPY, parsed block by block) into a uniform sample of at most
SAMPLE_ROWS, so memory is bounded by the model's needs, not the log's length. Each training first
refits the per-reader effects (feeds.reader_effects), two of the signals.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from feedfabric.db import binary_copy, feed_stats
from feedfabric.db import foryou as foryou_db
from feedfabric.db import reader_effects as reader_effects_db
from feedfabric.feeds import ranking, reader_effects

__all__ = ["NotEnoughData", "Reservoir", "Trained", "fit", "refit_effects_if_due", "retrain_if_due", "train"]

log = logging.getLogger("feedfabric.ranker")

HOLDOUT = 0.2
OUTCOME_WINDOW = timedelta(hours=24)
MIN_ROWS = 100
# The feeds a log row can come from (feed_log.feed); the first is the covariates' reference.
FEEDS = feed_stats.FEEDS
# At most this many rows are fitted on (a uniform sample of a longer log): memory stays the model's,
# and 12 weights are as well determined by a million rows as by ten.
SAMPLE_ROWS = 1_000_000
COPY_TIMEOUT_S = 3600.0


class NotEnoughData(Exception):
    """Too few rows, or a part of the split without both outcomes."""


@dataclass(frozen=True)
class Trained:
    model_id: int
    rows: int
    auc: float
    baseline_auc: float
    active: bool
    weights: dict[str, float]
    # Wall seconds of each step: reading the rows, refitting the effects, fitting and storing the model.
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Fitted:
    weights: np.ndarray  # one per ranking.SIGNALS
    intercept: float
    auc: float
    baseline_auc: float


def fit(served_at: np.ndarray, rows: np.ndarray, engaged: np.ndarray, feeds: np.ndarray) -> Fitted:
    """Fits on the earlier 80% by time, with a covariate per feed but one (`feeds`: any labels); the
    model is the signals' part. Its held-out AUC (signals only, as it ranks; within each feed) and
    BALANCED's on the same rows. Rows already oldest first are used in place (no copy)."""
    if len(served_at) > 1 and bool((np.diff(served_at) < 0).any()):
        order = np.argsort(served_at, kind="stable")
        rows, engaged, feeds = rows[order], engaged[order], feeds[order]
    cut = int(len(rows) * (1 - HOLDOUT))
    train_y, test_x, test_y = engaged[:cut], rows[cut:], engaged[cut:]
    if len(np.unique(train_y)) < 2 or len(np.unique(test_y)) < 2:
        raise NotEnoughData("both the training rows and the held-out rows need engaged and unengaged posts")
    # The design matrix in one allocation: the signals scaled to unit spread (lbfgs converges in far
    # fewer steps; the weights are scaled back), then an indicator per feed but the first present.
    signals = rows.shape[1]
    others = np.unique(feeds)[1:]
    design = np.empty((cut, signals + len(others)))
    design[:, :signals] = rows[:cut]
    spread = design[:, :signals].std(axis=0)
    spread[spread == 0] = 1.0
    design[:, :signals] /= spread
    for n, feed in enumerate(others):
        design[:, signals + n] = feeds[:cut] == feed
    model = LogisticRegression(max_iter=1000)
    model.fit(design, train_y)
    del design
    weights = model.coef_[0][:signals] / spread
    test_feeds = feeds[cut:]
    auc = within_feeds_auc(test_y, test_x @ weights, test_feeds)
    baseline = within_feeds_auc(test_y, ranking.scores(ranking.FIXED_PRESETS["balanced"], test_x), test_feeds)
    return Fitted(weights, float(model.intercept_[0]), auc, baseline)


def within_feeds_auc(engaged: np.ndarray, scores: np.ndarray, feeds: np.ndarray) -> float:
    """The ROC AUC within each feed, averaged by rows: a score orders the posts of one feed's page, so
    telling the feeds apart (their rates differ) earns it nothing."""
    total, rows = 0.0, 0
    for feed in np.unique(feeds):
        part = feeds == feed
        if len(set(engaged[part].tolist())) == 2:
            total += float(roc_auc_score(engaged[part], scores[part])) * int(part.sum())
            rows += int(part.sum())
    if not rows:
        raise NotEnoughData("no feed's held-out rows have both engaged and unengaged posts")
    return total / rows


class Reservoir:
    """A uniform sample of at most `capacity` of the rows streamed through it, in one array of at most
    `capacity` rows (Algorithm R, a block at a time: the i-th row seen replaces a random slot with chance
    capacity / i), so training holds `capacity` rows however long the log. A log no longer than
    `capacity` is kept whole. Seeded: the same stream gives the same sample."""

    def __init__(self, capacity: int, columns: int, seed: int = 0) -> None:
        self.capacity = capacity
        self.rng = np.random.default_rng(seed)
        self.table = np.empty((0, columns))
        self.seen = 0

    def add(self, block: np.ndarray) -> None:
        free = min(max(self.capacity - self.seen, 0), len(block))
        if free:
            if self.seen + free > len(self.table):  # grown by doubling, up to capacity
                grown = np.empty((min(self.capacity, max(2 * len(self.table), self.seen + free)), block.shape[1]))
                grown[: self.seen] = self.table[: self.seen]
                self.table = grown
            self.table[self.seen : self.seen + free] = block[:free]
        rest = block[free:]
        if len(rest):
            # Row k of the log (1-based) keeps slot j, drawn from 0..k-1, when j < capacity; of two rows
            # of a block drawing the same slot the later one stays, as if taken one after the other.
            seen = np.arange(self.seen + free + 1, self.seen + len(block) + 1)
            slots = (self.rng.random(len(rest)) * seen).astype(np.int64)
            taken = np.flatnonzero(slots < self.capacity)
            last = len(taken) - 1 - np.unique(slots[taken][::-1], return_index=True)[1]
            self.table[slots[taken][last]] = rest[taken][last]
        self.seen += len(block)

    def rows(self) -> np.ndarray:
        """The sample (a view, unordered)."""
        return self.table[: min(self.seen, self.capacity)]


async def read_rows(
    pool: asyncpg.Pool, since: datetime | None, until: datetime, capacity: int
) -> tuple[np.ndarray, int, reader_effects.CellReader]:
    """The training rows (db.feed_stats.TRAINING_COLUMNS), at most `capacity` of them sampled
    uniformly, unordered; how many there were; and the same rows' cells for the per-reader effects.
    The log is scanned once (staged in a temporary table) and both reads stream by COPY, in a
    transaction of their own with no statement timeout: a log of millions of rows takes longer than a
    request may."""
    sample = Reservoir(capacity, len(feed_stats.TRAINING_COLUMNS))
    sink = binary_copy.Float8Records(len(feed_stats.TRAINING_COLUMNS), sample.add)
    cells = reader_effects.CellReader()
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read"):
        await conn.execute("SET LOCAL statement_timeout = 0")
        await feed_stats.stage_training_rows(conn, since, until, COPY_TIMEOUT_S)
        await feed_stats.copy_effect_cells(conn, cells, COPY_TIMEOUT_S)
        await feed_stats.copy_training_rows(conn, sink, COPY_TIMEOUT_S)
    return sample.rows(), sample.seen, cells


async def train(
    pool: asyncpg.Pool,
    *,
    since: datetime | None = None,
    now: datetime | None = None,
    min_rows: int = MIN_ROWS,
    sample_rows: int = SAMPLE_ROWS,
) -> Trained:
    """Refits the per-reader effects (feeds.reader_effects) and fits the model on the same rows, with
    the effects they were served with (the refit's are for the rows to come)."""
    until = (now or datetime.now(UTC)) - OUTCOME_WINDOW
    started = time.monotonic()
    table, count, cells = await read_rows(pool, since, until, sample_rows)
    read = time.monotonic()
    await reader_effects.store(pool, cells, until)
    del cells  # the cells' arrays go before the model's are made
    refitted = time.monotonic()
    if count < min_rows:
        raise NotEnoughData(f"{count} rows with a known outcome; at least {min_rows} are needed")
    column = {name: n for n, name in enumerate(feed_stats.TRAINING_COLUMNS)}
    # Oldest first (the held-out part is the latest), ties by id so a refit of the same log is the same.
    order = np.lexsort((table[:, column["id"]], table[:, column["served_at"]]))
    signal_columns = (
        "affinity", "interest", "favourite", "age_seconds", "similarity", "popularity",
        "affinity_rate", "interest_rate", "author_effect", "topic_effect",
    )  # fmt: skip
    rows = ranking.features(*(table[order, column[name]] for name in signal_columns))
    served_at = table[order, column["served_at"]]
    engaged = table[order, column["engaged"]].astype(np.int8)
    feeds = table[order, column["feed"]].astype(np.int8)  # an index into FEEDS
    del table, order
    fitted = fit(served_at, rows, engaged, feeds)
    auc, baseline = fitted.auc, fitted.baseline_auc
    weights = [float(w) for w in fitted.weights]
    active = auc > baseline
    async with pool.acquire() as conn, conn.transaction():
        model_id = await foryou_db.store_model(
            conn,
            training_rows=count,
            auc=auc,
            baseline_auc=baseline,
            signals=ranking.SIGNALS,
            weights=weights,
            intercept=fitted.intercept,
            activate=active,
        )
    log.info(
        "ranker %d trained on %d rows (%d sampled): auc %.4f, balanced %.4f, active %s",
        model_id,
        count,
        len(rows),
        auc,
        baseline,
        active,
    )
    seconds = {"read": read - started, "effects": refitted - read, "fit": time.monotonic() - refitted}
    return Trained(model_id, count, auc, baseline, active, dict(zip(ranking.SIGNALS, weights, strict=True)), seconds)


async def retrain_if_due(
    pool: asyncpg.Pool, *, min_new_rows: int = 10_000, now: datetime | None = None
) -> Trained | None:
    """The worker's daily retraining: when the last model is a day old (or there is none) and at least
    `min_new_rows` rows with a known outcome were served since it was trained. The per-reader effects
    are refitted with it, and on their own every day the model is not (so a young log's readers get
    effects, and the model's first training finds them logged)."""
    now = now or datetime.now(UTC)
    latest = await foryou_db.models(pool, 1)
    last = latest[0].trained_at if latest else None
    if last is not None and now - last < timedelta(days=1):
        return None
    if await feed_stats.rows_since(pool, last - OUTCOME_WINDOW if last else None, now - OUTCOME_WINDOW) < min_new_rows:
        await refit_effects_if_due(pool, now=now)
        return None
    try:
        return await train(pool, now=now)
    except NotEnoughData as reason:
        log.info("ranker not retrained: %s", reason)
        return None


async def refit_effects_if_due(pool: asyncpg.Pool, *, now: datetime) -> reader_effects.Refitted | None:
    """Refits the per-reader effects when a day of rows has got its outcome since the last refit read
    the log (or there is none)."""
    until = now - OUTCOME_WINDOW
    last = await reader_effects_db.last_fit(pool)
    if last is not None and until - last < timedelta(days=1):
        return None
    return await reader_effects.refit(pool, since=None, until=until)
