"""train-ranker: a logistic regression (scikit-learn) on the feed log's signals and outcomes.

The latest 20% of the rows by serving time are held out; the model's ROC AUC on them is compared
with the BALANCED preset's on the same rows, and the model becomes LEARNED's only when it beats it.
Rows served in the last 24 hours are left out: their outcome (engaged within 24 hours) is not known yet.
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


def fit(served_at: np.ndarray, rows: np.ndarray, engaged: np.ndarray) -> tuple[LogisticRegression, float, float]:
    """Fits on the earlier 80% by time; returns the model, its held-out AUC and BALANCED's."""
    order = np.argsort(served_at, kind="stable")
    rows, engaged = rows[order], engaged[order]
    cut = int(len(rows) * (1 - HOLDOUT))
    train_x, train_y, test_x, test_y = rows[:cut], engaged[:cut], rows[cut:], engaged[cut:]
    if len(set(train_y.tolist())) < 2 or len(set(test_y.tolist())) < 2:
        raise NotEnoughData("both the training rows and the held-out rows need engaged and unengaged posts")
    model = LogisticRegression(max_iter=1000)
    model.fit(train_x, train_y)
    auc = float(roc_auc_score(test_y, model.decision_function(test_x)))
    baseline = float(roc_auc_score(test_y, ranking.scores(ranking.FIXED_PRESETS["balanced"], test_x)))
    return model, auc, baseline


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
    model, auc, baseline = fit(served_at, rows, engaged)
    weights = [float(w) for w in model.coef_[0]]
    active = auc > baseline
    async with pool.acquire() as conn, conn.transaction():
        model_id = await foryou_db.store_model(
            conn,
            training_rows=len(records),
            auc=auc,
            baseline_auc=baseline,
            signals=ranking.SIGNALS,
            weights=weights,
            intercept=float(model.intercept_[0]),
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
