"""Does the ranker learn? Simulated members with hidden tastes read For You and Following for simulated
days, engage only according to those tastes, then `train-ranker` runs, then more days.

The tastes: a few favourite authors, a couple of topics, a liking for popular posts and one for new
posts, each member's own mix. Members never see the tastes' names: they like a served post with a
probability from them alone, and each like feeds the system exactly what a real like does (the likes
row, author affinity and topic interest as the engagement worker adds them). Posts carry a hashtag of
their author's usual topic and a synthetic 384-d vector near that topic's centroid, so the SIMILAR
source and the similarity signal have something to find; a crowd of other members likes posts by
their hidden quality (each like inserted when its time comes), which is what popularity sees.

The run also prints each For You preset's expected rate (the mean hidden probability of what it
served) and that of a tastes-aware ranking of the same candidates: the ceiling a ranker could reach.

Every reading session serves one Following page (followed authors, newest first) and one For You page
whose preset rotates over NEWEST_FIRST, BALANCED and LEARNED, so all three presets are read by the
same population. Pages go through the real ranking (feedfabric.feeds.foryou.rank) and the real feed
log insert, at simulated times; the ranker is the real `feeds.ranker.train`, run once after the first
days and then at the end of every later day, as the worker retrains daily.

    .venv/bin/python bench/foryou_simulation.py [--seed 22] [--readers 60] [--days 5] [--tastes 0.35,0.25,0.30,0.15]
        [--database URL]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np
from feedfabric.core.ids import new_id
from feedfabric.core.settings import Settings
from feedfabric.db import affinity
from feedfabric.db import feed_log as feed_log_db
from feedfabric.db.feed_log import ServedPage
from feedfabric.db.foryou import Profile
from feedfabric.feeds import foryou, ranker, ranking
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.linear_model import LogisticRegression

from bench import _stack

TOPICS = ("running", "cooking", "jazz", "chess", "gardening", "physics", "cinema", "sailing")
PRESETS = ("newest_first", "balanced", "learned")
PAGE = 20
SESSIONS = (9.0, 13.0, 17.0, 21.0)  # hours of the simulated day when every member reads


@dataclass
class Reader:
    id: uuid.UUID
    favourite_authors: set[int]
    topics: set[str]
    likes_popular: float
    likes_new: float
    follows: list[int]
    liked: set[uuid.UUID] = field(default_factory=set)


@dataclass
class SimPost:
    id: uuid.UUID
    author: int
    topic: str
    quality: float
    created_at: datetime


@dataclass(frozen=True)
class TasteMix:
    """How much each hidden taste adds to the chance of engaging: a favourite author, a topic, the
    liking for popular posts (times the post's quality) and for new ones (times a 6-hour decay)."""

    favourite: float = 0.35
    topic: float = 0.25
    popular: float = 0.30
    new: float = 0.15

    def chances(self, tastes: np.ndarray) -> np.ndarray:
        """`tastes`: one row per post, as CandidateSet.tastes."""
        weights = np.array([self.favourite, self.topic, self.popular, self.new])
        return np.minimum(0.01 + tastes @ weights, 0.9)


# Other mixes the sweep (taste_sweep) replays the later days' candidates with: each far from BALANCED's weights.
OTHER_MIXES = (
    TasteMix(popular=0.60),
    TasteMix(favourite=0.25, topic=0.15, popular=0.60),
    TasteMix(topic=0.10, popular=0.60, new=0.05),
    TasteMix(popular=0.90, new=0.05),
    TasteMix(favourite=0.20, topic=0.10, popular=0.90, new=0.05),
    TasteMix(favourite=0.45, topic=0.05, new=0.05),
    TasteMix(favourite=0.50, topic=0.10, popular=0.20, new=0.0),
)


@dataclass(frozen=True)
class CandidateSet:
    """A For You ranking's candidates with their logged signals, their hidden chances and the hidden
    terms the chances come from (`tastes`: favourite author, topic, liking × quality, liking × decay)."""

    phase: str
    candidates: foryou.Signals
    chances: np.ndarray
    tastes: np.ndarray


def taste_terms(reader: Reader, post: SimPost, at: datetime) -> tuple[float, float, float, float]:
    age_h = (at - post.created_at).total_seconds() / 3600
    return (
        float(post.author in reader.favourite_authors),
        float(post.topic in reader.topics),
        reader.likes_popular * post.quality,
        reader.likes_new * math.exp(-age_h / 6),
    )


class Simulation:
    def __init__(
        self, pool: asyncpg.Pool, settings: Settings, seed: int, readers: int, authors: int, tastes: TasteMix
    ) -> None:
        self.pool, self.settings, self.tastes = pool, settings, tastes
        self.rng = random.Random(seed)
        self.nprng = np.random.default_rng(seed)
        self.n_readers, self.n_authors = readers, authors
        self.authors: list[uuid.UUID] = []
        self.author_topic: list[str] = []
        self.readers: list[Reader] = []
        self.crowd: list[uuid.UUID] = []
        self.posts: dict[uuid.UUID, SimPost] = {}
        # The crowd's likes, inserted when their time comes, so popularity is what it was when served.
        self.pending_likes: list[tuple[uuid.UUID, uuid.UUID, datetime]] = []
        centroids = self.nprng.normal(size=(len(TOPICS), 384))
        self.centroids = {t: c / np.linalg.norm(c) for t, c in zip(TOPICS, centroids, strict=True)}
        # feed/preset -> [served, engaged]
        self.counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        # for you preset -> [sum of the best PAGE chances, sum of the served chances, posts served]
        self.expected: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        self.phase = "before"
        # Days simulated so far: the presets rotate by it, not by the calendar, so a run gives the same
        # figures whatever day it runs on.
        self.days_read = 0
        self.candidate_sets: list[CandidateSet] = []

    async def _member(self, name: str) -> uuid.UUID:
        member_id = new_id()
        await self.pool.execute(
            "INSERT INTO members (id, external_id, username, display_name) VALUES ($1, $2, $2, $2)", member_id, name
        )
        return member_id

    async def populate(self) -> None:
        for n in range(self.n_authors):
            self.authors.append(await self._member(f"author{n}"))
            self.author_topic.append(TOPICS[n % len(TOPICS)])
        self.crowd = [await self._member(f"crowd{n}") for n in range(25)]
        for n in range(self.n_readers):
            favs = set(self.rng.sample(range(self.n_authors), 3))
            others = [a for a in range(self.n_authors) if a not in favs]
            follows = sorted(set(self.rng.sample(sorted(favs), 2)) | set(self.rng.sample(others, 10)))
            reader = Reader(
                id=await self._member(f"reader{n}"),
                favourite_authors=favs,
                topics=set(self.rng.sample(TOPICS, 2)),
                likes_popular=self.rng.random(),
                likes_new=self.rng.random(),
                follows=follows,
            )
            self.readers.append(reader)
            await self.pool.executemany(
                "INSERT INTO follows (follower_id, target_type, target_id) VALUES ($1, 'member', $2)",
                [(reader.id, str(self.authors[a])) for a in follows],
            )
            # One favourite author is also marked a favourite in the app, as members do.
            await self.pool.execute(
                "INSERT INTO favourites (member_id, favourite_id) VALUES ($1, $2)",
                reader.id,
                self.authors[min(favs)],
            )

    async def publish(self, start: datetime, hours: float) -> None:
        """Each author posts about 3 times a day; the crowd likes posts by their hidden quality."""
        rows, tags, vectors, likes = [], [], [], []
        for a, author in enumerate(self.authors):
            for _ in range(self.nprng.poisson(3 * hours / 24)):
                at = start + timedelta(hours=self.rng.uniform(0, hours))
                topic = self.author_topic[a] if self.rng.random() < 0.8 else self.rng.choice(TOPICS)
                post = SimPost(new_id(), a, topic, self.rng.betavariate(1.2, 3.0), at)
                self.posts[post.id] = post
                rows.append((post.id, author, f"about {topic} #{topic}", at))
                tags.append((post.id, topic))
                v = self.centroids[topic] + 0.8 * self.nprng.normal(size=384) / math.sqrt(384)
                vectors.append((post.id, (v / np.linalg.norm(v)).astype("<f4").tobytes()))
                for member in self.crowd:
                    if self.rng.random() < 0.6 * post.quality:
                        likes.append((post.id, member, at + timedelta(minutes=self.rng.uniform(5, 120))))
        await self.pool.executemany(
            "INSERT INTO posts (id, author_id, content, created_at) VALUES ($1, $2, $3, $4)", rows
        )
        await self.pool.executemany("INSERT INTO post_tags (post_id, tag, source) VALUES ($1, $2, 'hashtag')", tags)
        await self.pool.executemany("INSERT INTO post_embeddings (post_id, vector) VALUES ($1, $2)", vectors)
        self.pending_likes += likes
        await self.likes_until(start + timedelta(hours=hours))

    async def likes_until(self, at: datetime) -> None:
        due = [like for like in self.pending_likes if like[2] <= at]
        self.pending_likes = [like for like in self.pending_likes if like[2] > at]
        await self.pool.executemany("INSERT INTO likes (post_id, member_id, created_at) VALUES ($1, $2, $3)", due)

    async def following_page(self, reader: Reader, at: datetime) -> list[uuid.UUID]:
        rows = await self.pool.fetch(
            """SELECT p.id FROM follows f JOIN posts p ON p.author_id = f.target_id::uuid
               WHERE f.follower_id = $1 AND f.target_type = 'member' AND p.created_at <= $2
                 AND p.created_at > $2 - interval '48 hours'
               ORDER BY p.created_at DESC LIMIT $3""",
            reader.id,
            at,
            PAGE,
        )
        return [r["id"] for r in rows]

    async def read(self, reader: Reader, at: datetime, preset: str, measuring: bool) -> None:
        following = await self.following_page(reader, at)
        weights, _ = await foryou._weights(self.pool, preset, None)
        profile = Profile(preset, ranking.SOURCES, 48)
        candidates = await foryou.signals(self.pool, self.settings, reader.id, profile, at)
        ranked = foryou.order(candidates, weights) if candidates is not None else []
        served = ranked[:PAGE]
        if measuring and candidates is not None:
            tastes = np.array([taste_terms(reader, self.posts[c.post_id], at) for c in candidates.found])
            self.candidate_sets.append(CandidateSet(self.phase, candidates, self.tastes.chances(tastes), tastes))
        if measuring and ranked:
            # The ceiling: what a ranker that knew the hidden tastes would serve from the same candidates.
            chances = sorted((self.chance(reader, self.posts[r.post_id], at) for r in ranked), reverse=True)
            self.expected[f"for_you/{preset}"][0] += sum(chances[:PAGE])
            self.expected[f"for_you/{preset}"][1] += sum(self.chance(reader, self.posts[r.post_id], at) for r in served)
            self.expected[f"for_you/{preset}"][2] += len(served)
        pages = [ServedPage(reader.id, "following", tuple(following), "postgres", at)]
        if served:
            pages.append(
                ServedPage(
                    reader.id,
                    "for_you",
                    tuple(r.post_id for r in served),
                    "redis",
                    at + timedelta(seconds=1),
                    preset,
                    tuple(r.source for r in served),
                    tuple(r.similarity for r in served),
                )
            )
        await feed_log_db.insert(self.pool, pages, comment_weight=self.settings.comment_weight)
        for feed, ids in (("following", following), (f"for_you/{preset}", [r.post_id for r in served])):
            for position, post_id in enumerate(ids):
                post = self.posts[post_id]
                engaged = post_id not in reader.liked and self.rng.random() < self.chance(reader, post, at)
                if measuring:
                    self.counts[feed][0] += 1
                    self.counts[feed][1] += engaged
                if engaged:
                    await self.like(reader, post, at + timedelta(minutes=2 + position))

    def chance(self, reader: Reader, post: SimPost, at: datetime) -> float:
        """The hidden taste: the only thing that decides whether a member engages."""
        return float(self.tastes.chances(np.array(taste_terms(reader, post, at))))

    async def like(self, reader: Reader, post: SimPost, at: datetime) -> None:
        reader.liked.add(post.id)
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO likes (post_id, member_id, created_at) VALUES ($1, $2, $3)", post.id, reader.id, at
            )
            # What worker-engagement adds for a like (feeds.engagement).
            await affinity.add_affinity(conn, reader.id, self.authors[post.author], self.settings.like_weight)
            await affinity.add_interest(conn, reader.id, [post.topic], self.settings.like_weight)

    async def days(self, start: datetime, count: int, measuring: bool, retrain: bool = False) -> datetime:
        """`retrain`: train again at the end of each day, as the worker does once a model exists."""
        day = start
        for _ in range(count):
            previous = 0.0
            for session_number, hour in enumerate(SESSIONS):
                await self.publish(day + timedelta(hours=previous), hour - previous)
                previous = hour
                at = day + timedelta(hours=hour)
                for n, reader in enumerate(self.readers):
                    preset = PRESETS[(n + session_number + self.days_read) % len(PRESETS)]
                    await self.read(reader, at, preset, measuring)
            await self.publish(day + timedelta(hours=previous), 24 - previous)
            day += timedelta(days=1)
            self.days_read += 1
            if retrain:
                trained = await ranker.train(self.pool, now=day)
                print(
                    f"  retrained at the end of the day: AUC {trained.auc:.4f} vs BALANCED {trained.baseline_auc:.4f}"
                )
        return day

    def report(self, title: str) -> dict[str, float]:
        print(f"\n{title}")
        print(f"  {'feed / preset':<24}{'served':>8}{'engaged':>9}{'rate':>8}")
        rates = {}
        for name in ("following", *(f"for_you/{p}" for p in PRESETS)):
            served, engaged = self.counts.get(name, [0, 0])
            rates[name] = engaged / served if served else 0.0
            print(f"  {name:<24}{served:>8}{engaged:>9}{rates[name]:>8.3f}")
        for name, (best, chance, served) in sorted(self.expected.items()):
            print(f"  {name}: expected rate {chance / served:.3f}, a tastes-aware ranking's {best / served:.3f}")
        self.counts.clear()
        self.expected.clear()
        return rates


def expected_rate(sets: list[CandidateSet], score: Callable[[CandidateSet], np.ndarray]) -> float:
    """The mean hidden chance of the first PAGE posts of each set ordered by `score`, the author-spread
    rule applied as For You applies it."""
    chances, served = 0.0, 0
    for s in sets:
        best_first = np.lexsort((-s.candidates.created, -score(s))).tolist()
        placed = ranking.spread(best_first, [c.author_id for c in s.candidates.found])[:PAGE]
        chances += float(s.chances[placed].sum())
        served += len(placed)
    return chances / served


def by_phase(sets: list[CandidateSet]) -> tuple[list[CandidateSet], list[CandidateSet]]:
    """The first days' sets (to fit on) and the later days' (to order)."""
    return [s for s in sets if s.phase == "before"], [s for s in sets if s.phase == "after"]


def preset_rate(sets: list[CandidateSet], preset: str) -> float:
    return expected_rate(sets, lambda s: ranking.scores(ranking.FIXED_PRESETS[preset], s.candidates.rows))


def signals_bound(sets: list[CandidateSet]) -> None:
    """How far a ranker could go on the logged signals alone: a gradient-boosted model fitted to the
    hidden chances themselves (no learner from outcomes does better) on the first days' candidates,
    ordering the later days' candidates; against BALANCED and a tastes-aware ranking on the same sets."""
    before, after = by_phase(sets)
    model = HistGradientBoostingRegressor(random_state=0).fit(
        np.vstack([s.candidates.rows for s in before]), np.concatenate([s.chances for s in before])
    )
    balanced = preset_rate(after, "balanced")
    best = expected_rate(after, lambda s: model.predict(s.candidates.rows))
    ceiling = expected_rate(after, lambda s: s.chances)
    print(
        f"\nOn the later days' candidates: BALANCED {balanced:.3f}; the best on the logged signals {best:.3f}"
        f" ({best / balanced:.2f}x BALANCED); tastes-aware {ceiling:.3f} ({ceiling / balanced:.2f}x)"
    )


def known_tastes_bound(sets: list[CandidateSet], seed: int) -> None:
    """How far better signals could take a logistic regression: one fitted, as the sweep's are, on every
    candidate of the first days, given besides the logged signals each reader's hidden favourite authors
    (then their topics too) as if the product knew them exactly."""
    rng = np.random.default_rng(seed)
    before, after = by_phase(sets)
    balanced = preset_rate(after, "balanced")
    chances = np.concatenate([s.chances for s in before])
    outcomes = rng.random(len(chances)) < chances
    print("\nA logistic regression on every candidate of the first days, told hidden tastes as more signals:")
    for known, name in ((1, "favourite authors"), (2, "favourite authors and topics")):

        def with_tastes(s: CandidateSet, known: int = known) -> np.ndarray:
            return np.hstack([s.candidates.rows, s.tastes[:, :known]])

        model = LogisticRegression(max_iter=3000).fit(np.vstack([with_tastes(s) for s in before]), outcomes)
        learned = expected_rate(after, lambda s, model=model: model.decision_function(with_tastes(s)))
        print(f"  knowing the {name}: {learned / balanced:.3f}x BALANCED")


def taste_sweep(sets: list[CandidateSet], tastes: TasteMix, seed: int) -> None:
    """Is the gap to 1.2x this population's, or the learner's? For other taste mixes, replayed on the
    same candidates: BALANCED, NEWEST_FIRST, the tastes-aware ranking, and a logistic regression (what
    train-ranker fits) on the signals of every candidate of the first days (not only those served, so
    no selection bias), with outcomes drawn from that mix's chances; each ordering the later days'."""
    rng = np.random.default_rng(seed)
    print("\nOther taste mixes on the same candidates (x BALANCED; favourite, topic, popular, new):")
    print(f"  {'mix':<32}{'NEWEST':>8}{'logistic':>10}{'tastes-aware':>14}")
    for mix in (tastes, *(m for m in OTHER_MIXES if m != tastes)):
        replayed = [CandidateSet(s.phase, s.candidates, mix.chances(s.tastes), s.tastes) for s in sets]
        early, late = by_phase(replayed)
        chances = np.concatenate([s.chances for s in early])
        model = LogisticRegression(max_iter=1000).fit(
            np.vstack([s.candidates.rows for s in early]), rng.random(len(chances)) < chances
        )
        balanced = preset_rate(late, "balanced")
        newest = preset_rate(late, "newest_first")
        learned = expected_rate(late, lambda s, model=model: model.decision_function(s.candidates.rows))
        ceiling = expected_rate(late, lambda s: s.chances)
        name = f"{mix.favourite:.2f} {mix.topic:.2f} {mix.popular:.2f} {mix.new:.2f}" + (
            " (this run)" if mix is tastes else ""
        )
        print(f"  {name:<32}{newest / balanced:>8.2f}{learned / balanced:>10.2f}{ceiling / balanced:>14.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--readers", type=int, default=60)
    parser.add_argument("--authors", type=int, default=40)
    parser.add_argument("--days", type=int, default=5, help="simulated days before training, and again after")
    parser.add_argument(
        "--tastes",
        type=lambda text: TasteMix(*(float(x) for x in text.split(","))),
        default=TasteMix(),
        help="what a favourite author, a topic, the liking for popular and for new posts add: 0.35,0.25,0.30,0.15",
    )
    parser.add_argument("--database", help="a Postgres server URL (a fresh database is made beside it)")
    args = parser.parse_args()
    with _stack.services() as env:
        url = _stack.fresh_database(args.database or _stack.env_or(env, "DATABASE_URL"))
        asyncio.run(simulate(args, url))


async def simulate(args: argparse.Namespace, url: str) -> None:
    pool = await asyncpg.create_pool(url, min_size=1, max_size=4)
    settings = Settings(database_url=url)
    try:
        sim = Simulation(pool, settings, args.seed, args.readers, args.authors, args.tastes)
        await sim.populate()
        start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2 * args.days + 3)
        await feed_log_db.ensure_partitions(
            pool, {(start + timedelta(days=d)).date() for d in range(2 * args.days + 4)}
        )
        await sim.publish(start - timedelta(days=1), 24)
        end = await sim.days(start, args.days, measuring=True)
        before = sim.report(f"Before training ({args.days} days; LEARNED has no model, so ranks as BALANCED)")
        trained = await ranker.train(pool, now=end + timedelta(days=1))
        print(
            f"\ntrain-ranker: {trained.rows} rows, AUC {trained.auc:.4f} vs BALANCED {trained.baseline_auc:.4f},"
            f" {'active' if trained.active else 'NOT active'}"
        )
        print("  weights: " + ", ".join(f"{k} {v:+.3f}" for k, v in trained.weights.items()))
        sim.phase = "after"
        await sim.days(end, args.days, measuring=True, retrain=True)
        after = sim.report(f"After training ({args.days} more days)")
        learned, balanced, newest = (
            after["for_you/learned"],
            after["for_you/balanced"],
            after["for_you/newest_first"],
        )
        print(
            f"\nLEARNED / BALANCED = {learned / balanced:.2f} (target >= 1.2);"
            f" LEARNED / NEWEST_FIRST = {learned / newest:.2f} (target >= 1.5)"
        )
        print(
            f"  before training: BALANCED {before['for_you/balanced']:.3f}, NEWEST_FIRST {before['for_you/newest_first']:.3f}"
        )
        signals_bound(sim.candidate_sets)
        known_tastes_bound(sim.candidate_sets, args.seed)
        taste_sweep(sim.candidate_sets, sim.tastes, args.seed)
    finally:
        await pool.close()


if __name__ == "__main__":
    main()
