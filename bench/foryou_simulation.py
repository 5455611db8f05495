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
the real feed log insert, at simulated times; the ranker is the real `feeds.ranker_training.train`, run once
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
from feedfabric.core.settings import Settings
from feedfabric.db import affinity, feed_stats
from feedfabric.db import feed_log as feed_log_db
from feedfabric.db import foryou as foryou_db
from feedfabric.db.feed_log import ServedPage
from feedfabric.db.foryou import Profile
from feedfabric.feeds import feed_log as feed_log_svc
from feedfabric.feeds import foryou, ranking, reader_effects, suggestions
from feedfabric.feeds import ranker_training as ranker
from sklearn.ensemble import HistGradientBoostingRegressor

from bench import _stack

TOPICS = ("running", "cooking", "jazz", "chess", "gardening", "physics", "cinema", "sailing")
PRESETS = ("newest_first", "balanced", "learned")
PAGE = 20
SESSIONS = (9.0, 13.0, 17.0, 21.0)  # hours of the simulated day when every member reads
# For You is read after the session's Following page and its likes.
FOR_YOU_AFTER = timedelta(minutes=30)
NEWCOMER_ENGAGEMENTS = 20
# Newcomers declare this many topics at signup: their hidden topics (2) and one that is not theirs.
DECLARED = 3
# Who-to-follow suggestions a reader looks at once a day (when suggestions are on).
SUGGESTIONS_A_DAY = 5
BOOTSTRAP = 1_000


def seeded_id(rng: random.Random, at: datetime) -> uuid.UUID:
    """A UUIDv7 for `at` whose random bits come from the simulation's own stream: IDs order by time as
    the product's do, and a run of a seed makes the same IDs (tie-breaks by ID included)."""
    ms = int(at.timestamp() * 1000)
    rand = rng.getrandbits(74)
    value = (ms & (2**48 - 1)) << 80 | 0x7 << 76 | (rand >> 62) << 64 | 0b10 << 62 | (rand & (2**62 - 1))
    return uuid.UUID(int=value)


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
    declared: list[str] = field(default_factory=list)
    initial: list[int] = field(default_factory=list)  # the follows they started with
    rankings: int = 0  # For You rankings served so far


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
    nth: int = 0  # the reader's how-many-th For You ranking (0: their first page)


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
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        seed: int,
        readers: int,
        authors: int,
        tastes: TasteMix,
        suggest: bool = False,
        start: datetime | None = None,
    ) -> None:
        self.pool, self.settings, self.tastes = pool, settings, tastes
        self.suggest = suggest
        self.start = start or datetime(2026, 1, 1, tzinfo=UTC)
        self.rng = random.Random(seed)
        # Streams of their own: IDs, the newcomers' declared topics and the follows accepted, so turning
        # suggestions on or off moves nothing else drawn before them.
        self.ids = random.Random(seed + 2)
        self.declaring = random.Random(seed + 3)
        self.accepting = random.Random(seed + 4)
        # Readers' likes wait here until their time comes, as the crowd's do: a page served before a
        # like's time never counts it (readers of one session are served one after another).
        self.reader_likes: list[tuple[Reader, SimPost, datetime]] = []
        # Established readers' (served, engaged) in the later days, all feeds, by reader index.
        self.per_reader: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        self.accepted: dict[str, int] = defaultdict(int)
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
        member_id = seeded_id(self.ids, self.start)
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
                initial=list(follows),
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
                post = SimPost(seeded_id(self.ids, at), a, topic, self.rng.betavariate(1.2, 3.0), at)
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
        """Inserts every like whose time has come: the crowd's, then the readers' with what the engagement
        worker adds for each (affinity, interest, a newcomer's own refit of their effects)."""
        due = [like for like in self.pending_likes if like[2] <= at]
        self.pending_likes = [like for like in self.pending_likes if like[2] > at]
        await self.pool.executemany("INSERT INTO likes (post_id, member_id, created_at) VALUES ($1, $2, $3)", due)
        mine = [like for like in self.reader_likes if like[2] <= at]
        self.reader_likes = [like for like in self.reader_likes if like[2] > at]
        refit: dict[uuid.UUID, Reader] = {}
        for reader, post, when in mine:
            await self.like(reader, post, when)
            if reader.newcomer:
                refit[reader.id] = reader
        for reader in refit.values():
            # feeds.reader_effects.on_engagement: a new member's effects learn within the day.
            async with self.pool.acquire() as conn, conn.transaction():
                await reader_effects.refit_reader(conn, reader.id, at)

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

    async def read_following(self, reader: Reader, at: datetime, measuring: bool) -> None:
        """A session's Following page and its engagement (the likes wait for their time)."""
        if reader.follows:
            following = await self.following_page(reader, at)
            await feed_log_svc.log_pages(
                self.pool,
                [ServedPage(reader.id, "following", tuple(following), "postgres", at)],
                comment_weight=self.settings.comment_weight,
            )
            await self.engage(reader, "following", following, at, measuring)

    async def read_for_you(self, reader: Reader, at: datetime, preset: str, measuring: bool) -> None:
        """For You, ranked after every reader's Following page and its likes (so its candidates leave out
        what the reader just liked there, as they would in the product)."""
        weights, _ = await foryou.preset_weights(self.pool, preset, None)
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
                    reader.rankings,
                )
            )
        reader.rankings += 1
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

    async def follow_suggestions(self, reader: Reader, at: datetime) -> None:
        """The reader looks at their who-to-follow list (feeds.suggestions, as GET /suggestions/members
        serves it) and follows each suggested author with a chance that grows with their hidden affinity
        for them: likelier for a favourite author, then for one whose usual topic is theirs."""
        found = await suggestions.suggested_members(
            self.pool, None, self.settings, reader.id, SUGGESTIONS_A_DAY, now=at
        )
        index = {member: n for n, member in enumerate(self.authors)}
        for suggestion in found:
            author = index.get(suggestion.member.id)
            self.accepted["shown"] += 1
            if author is None:
                continue
            favourite = author in reader.favourite_authors
            on_topic = self.author_topic[author] in reader.topics
            chance = 0.05 + 0.6 * favourite + 0.25 * on_topic
            if self.accepting.random() < chance and author not in reader.follows:
                reader.follows = sorted({*reader.follows, author})
                self.accepted["followed"] += 1
                self.accepted["favourites followed"] += favourite
                self.accepted[f"reason {suggestion.reason}"] += 1
                await self.pool.execute(
                    "INSERT INTO follows (follower_id, target_type, target_id, created_at)"
                    " VALUES ($1, 'member', $2, $3) ON CONFLICT DO NOTHING",
                    reader.id,
                    str(self.authors[author]),
                    at,
                )

    async def engage(self, reader: Reader, feed: str, ids: list[uuid.UUID], at: datetime, measuring: bool) -> None:
        for position, post_id in enumerate(ids):
            post = self.posts[post_id]
            engaged = post_id not in reader.liked and self.rng.random() < self.chance(reader, post, at)
            if measuring and not reader.newcomer:
                self.counts[feed][0] += 1
                self.counts[feed][1] += engaged
                if self.phase == "after":
                    counts = self.per_reader[self.readers.index(reader)]
                    counts[0] += 1
                    counts[1] += engaged
            if engaged:
                reader.liked.add(post_id)
                self.reader_likes.append((reader, post, at + timedelta(minutes=2 + position)))

    def chance(self, reader: Reader, post: SimPost, at: datetime) -> float:
        """The hidden taste: the only thing that decides whether a member engages."""
        return float(self.tastes.chances(np.array(taste_terms(reader, post, at))))

    async def like(self, reader: Reader, post: SimPost, at: datetime) -> None:
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
                if self.suggest and self.phase == "after" and hour == SESSIONS[0]:
                    for reader in self.readers:
                        await self.follow_suggestions(reader, at)
                for reader in self.readers:
                    await self.read_following(reader, at, measuring)
                await self.likes_until(at + FOR_YOU_AFTER)
                for reader in self.readers:
                    # Which preset a reader reads is drawn afresh every session, so no preset always
                    # follows another that took the best posts first.
                    await self.read_for_you(reader, at + FOR_YOU_AFTER, self.assign.choice(PRESETS), measuring)
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
        weights, model_id = await foryou.preset_weights(self.pool, "learned", None)
        self.learned = weights if model_id else None

    async def add_newcomers(self, count: int) -> None:
        """Readers who join now: no follows, no favourite, no likes; hidden tastes like everyone's. At
        signup each declares DECLARED topics the way people do: their two hidden topics and one that is
        not theirs (followTag, whose declared interest is their topic effects' prior)."""
        for n in range(count):
            reader = Reader(
                id=await self._member(f"newcomer{n}"),
                favourite_authors=set(self.rng.sample(range(self.n_authors), 3)),
                topics=set(self.rng.sample(TOPICS, 2)),
                likes_popular=self.rng.random(),
                likes_new=self.rng.random(),
                follows=[],
                newcomer=True,
            )
            other = self.declaring.choice(sorted(set(TOPICS) - reader.topics))
            reader.declared = sorted({*reader.topics, other})
            self.readers.append(reader)
            async with self.pool.acquire() as conn, conn.transaction():
                for tag in reader.declared:
                    await conn.execute(
                        "INSERT INTO follows (follower_id, target_type, target_id) VALUES ($1, 'tag', $2)",
                        reader.id,
                        tag,
                    )
                    await reader_effects.on_follow_tag(conn, reader.id, tag)

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


def placed_chances(s: CandidateSet, score: Callable[[CandidateSet], np.ndarray]) -> tuple[float, int]:
    """The hidden chances of the first PAGE posts of one set ordered by `score` (summed), and how many."""
    best_first = np.lexsort((-s.candidates.created, -score(s))).tolist()
    placed = first_page(best_first, [c.author_id for c in s.candidates.found])
    return float(s.chances[placed].sum()), len(placed)


def by_reader(sets: list[CandidateSet], score: Callable[[CandidateSet], np.ndarray]) -> dict[int, np.ndarray]:
    """Per reader: (summed chances, posts placed) of their sets' first pages under `score`."""
    out: dict[int, np.ndarray] = defaultdict(lambda: np.zeros(2))
    for s in sets:
        out[s.reader] += placed_chances(s, score)
    return dict(out)


def ratio_with_interval(a: dict[int, np.ndarray], b: dict[int, np.ndarray], seed: int) -> tuple[float, float, float]:
    """(rate of a) / (rate of b) over the readers both have, each rate summed over readers (sum of
    chances or engagements / sum served), and its 95 % interval by resampling readers (BOOTSTRAP
    draws, percentile)."""
    readers = sorted(set(a) & set(b))
    if not readers:
        return float("nan"), float("nan"), float("nan")
    x = np.array([a[r] for r in readers])
    y = np.array([b[r] for r in readers])

    def ratio(pick: np.ndarray) -> float:
        xs, ys = x[pick].sum(axis=0), y[pick].sum(axis=0)
        return float((xs[0] / xs[1]) / (ys[0] / ys[1])) if xs[1] and ys[1] and ys[0] else float("nan")

    rng = np.random.default_rng(seed)
    draws = [ratio(rng.integers(0, len(readers), len(readers))) for _ in range(BOOTSTRAP)]
    low, high = np.nanpercentile(draws, [2.5, 97.5])
    return ratio(np.arange(len(readers))), float(low), float(high)


def figure(name: str, sets: list[CandidateSet], bound: dict[int, np.ndarray], seed: int, target: str) -> None:
    """LEARNED, the bound and the oracle against BALANCED on these sets, each with its 95 % interval."""
    balanced = by_reader(sets, by_weights(ranking.FIXED_PRESETS["balanced"]))
    parts = []
    for label, score in (
        ("LEARNED", learned),
        ("bound", lambda s: bound[id(s)]),
        ("oracle", lambda s: s.chances),
    ):
        value, low, high = ratio_with_interval(by_reader(sets, score), balanced, seed)
        parts.append(f"{label} {value:.3f} [{low:.3f}, {high:.3f}]")
    print(f"  {name} ({len(sets)} rankings, {len({s.reader for s in sets})} readers), x BALANCED: " + "; ".join(parts))
    print(f"    target: {target}")


def newcomer_figures(sim: Simulation, sets: list[CandidateSet], bound: dict[int, np.ndarray], seed: int) -> None:
    newcomers = sorted(n for n, r in enumerate(sim.readers) if r.newcomer)
    own = [s for s in sets if s.reader in newcomers]
    if not own:
        return
    print(f"\nNewcomers ({len(newcomers)}; each declared {DECLARED} topics, 2 of them their own), 95 % intervals:")
    figure("first page", [s for s in own if s.nth == 0], bound, seed, "LEARNED >= 1.15x BALANCED")
    early = [s for s in own if s.engagements < NEWCOMER_ENGAGEMENTS]
    figure(
        f"first {NEWCOMER_ENGAGEMENTS} engagements",
        early,
        bound,
        seed,
        "LEARNED >= 1.15x BALANCED, better for >= 8 of 10",
    )
    balanced = by_weights(ranking.FIXED_PRESETS["balanced"])
    wins, shown = 0, []
    for n in newcomers:
        mine = [s for s in early if s.reader == n]
        if mine:
            ratio = expected_rate(mine, learned) / expected_rate(mine, balanced)
            wins += ratio > 1
            shown.append(f"{ratio:.3f}")
    print(f"    LEARNED better than BALANCED for {wins} of {len(newcomers)} newcomers: {', '.join(shown)}")
    later = [s for s in own if s.engagements >= NEWCOMER_ENGAGEMENTS]
    if later:
        figure(f"after {NEWCOMER_ENGAGEMENTS} engagements", later, bound, seed, "(as before: about 1.03x)")


@dataclass
class Run:
    """What one run leaves for the comparison of runs with and without suggestions."""

    per_reader: dict[int, np.ndarray]
    favourites_followed: int
    hidden_followed: int
    hidden: int
    accepted: dict[str, int]


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
    parser.add_argument(
        "--suggestions",
        choices=("on", "off", "both"),
        default="both",
        help="who-to-follow suggestions in the later days: on, off, or a run of each to compare (default)",
    )
    parser.add_argument("--database", help="a Postgres server URL (a fresh database is made beside it)")
    parser.add_argument("--save", help="pickle the candidate sets and the log's training rows here, for offline study")
    args = parser.parse_args()
    with _stack.services() as env:
        runs: dict[bool, Run] = {}
        for suggest in {"on": (True,), "off": (False,), "both": (False, True)}[args.suggestions]:
            url = _stack.fresh_database(args.database or _stack.env_or(env, "DATABASE_URL"))
            print(f"\n===== seed {args.seed}, suggestions {'on' if suggest else 'off'} =====")
            runs[suggest] = asyncio.run(simulate(args, url, suggest))
        if len(runs) == 2:
            compare(runs[False], runs[True], args.seed)


def compare(without: Run, with_: Run, seed: int) -> None:
    value, low, high = ratio_with_interval(with_.per_reader, without.per_reader, seed)
    print(f"\nEstablished readers, the later days with suggestions against without (seed {seed}, same readers):")
    print(f"  engagement rate (every feed) x {value:.3f} [{low:.3f}, {high:.3f}]   target >= 1.05")
    print(
        f"  hidden favourite authors followed (neither followed nor favourited at the start, {with_.hidden} of them):"
        f" {with_.hidden_followed} with suggestions, {without.hidden_followed} without"
    )
    print(
        f"  favourite authors followed in all: {with_.favourites_followed} with, {without.favourites_followed} without"
    )
    print("  suggestions: " + ", ".join(f"{k} {v}" for k, v in sorted(with_.accepted.items())))


async def simulate(args: argparse.Namespace, url: str, suggest: bool) -> Run:
    pool = await asyncpg.create_pool(url, min_size=1, max_size=4)
    settings = Settings(database_url=url)
    try:
        # A fixed calendar, so a seed's run is the same whenever it runs (partitions, the POPULAR list's
        # minutes): the days before today, as the log's retention would keep them.
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        start = today - timedelta(days=2 * args.days + 3)
        sim = Simulation(pool, settings, args.seed, args.readers, args.authors, args.tastes, suggest, start)
        await sim.populate()
        await feed_log_db.ensure_partitions(
            pool, {(start + timedelta(days=d)).date() for d in range(-1, 2 * args.days + 4)}
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
        figure("established readers, paired replay", later, bound, args.seed, "no worse than 1.155-1.172x")
        newcomers_report(sim, after_sets, bound)
        newcomer_figures(sim, after_sets, bound, args.seed)
        await report_popularity(pool)
        established = [r for r in sim.readers if not r.newcomer]
        hidden = [
            (r, a) for r in established for a in r.favourite_authors - set(r.initial) - {min(r.favourite_authors)}
        ]
        run = Run(
            per_reader={n: np.array(v, dtype=np.float64)[::-1] for n, v in sim.per_reader.items()},
            favourites_followed=sum(len(r.favourite_authors & set(r.follows)) for r in established),
            hidden_followed=sum(a in r.follows for r, a in hidden),
            hidden=len(hidden),
            accepted=dict(sim.accepted),
        )
        if args.save:
            rows = await feed_stats.training_rows(pool, None, end + timedelta(days=args.days))
            with open(args.save, "wb") as out:
                pickle.dump({"sets": sim.candidate_sets, "rows": [dict(r) for r in rows], "end": end}, out)
        return run
    finally:
        await pool.close()


async def report_popularity(pool: asyncpg.Pool) -> None:
    """How many logged rows count a like stamped after their serving (the audit found 71-74 % of Following
    rows did when readers' likes were inserted at once): with every like inserted when its time comes,
    a row's popularity is the likes and comments made by its serving."""
    row = await pool.fetchrow(
        """SELECT count(*) AS rows,
                  count(*) FILTER (WHERE f.popularity > (SELECT count(*) FROM likes l
                                                           WHERE l.post_id = f.post_id AND l.created_at <= f.served_at)
                                                        + 3 * (SELECT count(*) FROM comments c
                                                               WHERE c.post_id = f.post_id AND c.created_at <= f.served_at)
                                                        + 1e-9) AS ahead
           FROM feed_log f"""
    )
    share = row["ahead"] / row["rows"] if row["rows"] else 0.0
    print(
        f"\nLogged rows whose popularity counts a like stamped after serving: {row['ahead']} of {row['rows']} ({share:.1%})"
    )


if __name__ == "__main__":
    main()
