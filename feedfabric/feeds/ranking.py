"""For You's score: the logged signals turned into features, each preset a set of weights over them.

The same `features` serve ranking a page and training the ranker on the feed log, so a learned
model's weights mean what a preset's do. A score is a weighted sum (for LEARNED, the logistic
regression's logit, which orders posts as its probability does).
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "FIXED_PRESETS",
    "MAX_PER_WINDOW",
    "PRESETS",
    "SIGNALS",
    "SOURCES",
    "SPREAD_WINDOW",
    "Weights",
    "features",
    "scores",
    "spread",
]

SIGNALS = (
    "affinity",
    "interest",
    "favourite",
    "recency",
    "similarity",
    "popularity",
    # Engagement per post served from the author / of the tag (db.exposure): affinity and interest are
    # running totals that grow with how often an author or tag is shown, these are not.
    "affinity_rate",
    "interest_rate",
    # The reader's own leaning to the post's author and to its best tag, in log-odds, from the per-reader
    # model refitted with the ranker (feeds.reader_effects); 0 for a reader or author it has not seen.
    "author_effect",
    "topic_effect",
)
PRESETS = ("newest_first", "balanced", "close_circle", "discover", "learned")
# Strongest first: a post several sources brought keeps the first of these as its reason.
SOURCES = ("favourites", "following", "tags", "similar", "popular")
# A post's recency halves about every 17 hours (e-folds in 24).
RECENCY_HOURS = 24.0
# No author holds more than MAX_PER_WINDOW of any SPREAD_WINDOW consecutive positions.
SPREAD_WINDOW = 5
MAX_PER_WINDOW = 2


@dataclass(frozen=True)
class Weights:
    by_signal: dict[str, float]
    intercept: float = 0.0
    # DISCOVER lifts authors the viewer does not follow; not a logged signal, so never learned.
    unfollowed: float = 0.0

    def vector(self) -> np.ndarray:
        return np.array([self.by_signal.get(s, 0.0) for s in SIGNALS], dtype=np.float64)


FIXED_PRESETS: dict[str, Weights] = {
    "newest_first": Weights({"recency": 1.0}),
    "balanced": Weights(
        {"affinity": 1.0, "interest": 1.0, "favourite": 1.0, "recency": 1.0, "similarity": 1.0, "popularity": 0.5}
    ),
    "close_circle": Weights(
        {"affinity": 3.0, "interest": 0.5, "favourite": 3.0, "recency": 1.0, "similarity": 0.25, "popularity": 0.25}
    ),
    "discover": Weights(
        {"affinity": 0.25, "interest": 1.0, "favourite": 0.5, "recency": 1.0, "similarity": 3.0, "popularity": 2.0},
        unfollowed=1.0,
    ),
}


def features(
    affinity: np.ndarray,
    interest: np.ndarray,
    favourite: np.ndarray,
    age_seconds: np.ndarray,
    similarity: np.ndarray,
    popularity: np.ndarray,
    affinity_rate: np.ndarray,
    interest_rate: np.ndarray,
    author_effect: np.ndarray,
    topic_effect: np.ndarray,
) -> np.ndarray:
    """Rows of SIGNALS: counts on a log scale (a tenth like matters less than the first), age as decay;
    the effects are log-odds already."""
    recency = np.exp(-np.maximum(np.asarray(age_seconds, dtype=np.float64), 0.0) / 3600.0 / RECENCY_HOURS)
    return np.column_stack(
        [
            np.log1p(np.maximum(np.asarray(affinity, dtype=np.float64), 0.0)),
            np.log1p(np.maximum(np.asarray(interest, dtype=np.float64), 0.0)),
            np.asarray(favourite, dtype=np.float64),
            recency,
            np.clip(np.asarray(similarity, dtype=np.float64), 0.0, 1.0),
            np.log1p(np.maximum(np.asarray(popularity, dtype=np.float64), 0.0)),
            np.maximum(np.asarray(affinity_rate, dtype=np.float64), 0.0),
            np.maximum(np.asarray(interest_rate, dtype=np.float64), 0.0),
            np.asarray(author_effect, dtype=np.float64),
            np.asarray(topic_effect, dtype=np.float64),
        ]
    )


def scores(weights: Weights, rows: np.ndarray, followed: np.ndarray | None = None) -> np.ndarray:
    out: np.ndarray = rows @ weights.vector() + weights.intercept
    if weights.unfollowed and followed is not None:
        out = out + weights.unfollowed * (1.0 - np.asarray(followed, dtype=np.float64))
    return out


def spread(order: Sequence[int], authors: Sequence[uuid.UUID]) -> list[int]:
    """`order` (indexes, best first) rearranged so no author holds more than MAX_PER_WINDOW of any
    SPREAD_WINDOW consecutive positions: each position takes the best remaining post that fits.
    Posts that fit nowhere (one author's surplus at the end) are left out rather than break the rule."""
    placed: list[int] = []
    recent: deque[uuid.UUID] = deque(maxlen=SPREAD_WINDOW - 1)
    waiting = list(order)
    while waiting:
        for n, index in enumerate(waiting):
            if recent.count(authors[index]) < MAX_PER_WINDOW:
                placed.append(index)
                recent.append(authors[index])
                del waiting[n]
                break
        else:
            break
    return placed
