"""Does the ranker learn? Simulated members with hidden tastes read For You and Following for simulated
days, engage only according to those tastes, then `train-ranker` runs, then more days.

The tastes: a few favourite authors, a couple of topics, a liking for popular posts and one for new
posts, each member's own mix. Members never see the tastes' names: they like a served post with a
probability from them alone, and each like feeds the system exactly what a real like does (the likes
row, author affinity and topic interest as the engagement worker adds them). Posts carry a hashtag of
their author's usual topic and a synthetic 384-d vector near that topic's centroid, so the SIMILAR
source and the similarity signal have something to find; a crowd of other members likes posts by
their hidden quality (each like inserted when its time comes), which is what popularity sees.

Every reading session serves one Following page (followed authors, newest first) and, after the
reader's likes on it, one For You page whose preset is drawn at random (its own seeded stream) from
NEWEST_FIRST, BALANCED and LEARNED, so all three are read by the same population and none always
follows another. Pages go through the real ranking (feedfabric.feeds.foryou.signals and order) and
the real feed log insert, at simulated times; the ranker is the real `feeds.ranker.train`, run once
after the first days on the rows whose outcome is complete, then at the end of every later day, as
the worker retrains daily (before the first training the worker's nightly refit of the per-reader
effects runs alone). Newcomers (no follows, no favourite, no likes) join with the first model.

Besides the realised rates, the run prints the paired replay: every fixed preset's and LEARNED's
ranking (the model active then) of the same later-day candidates of the same readers, scored by the
readers' hidden chances, with the bound the logged signals allow (a gradient-boosted model fitted to
the hidden chances themselves, cross-fitted by reader) and the oracle (the best page by the chances).

    .venv/bin/python bench/foryou_simulation.py [--seed 22] [--readers 60] [--newcomers 10] [--days 5]
        [--tastes 0.35,0.25,0.30,0.15] [--database URL] [--save FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import pickle
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
from feedfabric.db import affinity, feed_stats
from feedfabric.db import feed_log as feed_log_db
from feedfabric.db import foryou as foryou_db
from feedfabric.db.feed_log import ServedPage
from feedfabric.db.foryou import Profile
from feedfabric.feeds import feed_log as feed_log_svc
from feedfabric.feeds import foryou, ranker, ranking
from sklearn.ensemble import HistGradientBoostingRegressor

from bench import _stack

TOPICS = ("running", "cooking", "jazz", "chess", "gardening", "physics", "cinema", "sailing")
PRESETS = ("newest_first", "balanced", "learned")
PAGE = 20
SESSIONS = (9.0, 13.0, 17.0, 21.0)  # hours of the simulated day when every member reads
# For You is read after the session's Following page and its likes.
FOR_YOU_AFTER = timedelta(minutes=30)
NEWCOMER_ENGAGEMENTS = 20


@dataclass
class Reader:
    id: uuid.UUID
    favourite_authors: set[int]
    topics: set[str]
    likes_popular: float
    likes_new: float
    follows: list[int]
    liked: set[uuid.UUID] = field(default_factory=set)
    # Joined when the first model was trained: no follows, no favourite, no likes.
    newcomer: bool = False


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


@dataclass(frozen=True)
class CandidateSet:
    """A For You ranking's candidates with their logged signals, their hidden chances and the hidden
    terms the chances come from (`tastes`: favourite author, topic, liking × quality, liking × decay)."""

    phase: str
    candidates: foryou.Signals
    chances: np.ndarray
    tastes: np.ndarray
    reader: int = 0  # index into Simulation.readers
    learned: ranking.Weights | None = None  # LEARNED's weights when it was ranked
    engagements: int = 0  # how many posts the reader had engaged with by then


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
        self.candidate_sets: list[CandidateSet] = []
        # Which preset each reader reads in each session: its own seeded stream, so drawing it moves
        # nothing else.
        self.assign = random.Random(seed + 1)
        self.learned: ranking.Weights | None = None
        self.first_pages: dict[uuid.UUID, list[str]] = {}

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
        """A session: the Following page and its engagement first, then For You ranked after it (so its
        candidates leave out what the reader just liked there, as they would in the product)."""
        if reader.follows:
            following = await self.following_page(reader, at)
            await feed_log_svc.log_pages(
                self.pool,
                [ServedPage(reader.id, "following", tuple(following), "postgres", at)],
                comment_weight=self.settings.comment_weight,
            )
            await self.engage(reader, "following", following, at, measuring)
        at = at + FOR_YOU_AFTER
        await self.likes_until(at)
        weights, _ = await foryou._weights(self.pool, preset, None)
        profile = Profile(preset, ranking.SOURCES, 48)
        candidates = await foryou.signals(self.pool, self.settings, reader.id, profile, at)
        ranked = foryou.order(candidates, weights) if candidates is not None else []
        served = ranked[:PAGE]
        if reader.newcomer and reader.id not in self.first_pages:
            self.first_pages[reader.id] = [r.source for r in served]
        if measuring and candidates is not None:
            tastes = np.array([taste_terms(reader, self.posts[c.post_id], at) for c in candidates.found])
            # Kept without the candidates' vectors (1.5 kB each): the replay needs only the signals.
            kept = dataclasses.replace(candidates, found=[c._replace(vector=None) for c in candidates.found])
            self.candidate_sets.append(
                CandidateSet(
                    self.phase,
                    kept,
                    self.tastes.chances(tastes),
                    tastes,
                    self.readers.index(reader),
                    self.learned,
                    len(reader.liked),
                )
            )
        if measuring and ranked and not reader.newcomer:
            # The ceiling: what a ranker that knew the hidden tastes would serve from the same candidates.
            chances = sorted((self.chance(reader, self.posts[r.post_id], at) for r in ranked), reverse=True)
            self.expected[f"for_you/{preset}"][0] += sum(chances[:PAGE])
            self.expected[f"for_you/{preset}"][1] += sum(self.chance(reader, self.posts[r.post_id], at) for r in served)
            self.expected[f"for_you/{preset}"][2] += len(served)
        if served:
            page = ServedPage(
                reader.id,
                "for_you",
                tuple(r.post_id for r in served),
                "redis",
                at,
                preset,
                tuple(r.source for r in served),
                tuple(r.similarity for r in served),
            )
            await feed_log_svc.log_pages(self.pool, [page], comment_weight=self.settings.comment_weight)
        await self.engage(reader, f"for_you/{preset}", [r.post_id for r in served], at, measuring)

    async def engage(self, reader: Reader, feed: str, ids: list[uuid.UUID], at: datetime, measuring: bool) -> None:
        for position, post_id in enumerate(ids):
            post = self.posts[post_id]
            engaged = post_id not in reader.liked and self.rng.random() < self.chance(reader, post, at)
            if measuring and not reader.newcomer:
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
        """`retrain`: train again at the end of each day, as the worker does once a model exists;
        before that, the worker refits the per-reader effects nightly."""
        day = start
        for _ in range(count):
            previous = 0.0
            for hour in SESSIONS:
                await self.publish(day + timedelta(hours=previous), hour - previous)
                previous = hour
                at = day + timedelta(hours=hour)
                for reader in self.readers:
                    # Which preset a reader reads is drawn afresh every session, so no preset always
                    # follows another that took the best posts first.
                    await self.read(reader, at, self.assign.choice(PRESETS), measuring)
            await self.publish(day + timedelta(hours=previous), 24 - previous)
            day += timedelta(days=1)
            if retrain:
                trained = await ranker.train(self.pool, now=day)
                await self.load_learned()
                print(
                    f"  retrained at the end of the day: AUC {trained.auc:.4f} vs BALANCED {trained.baseline_auc:.4f}"
                )
            else:
                await ranker.refit_effects_if_due(self.pool, now=day)
        return day

    async def load_learned(self) -> None:
        weights, model_id = await foryou._weights(self.pool, "learned", None)
        self.learned = weights if model_id else None

    async def add_newcomers(self, count: int) -> None:
        """Readers who join now: no follows, no favourite, no likes; hidden tastes like everyone's."""
        for n in range(count):
            self.readers.append(
                Reader(
                    id=await self._member(f"newcomer{n}"),
                    favourite_authors=set(self.rng.sample(range(self.n_authors), 3)),
                    topics=set(self.rng.sample(TOPICS, 2)),
                    likes_popular=self.rng.random(),
                    likes_new=self.rng.random(),
                    follows=[],
                    newcomer=True,
                )
            )

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


def first_page(order: list[int], authors: list[uuid.UUID]) -> list[int]:
    """The first PAGE positions ranking.spread would fill: each position takes the best remaining post
    whose author holds fewer than MAX_PER_WINDOW of the positions before it in the window, so stopping
    at PAGE changes none of them (the replay orders thousands of candidate sets)."""
    placed: list[int] = []
    waiting = list(order)
    while waiting and len(placed) < PAGE:
        recent = [authors[i] for i in placed[-(ranking.SPREAD_WINDOW - 1) :]]
        for n, index in enumerate(waiting):
            if recent.count(authors[index]) < ranking.MAX_PER_WINDOW:
                placed.append(index)
                del waiting[n]
                break
        else:
            break
    return placed


def expected_rate(sets: list[CandidateSet], score: Callable[[CandidateSet], np.ndarray]) -> float:
    """The mean hidden chance of the first PAGE posts of each set ordered by `score`, the author-spread
    rule applied as For You applies it."""
    chances, served = 0.0, 0
    for s in sets:
        best_first = np.lexsort((-s.candidates.created, -score(s))).tolist()
        placed = first_page(best_first, [c.author_id for c in s.candidates.found])
        chances += float(s.chances[placed].sum())
        served += len(placed)
    return chances / served if served else 0.0


def by_weights(weights: ranking.Weights) -> Callable[[CandidateSet], np.ndarray]:
    return lambda s: ranking.scores(weights, s.candidates.rows, s.candidates.followed)


def learned(s: CandidateSet) -> np.ndarray:
    """LEARNED as it ranked that set: the model active then (BALANCED before the first)."""
    return ranking.scores(s.learned or ranking.FIXED_PRESETS["balanced"], s.candidates.rows, s.candidates.followed)


def bound_scores(sets: list[CandidateSet]) -> dict[int, np.ndarray]:
    """The bound the logged signals allow: a gradient-boosted model fitted to the hidden chances
    themselves (no learner from outcomes has better information), cross-fitted by reader in two
    halves, each half's sets scored by the model of the other's. Keyed by id(set)."""
    scored: dict[int, np.ndarray] = {}
    for half in (0, 1):
        fit_on = [s for s in sets if s.reader % 2 != half]
        model = HistGradientBoostingRegressor(random_state=0).fit(
            np.vstack([s.candidates.rows for s in fit_on]), np.concatenate([s.chances for s in fit_on])
        )
        for s in sets:
            if s.reader % 2 == half:
                scored[id(s)] = model.predict(s.candidates.rows)
    return scored


def paired_replay(sets: list[CandidateSet], title: str, bound: dict[int, np.ndarray]) -> dict[str, float]:
    """Every preset's and LEARNED's ranking of the same candidates of the same readers, scored by the
    readers' hidden chances; beside them the bound on the logged signals and the oracle (the best
    PAGE by the chances themselves). Prints each as x BALANCED, x NEWEST_FIRST and how far it goes
    from BALANCED toward the oracle."""
    rankings: dict[str, Callable[[CandidateSet], np.ndarray]] = {
        name: by_weights(weights) for name, weights in ranking.FIXED_PRESETS.items()
    }
    rankings["learned"] = learned
    rankings["bound (logged signals)"] = lambda s: bound[id(s)]
    rankings["oracle"] = lambda s: s.chances
    rates = {name: expected_rate(sets, score) for name, score in rankings.items()}
    balanced, newest, oracle = rates["balanced"], rates["newest_first"], rates["oracle"]
    print(f"\n{title}: {len(sets)} rankings")
    print(f"  {'ranking':<24}{'rate':>8}{'x BALANCED':>12}{'x NEWEST':>10}{'toward oracle':>15}")
    for name, rate in rates.items():
        toward = (rate - balanced) / (oracle - balanced) if oracle > balanced else 0.0
        print(f"  {name:<24}{rate:>8.4f}{rate / balanced:>12.3f}{rate / newest:>10.2f}{toward:>14.0%}")
    return rates


def newcomers_report(sim: Simulation, sets: list[CandidateSet], bound: dict[int, np.ndarray]) -> None:
    """The readers who joined with the first model: their first page, and LEARNED against BALANCED on
    their rankings from their 20th engagement on, together and for each of them, with the bound and
    the oracle for that reader beside it (a reader for whom even the bound does not beat BALANCED
    has no more to give through the logged signals)."""
    pages = [sim.first_pages[r.id] for r in sim.readers if r.newcomer and r.id in sim.first_pages]
    if not pages:
        return
    full = sum(len(p) == PAGE for p in pages)
    sources = sorted({source for p in pages for source in p})
    print(f"\nNewcomers: {full} of {len(pages)} first pages full ({PAGE} posts), from {', '.join(sources)}")
    newcomers = {n for n, r in enumerate(sim.readers) if r.newcomer}
    later = [s for s in sets if s.reader in newcomers and s.engagements >= NEWCOMER_ENGAGEMENTS]
    if not later:
        return
    served = sorted({ranking.SOURCES[c.source] for s in later for c in s.candidates.found})
    print(f"  their candidates after {NEWCOMER_ENGAGEMENTS} engagements come from {', '.join(served)}")
    paired_replay(later, f"Newcomers' rankings after {NEWCOMER_ENGAGEMENTS} engagements (paired replay)", bound)
    balanced = by_weights(ranking.FIXED_PRESETS["balanced"])
    print(f"  {'newcomer':<10}{'rankings':>9}{'LEARNED':>9}{'bound':>8}{'oracle':>8}   (x BALANCED)")
    beaten = bound_beaten = 0
    for n in sorted(newcomers):
        own = [s for s in later if s.reader == n]
        if own:
            base = expected_rate(own, balanced)
            ratio = expected_rate(own, learned) / base
            ceiling = expected_rate(own, lambda s: bound[id(s)]) / base
            beaten += ratio > 1
            bound_beaten += ceiling > 1
            oracle = expected_rate(own, lambda s: s.chances) / base
            print(f"  {n - min(newcomers):<10}{len(own):>9}{ratio:>9.3f}{ceiling:>8.3f}{oracle:>8.3f}")
    print(
        f"  LEARNED beats BALANCED for {beaten} of {len(newcomers)} newcomers;"
        f" the bound on the logged signals for {bound_beaten}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--readers", type=int, default=60)
    parser.add_argument("--newcomers", type=int, default=10, help="readers joining when the first model is trained")
    parser.add_argument("--authors", type=int, default=40)
    parser.add_argument("--days", type=int, default=5, help="simulated days before training, and again after")
    parser.add_argument(
        "--tastes",
        type=lambda text: TasteMix(*(float(x) for x in text.split(","))),
        default=TasteMix(),
        help="what a favourite author, a topic, the liking for popular and for new posts add: 0.35,0.25,0.30,0.15",
    )
    parser.add_argument("--database", help="a Postgres server URL (a fresh database is made beside it)")
    parser.add_argument("--save", help="pickle the candidate sets and the log's training rows here, for offline study")
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
        # The clock is at `end`: only rows served a whole outcome window before it have a known outcome.
        trained = await ranker.train(pool, now=end)
        await sim.load_learned()
        print(
            f"\ntrain-ranker: {trained.rows} rows, AUC {trained.auc:.4f} vs BALANCED {trained.baseline_auc:.4f},"
            f" {'active' if trained.active else 'NOT active'}"
        )
        print("  weights: " + ", ".join(f"{k} {v:+.3f}" for k, v in trained.weights.items()))
        sim.phase = "after"
        await sim.add_newcomers(args.newcomers)
        await sim.days(end, args.days, measuring=True, retrain=True)
        after = sim.report(f"After training ({args.days} more days; newcomers not counted)")
        final = await foryou_db.active_model(pool)
        if final is not None:
            print("  last model's weights: " + ", ".join(f"{k} {v:+.3f}" for k, v in zip(final.signals, final.weights)))
        learned_rate, balanced, newest = (
            after["for_you/learned"],
            after["for_you/balanced"],
            after["for_you/newest_first"],
        )
        print(
            f"\nRealised: LEARNED / BALANCED = {learned_rate / balanced:.3f};"
            f" LEARNED / NEWEST_FIRST = {learned_rate / newest:.2f}"
        )
        print(
            f"  before training: BALANCED {before['for_you/balanced']:.3f}, NEWEST_FIRST {before['for_you/newest_first']:.3f}"
        )
        after_sets = [s for s in sim.candidate_sets if s.phase == "after"]
        bound = bound_scores(after_sets)
        later = [s for s in after_sets if not sim.readers[s.reader].newcomer]
        rates = paired_replay(later, "Paired replay of the later days (readers from the start)", bound)
        fixed = max(rates[p] for p in ranking.FIXED_PRESETS)
        print(
            f"  LEARNED / BALANCED {rates['learned'] / rates['balanced']:.3f} (target >= 1.12),"
            f" / NEWEST_FIRST {rates['learned'] / rates['newest_first']:.2f} (>= 1.5),"
            f" / best fixed preset {rates['learned'] / fixed:.3f}"
        )
        newcomers_report(sim, after_sets, bound)
        if args.save:
            rows = await feed_stats.training_rows(pool, None, end + timedelta(days=args.days))
            with open(args.save, "wb") as out:
                pickle.dump({"sets": sim.candidate_sets, "rows": [dict(r) for r in rows], "end": end}, out)
    finally:
        await pool.close()


if __name__ == "__main__":
    main()
