"""train-ranker: a logistic regression (scikit-learn) on the feed log's signals and outcomes.

The latest 20% of the rows by serving time are held out; the model's ROC AUC on them (within each
feed) is compared with the BALANCED preset's on the same rows, and the model becomes LEARNED's only
when it beats it.
Rows served in the last 24 hours are left out: their outcome (engaged within 24 hours) is not known yet.

The feed that served a row is a covariate of the fit but not of the model: the feeds differ in how
often their posts are engaged with for reasons the signals do not carry (what each feed gathers, the
signals only some feeds log), and without it the signals their rows differ in take the credit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from feedfabric.db import feed_stats
from feedfabric.db import foryou as foryou_db
from feedfabric.feeds import ranking

log = logging.getLogger("feedfabric.ranker")

HOLDOUT = 0.2
OUTCOME_WINDOW = timedelta(hours=24)
MIN_ROWS = 100
# The feeds a log row can come from (feed_log.feed); the first is the covariates' reference.
FEEDS = ("following", "favourites", "for_you")


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


@dataclass(frozen=True)
class Fitted:
    weights: np.ndarray  # one per ranking.SIGNALS
    intercept: float
    auc: float
    baseline_auc: float


def fit(served_at: np.ndarray, rows: np.ndarray, engaged: np.ndarray, feeds: np.ndarray) -> Fitted:
    """Fits on the earlier 80% by time, with a covariate per feed but the first; the model is the
    signals' part. Its held-out AUC (signals only, as it ranks; within each feed) and BALANCED's on
    the same rows."""
    order = np.argsort(served_at, kind="stable")
    rows, engaged, feeds = rows[order], engaged[order], feeds[order]
    cut = int(len(rows) * (1 - HOLDOUT))
    train_y, test_x, test_y = engaged[:cut], rows[cut:], engaged[cut:]
    if len(set(train_y.tolist())) < 2 or len(set(test_y.tolist())) < 2:
        raise NotEnoughData("both the training rows and the held-out rows need engaged and unengaged posts")
    covariates = np.column_stack([feeds[:cut] == feed for feed in FEEDS[1:]]).astype(np.float64)
    model = LogisticRegression(max_iter=1000)
    model.fit(np.hstack([rows[:cut], covariates]), train_y)
    weights = model.coef_[0][: rows.shape[1]]
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


async def train(
    pool: asyncpg.Pool, *, since: datetime | None = None, now: datetime | None = None, min_rows: int = MIN_ROWS
) -> Trained:
    until = (now or datetime.now(UTC)) - OUTCOME_WINDOW
    records = await feed_stats.training_rows(pool, since, until)
    if len(records) < min_rows:
        raise NotEnoughData(f"{len(records)} rows with a known outcome; at least {min_rows} are needed")
    columns = list(zip(*records, strict=True))
    served_at = np.array([t.timestamp() for t in columns[0]])
    rows = ranking.features(*(np.array(c, dtype=np.float64) for c in columns[1:9]))
    engaged = np.array(columns[9], dtype=np.int8)
    fitted = fit(served_at, rows, engaged, np.array(columns[10]))
    auc, baseline = fitted.auc, fitted.baseline_auc
    weights = [float(w) for w in fitted.weights]
    active = auc > baseline
    async with pool.acquire() as conn, conn.transaction():
        model_id = await foryou_db.store_model(
            conn,
            training_rows=len(records),
            auc=auc,
            baseline_auc=baseline,
            signals=ranking.SIGNALS,
            weights=weights,
            intercept=fitted.intercept,
            activate=active,
        )
    log.info(
        "ranker %d trained on %d rows: auc %.4f, balanced %.4f, active %s",
        model_id,
        len(records),
        auc,
        baseline,
        active,
    )
    return Trained(model_id, len(records), auc, baseline, active, dict(zip(ranking.SIGNALS, weights, strict=True)))


async def retrain_if_due(
    pool: asyncpg.Pool, *, min_new_rows: int = 10_000, now: datetime | None = None
) -> Trained | None:
    """The worker's daily retraining: when the last model is a day old (or there is none) and at least
    `min_new_rows` rows with a known outcome were served since it was trained."""
    now = now or datetime.now(UTC)
    latest = await foryou_db.models(pool, 1)
    last = latest[0].trained_at if latest else None
    if last is not None and now - last < timedelta(days=1):
        return None
    if await feed_stats.rows_since(pool, last - OUTCOME_WINDOW if last else None, now - OUTCOME_WINDOW) < min_new_rows:
        return None
    try:
        return await train(pool, now=now)
    except NotEnoughData as reason:
        log.info("ranker not retrained: %s", reason)
        return None
