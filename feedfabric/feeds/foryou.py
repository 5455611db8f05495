"""For You: candidates from the member's profile, ranked by a preset, served as a chain of pages.

The first page ranks and keeps the whole ranked list in Redis, in the member's hash of live chains
(`foryou:{member}:chains`, one key: one Cluster slot, and a script keeps at most MAX_CHAINS lists
in it, a new one dropping the oldest), for FORYOU_SNAPSHOT_TTL_SECONDS; its cursors are offsets
into that list, so scrolling neither repeats nor skips while posts arrive and scores move. Every
page records in Postgres which posts it served (`foryou_pages`, each page naming the page it went on
from), so a cursor stays a fixed size however long its chain: it names the last page of its path and
how many of that page's posts the path includes, the offset in the kept list, and what the ranking
was made from (time, preset, sources, look-back, model), under a keyed MAC so no client can forge
one. When the list is gone the next page ranks again from Postgres as of that time (only posts
created by then, ages measured to then), leaves out every post its path served and goes on from
the top of the rest: neither an offset into a list that changed nor a post gone since can make it
repeat or skip. Later pages check visibility again, so a post held, deleted or whose author was
suspended since drops out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import struct
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import asyncpg
import numpy as np
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from feedfabric.core.errors import BadInput
from feedfabric.core.models import Page, Post
from feedfabric.core.settings import Settings
from feedfabric.db import foryou as foryou_db
from feedfabric.db import posts as posts_db
from feedfabric.db.foryou import Profile
from feedfabric.db.redisclient import REDIS_FAILURES, Script
from feedfabric.feeds import minilm as embeddings
from feedfabric.feeds import ranking

__all__ = [
    "CURSOR_CHARS",
    "MAX_CHAINS",
    "Chain",
    "ForYouService",
    "Place",
    "Signals",
    "chains_key",
    "cursor_key",
    "order",
    "parse_cursor",
    "preset_weights",
    "profile_of",
    "signals",
    "validate_profile",
]

log = logging.getLogger("feedfabric.foryou")

DEFAULT_PROFILE = Profile("balanced", ranking.SOURCES, 48)
MAX_LOOKBACK_HOURS = 720
FAVOURITES_MIN_HOURS = 48
# The SIMILAR scan compares the reader's taste with at most this many of the window's newest posts.
SIMILAR_SCAN = 2_000
SIMILAR_TAKE = 200
POPULAR_KEEP_SECONDS = 120
# Ranked lists one member keeps in Redis; a new first page (or rebuild) drops the oldest beyond it.
MAX_CHAINS = 3
# version, kept list, last page of the path, how many of that page's posts it includes, rankedAt (us),
# offset, preset, sources, look-back, model; then the MAC.
_CURSOR = struct.Struct(">B16s16sHqIBBHq")
_CURSOR_VERSION = 3
_MAC_BYTES = 16
MAX_SERVED = 10_000  # FORYOU_CANDIDATES' upper bound: a chain never serves more
_ENTRY = struct.Struct(">16sdBf")  # post id, score, source, similarity
# Entries read past a page's size, so a few posts gone invisible do not cost a second round.
_SLACK = 10
_NO_PAGE = uuid.UUID(int=0)

# KEYS[1] the member's chains; ARGV list id, packed list, cap, TTL. The `order` field lists the kept
# lists' IDs (16 bytes each) oldest first.
_KEEP = Script("""
local order = (redis.call('HGET', KEYS[1], 'order') or '') .. ARGV[1]
local cap = 16 * tonumber(ARGV[3])
while #order > cap do
  redis.call('HDEL', KEYS[1], string.sub(order, 1, 16))
  order = string.sub(order, 17)
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2], 'order', order)
redis.call('EXPIRE', KEYS[1], ARGV[4])
return #order / 16
""")
# KEYS[1] the member's chains; ARGV list id, first and last byte (0-based): nil when the list is gone.
_SLICE = Script("""
local list = redis.call('HGET', KEYS[1], ARGV[1])
if not list then return false end
return string.sub(list, tonumber(ARGV[2]) + 1, tonumber(ARGV[3]) + 1)
""")


def validate_profile(
    preset: str | None, sources: list[str] | None, lookback_hours: int | None, current: Profile
) -> Profile:
    """The current profile with the given parts replaced; BadInput on a value outside the contract."""
    new_preset = current.preset if preset is None else preset.lower()
    if new_preset not in ranking.PRESETS:
        raise BadInput(f"preset must be one of {', '.join(p.upper() for p in ranking.PRESETS)}")
    if sources is None:
        new_sources = current.sources
    else:
        wanted = {s.lower() for s in sources if isinstance(s, str)}
        if len(wanted) != len(sources) or not wanted <= set(ranking.SOURCES):
            raise BadInput(f"sources must be distinct values of {', '.join(s.upper() for s in ranking.SOURCES)}")
        new_sources = tuple(s for s in ranking.SOURCES if s in wanted)
    hours = current.lookback_hours if lookback_hours is None else lookback_hours
    if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= MAX_LOOKBACK_HOURS:
        raise BadInput(f"lookbackHours must be a whole number from 1 to {MAX_LOOKBACK_HOURS}")
    return Profile(new_preset, new_sources, hours)


async def profile_of(conn: asyncpg.Connection | asyncpg.Pool, member_id: uuid.UUID) -> Profile:
    return await foryou_db.profile(conn, member_id) or DEFAULT_PROFILE


def chains_key(member_id: uuid.UUID) -> str:
    """The member's kept lists (a hash: list ID → packed entries, and their order)."""
    return f"foryou:{{{member_id}}}:chains"


def cursor_key(settings: Settings) -> bytes:
    """The key cursors are signed with, derived from the app's secret (not the secret itself)."""
    return hmac.new(settings.jwt_secret.encode(), b"feedfabric for-you cursor", hashlib.sha256).digest()


@dataclass(frozen=True)
class Place:
    """Where a cursor stands: the last page record of its path (`_NO_PAGE` before any post was served)
    and how many of that page's posts the path includes, so the path is exactly what was served before
    the cursor, a branch back from an earlier edge included; and the offset in the kept list."""

    page: uuid.UUID
    taken: int
    offset: int


@dataclass(frozen=True)
class Chain:
    """What a ranking was made from, and which kept list (`id`) the cursor's offset counts in; the
    cursor carries it. A rebuild keeps its list under a new id: offsets in the lost list mean nothing there."""

    id: uuid.UUID
    ranked_at: datetime
    profile: Profile
    model_id: int  # 0: no model (LEARNED fell back to BALANCED, or another preset)

    def cursor(self, key: bytes, member_id: uuid.UUID, place: Place) -> str:
        """A fixed-size cursor, signed for its member: another member's cursor is refused too."""
        sources = sum(1 << ranking.SOURCES.index(s) for s in self.profile.sources)
        raw = _CURSOR.pack(
            _CURSOR_VERSION,
            self.id.bytes,
            place.page.bytes,
            place.taken,
            int(self.ranked_at.timestamp() * 1_000_000),
            place.offset,
            ranking.PRESETS.index(self.profile.preset),
            sources,
            self.profile.lookback_hours,
            self.model_id,
        )
        return base64.urlsafe_b64encode(raw + _mac(key, member_id, raw)).rstrip(b"=").decode()


def _mac(key: bytes, member_id: uuid.UUID, raw: bytes) -> bytes:
    return hmac.new(key, member_id.bytes + raw, hashlib.sha256).digest()[:_MAC_BYTES]


# A cursor's rankedAt is refused outside these: the rebuild computes times back from it (its look-back,
# the popular list's minutes), which a year 1 or 9999 would overflow.
_EARLIEST_RANKING = datetime(2020, 1, 1, tzinfo=UTC)
_CLOCK_SKEW = timedelta(hours=1)
CURSOR_CHARS = -(-(_CURSOR.size + _MAC_BYTES) * 4 // 3)  # every cursor's length (base64url, unpadded)


def parse_cursor(cursor: str, key: bytes, member_id: uuid.UUID) -> tuple[Chain, Place]:
    """The chain and where in it the cursor stands; BAD_USER_INPUT unless this app signed it for this member."""
    bad = BadInput("not a valid For You cursor")
    if not isinstance(cursor, str) or len(cursor) != CURSOR_CHARS or not cursor.isascii():
        raise bad
    try:
        signed = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        raise bad from None
    raw, mac = signed[: _CURSOR.size], signed[_CURSOR.size :]
    if len(signed) != _CURSOR.size + _MAC_BYTES or not hmac.compare_digest(mac, _mac(key, member_id, raw)):
        raise bad
    version, chain, page, taken, micros, offset, preset, sources, hours, model_id = _CURSOR.unpack(raw)
    try:
        ranked_at = datetime.fromtimestamp(micros / 1_000_000, UTC)
    except (ValueError, OverflowError, OSError):
        raise bad from None
    if (
        version != _CURSOR_VERSION
        or not _EARLIEST_RANKING <= ranked_at <= datetime.now(UTC) + _CLOCK_SKEW
        or preset >= len(ranking.PRESETS)
        or sources >= 1 << len(ranking.SOURCES)
        or not 1 <= hours <= MAX_LOOKBACK_HOURS
        or model_id < 0
        or offset > MAX_SERVED * 2
    ):
        raise bad
    profile = Profile(
        ranking.PRESETS[preset], tuple(s for n, s in enumerate(ranking.SOURCES) if sources >> n & 1), hours
    )
    return Chain(uuid.UUID(bytes=chain), ranked_at, profile, model_id), Place(uuid.UUID(bytes=page), taken, offset)


class Ranked(NamedTuple):
    """An entry of a ranked list (a tuple: a first page makes hundreds)."""

    post_id: uuid.UUID
    score: float
    source: str
    similarity: float


@dataclass(frozen=True)
class ForYouPage:
    page: Page
    reasons: list[str]
    scores: list[float]
    similarities: list[float]
    preset: str
    ranked_at: datetime
    # Each item's own cursor: the chain continued after it.
    cursors: list[str]


def _taste(vectors: list[bytes]) -> np.ndarray | None:
    if not vectors:
        return None
    mean = np.mean([embeddings.from_bytes(v) for v in vectors], axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else None


async def preset_weights(pool: asyncpg.Pool, chain_preset: str, model_id: int | None) -> tuple[ranking.Weights, int]:
    """The preset's weights; LEARNED takes the given (or active) model, else falls back to BALANCED."""
    if chain_preset != "learned":
        return ranking.FIXED_PRESETS[chain_preset], 0
    if model_id is None:
        model = await foryou_db.active_model(pool)
    else:
        model = await foryou_db.model(pool, model_id) if model_id else None
    if model is None:
        return ranking.FIXED_PRESETS["balanced"], 0
    by_signal = dict(zip(model.signals, model.weights, strict=True))
    return ranking.Weights(by_signal, model.intercept), model.id


async def popular_ids(
    pool: asyncpg.Pool,
    redis: aioredis.Redis | None,
    settings: Settings,
    as_of: datetime,
    lookback_hours: int,
    limit: int,
) -> list[uuid.UUID]:
    """POPULAR's list, the same for every member: the most engaged posts of `as_of`'s minute and the
    look-back before it, made once a minute per look-back and shared through Redis
    (POPULAR_KEEP_SECONDS), so a first page does not sort the whole window's posts by engagement.
    The candidates statement keeps those of the ranking's own window."""
    minute = as_of.replace(second=0, microsecond=0)
    key = f"foryou:popular:{lookback_hours}:{limit}:{int(minute.timestamp())}"
    if redis is not None:
        raw: bytes | str | None
        try:
            raw = await redis.get(key)
        except (RedisError, OSError, TimeoutError):
            raw = None
        if isinstance(raw, bytes):
            return [uuid.UUID(bytes=raw[n : n + 16]) for n in range(0, len(raw) - len(raw) % 16, 16)]
    ids = await foryou_db.popular(
        pool,
        since=minute - timedelta(hours=lookback_hours),
        as_of=minute + timedelta(minutes=1),
        limit=limit,
        comment_weight=settings.comment_weight,
    )
    if redis is not None:
        try:
            await redis.set(key, b"".join(i.bytes for i in ids), ex=POPULAR_KEEP_SECONDS)
        except (RedisError, OSError, TimeoutError):
            pass
    return ids


@dataclass(frozen=True)
class Signals:
    """The candidates of a ranking and their signals as rows of `ranking.SIGNALS`: what every preset
    orders alike (the simulation also fits on them)."""

    found: list[foryou_db.Candidate]
    rows: np.ndarray
    followed: np.ndarray  # 1.0 for an author the member follows
    similarity: np.ndarray
    created: np.ndarray  # POSIX seconds


async def rank(
    pool: asyncpg.Pool,
    settings: Settings,
    member_id: uuid.UUID,
    profile: Profile,
    as_of: datetime,
    weights: ranking.Weights,
    redis: aioredis.Redis | None = None,
) -> list[Ranked]:
    """The ranked list as of `as_of`: candidates, their scores, the author-spread rule."""
    candidates = await signals(pool, settings, member_id, profile, as_of, redis)
    return order(candidates, weights) if candidates is not None else []


async def signals(
    pool: asyncpg.Pool,
    settings: Settings,
    member_id: uuid.UUID,
    profile: Profile,
    as_of: datetime,
    redis: aioredis.Redis | None = None,
) -> Signals | None:
    """The candidates of the profile's sources as of `as_of` with their signals; None without any."""
    since = as_of - timedelta(hours=profile.lookback_hours)
    favourites_since = as_of - timedelta(hours=max(FAVOURITES_MIN_HOURS, profile.lookback_hours))
    liked = await foryou_db.taste_vectors(pool, member_id, as_of)
    taste = _taste([v for _, v in liked])
    engaged = {post_id for post_id, _ in liked}
    similar_ids: list[uuid.UUID] = []
    if taste is not None and "similar" in profile.sources:
        window = await foryou_db.window_vectors(pool, member_id, since, as_of, SIMILAR_SCAN)
        if window:
            matrix = np.stack([embeddings.from_bytes(v) for _, v in window])
            sims = matrix @ taste
            best = np.argsort(-sims, kind="stable")[:SIMILAR_TAKE]
            # What the reader already engaged with is the taste, not news to it.
            similar_ids = [window[i][0] for i in best if sims[i] > 0 and window[i][0] not in engaged]
    # Each of FOLLOWING and TAGS brings at most a quarter of the candidates, so one busy source cannot
    # crowd out the others and the per-candidate reads stay bounded; POPULAR, the same for everyone
    # and the least personal, an eighth.
    per_source = max(1, settings.foryou_candidates // 4)
    popular = (
        await popular_ids(pool, redis, settings, as_of, profile.lookback_hours, max(1, settings.foryou_candidates // 8))
        if "popular" in profile.sources
        else []
    )
    found = await foryou_db.candidates(
        pool,
        member_id,
        as_of=as_of,
        since=since,
        favourites_since=favourites_since,
        sources=profile.sources,
        similar_ids=similar_ids,
        popular_ids=popular,
        per_source=per_source,
        total=settings.foryou_candidates,
        comment_weight=settings.comment_weight,
        with_vectors=taste is not None,
    )
    if not found:
        return None
    similarity = np.zeros(len(found))
    if taste is not None:
        for n, c in enumerate(found):
            if c.vector is not None:
                similarity[n] = float(embeddings.from_bytes(c.vector) @ taste)
    # One pass over the candidates into columns: created, affinity, interest, favourite, followed,
    # popularity, affinity_rate, interest_rate, author_effect, topic_effect.
    columns = np.array(
        [
            (
                c.created,
                c.affinity,
                c.interest,
                c.favourite,
                c.followed,
                c.popularity,
                c.affinity_rate,
                c.interest_rate,
                c.author_effect,
                c.topic_effect,
            )
            for c in found
        ],
        dtype=np.float64,
    ).T
    created = columns[0]
    rows = ranking.features(columns[1], columns[2], columns[3], as_of.timestamp() - created, similarity, *columns[5:])
    return Signals(found, rows, columns[4], similarity, created)


def order(candidates: Signals, weights: ranking.Weights) -> list[Ranked]:
    """The candidates by the weights' score, newer first on ties, then the author-spread rule."""
    found, similarity, created = candidates.found, candidates.similarity, candidates.created
    score = ranking.scores(weights, candidates.rows, candidates.followed)
    # Ties (NEWEST_FIRST's equal ages aside, rare) fall to the newer post, so a rebuild orders alike.
    # (np.lexsort: the last key first; 16-byte IDs compare as the UUIDs do.)
    ids = np.array([c.post_id.bytes for c in found], dtype="S16")
    best_first = np.lexsort((ids, -created, -score)).tolist()
    placed = ranking.spread(best_first, [c.author_id for c in found])
    sources = ranking.SOURCES
    scores, similarities = score.tolist(), similarity.tolist()
    return [Ranked(found[i].post_id, scores[i], sources[found[i].source], similarities[i]) for i in placed]


def _pack(ranked: list[Ranked]) -> bytes:
    return b"".join(
        _ENTRY.pack(r.post_id.bytes, r.score, ranking.SOURCES.index(r.source), r.similarity) for r in ranked
    )


def _unpack(raw: bytes) -> list[Ranked]:
    return [
        Ranked(uuid.UUID(bytes=i), score, ranking.SOURCES[s], sim)
        for i, score, s, sim in _ENTRY.iter_unpack(raw[: len(raw) - len(raw) % _ENTRY.size])
    ]


def page_id(member_id: uuid.UUID, ranked_at: datetime, after: Place, posts: bytes) -> uuid.UUID:
    """A page record's ID: a digest of the member, the ranking's time, the path it goes on from and the
    posts it served, so the same page served again is the same record."""
    digest = hashlib.sha256(
        member_id.bytes
        + struct.pack(">qI", int(ranked_at.timestamp() * 1_000_000), after.taken)
        + after.page.bytes
        + posts
    ).digest()
    return uuid.UUID(bytes=digest[:16], version=4)


@dataclass
class ForYouService:
    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis | None
    # The posts among those given that the viewer's muted words hide (feeds.filtering); None: none do.
    hides: Callable[[list[Post]], Awaitable[set[uuid.UUID]]] | None = None

    async def first_page(self, member_id: uuid.UUID, limit: int) -> ForYouPage:
        profile = await profile_of(self.pool, member_id)
        weights, model_id = await preset_weights(self.pool, profile.preset, None)
        chain = Chain(uuid.uuid4(), datetime.now(UTC), profile, model_id)
        ranked = await rank(self.pool, self.settings, member_id, profile, chain.ranked_at, weights, self.redis)
        source = "postgres"
        if len(ranked) > limit and await self._keep(member_id, chain, ranked):
            source = "redis"
        # Visible when ranked a moment ago; one that went since, or that the viewer's muted words hide, is
        # passed over like on later pages, and the page reads on down the ranking until it is full.
        served: list[Ranked] = []
        posts: list[Post] = []
        offsets: list[int] = []
        offset = 0
        while len(served) < limit and offset < len(ranked):
            window = ranked[offset : offset + limit - len(served) + (_SLACK if offset else 0)]
            visible = await self._visible(member_id, [r.post_id for r in window])
            for r in window:
                offset += 1
                if r.post_id in visible:
                    served.append(r)
                    posts.append(visible[r.post_id])
                    offsets.append(offset)
                    if len(served) == limit:
                        break
        start = Place(_NO_PAGE, 0, 0)
        page = await self._record(member_id, chain, start, served)
        key = cursor_key(self.settings)
        cursors = [chain.cursor(key, member_id, Place(page, n, o)) for n, o in enumerate(offsets, start=1)]
        end = chain.cursor(key, member_id, Place(page, len(served), offset)) if offset < len(ranked) else None
        return self._page(chain, served, posts, cursors, end, source)

    async def _visible(self, member_id: uuid.UUID, ids: list[uuid.UUID]) -> dict[uuid.UUID, Post]:
        """The posts among `ids` the viewer's feeds show (feed_posts), less those `hides` names."""
        found = await posts_db.feed_by_ids(self.pool, ids, member_id) if ids else {}
        if self.hides is not None and found:
            hidden = await self.hides(list(found.values()))
            found = {k: v for k, v in found.items() if k not in hidden}
        return found

    async def next_page(self, member_id: uuid.UUID, cursor: str, limit: int) -> ForYouPage:
        """Continues the kept list at the cursor's offset; when the list is gone, ranks again as of
        `rankedAt`, leaves out what the cursor's path served and goes on from the top of what is left,
        so posts gone invisible or scores moved since cannot shift the page."""
        key = cursor_key(self.settings)
        chain, at = parse_cursor(cursor, key, member_id)
        offset = at.offset
        requested = limit + _SLACK + 1  # one more than a page may consume says whether the list goes on
        rebuilt: list[Ranked] | None = None
        source = "redis"
        served: list[Ranked] = []
        posts: list[Post] = []
        offsets: list[int] = []
        while True:
            kept = await self._kept(member_id, chain, offset, requested) if rebuilt is None else None
            if kept is None and rebuilt is None:
                source = "postgres"
                chain, rebuilt = await self._rebuild(member_id, chain, at)
                offset = 0
            entries = kept if kept is not None else (rebuilt or [])[offset : offset + requested]
            window = entries[: limit - len(served) + _SLACK]
            visible = await self._visible(member_id, [r.post_id for r in window])
            consumed = 0
            for r in window:
                consumed += 1
                offset += 1
                if r.post_id in visible:
                    served.append(r)
                    posts.append(visible[r.post_id])
                    offsets.append(offset)
                    if len(served) == limit:
                        break
            goes_on = consumed < len(entries)  # a window is shorter than `requested`
            if len(served) == limit or not goes_on:
                break
        page = await self._record(member_id, chain, at, served)
        cursors = [chain.cursor(key, member_id, Place(page, n, o)) for n, o in enumerate(offsets, start=1)]
        end_place = Place(page, len(served), offset) if served else Place(at.page, at.taken, offset)
        end = chain.cursor(key, member_id, end_place) if goes_on else None
        return self._page(chain, served, posts, cursors, end, source)

    def _page(
        self,
        chain: Chain,
        served: list[Ranked],
        posts: list[Post],
        cursors: list[str],
        end_cursor: str | None,
        source: str,
    ) -> ForYouPage:
        return ForYouPage(
            Page(posts, end_cursor, source),
            [r.source for r in served],
            [r.score for r in served],
            [r.similarity for r in served],
            chain.profile.preset,
            chain.ranked_at,
            cursors,
        )

    async def _record(self, member_id: uuid.UUID, chain: Chain, after: Place, served: list[Ranked]) -> uuid.UUID:
        """Records what the page served, after the path `after` ends; the new page's ID (`after`'s when
        it served nothing: the path did not grow). The ID is derived from what the record holds, so a
        cursor replayed serves the same record and writes nothing new (a replay loop wrote 208 kB a
        hundred replays); a replay that serves other posts (one went since) is another record."""
        if not served:
            return after.page
        posts = b"".join(r.post_id.bytes for r in served)
        page = page_id(member_id, chain.ranked_at, after, posts)
        await foryou_db.record_page(
            self.pool,
            page,
            member_id,
            chain.ranked_at,
            None if after.page == _NO_PAGE else after.page,
            after.taken,
            posts,
        )
        return page

    async def _rebuild(self, member_id: uuid.UUID, lost: Chain, at: Place) -> tuple[Chain, list[Ranked]]:
        """The ranking made again as of the lost chain's time, less what the cursor's path served, kept anew."""
        served: set[uuid.UUID] = set()
        if at.page != _NO_PAGE:
            raw = await foryou_db.served_path(self.pool, at.page, member_id, at.taken)
            if raw is None:
                raise BadInput("this For You cursor has expired: load the first page again")
            served = {uuid.UUID(bytes=raw[n : n + 16]) for n in range(0, len(raw), 16)}
        weights, _ = await preset_weights(self.pool, lost.profile.preset, lost.model_id)
        ranked = await rank(self.pool, self.settings, member_id, lost.profile, lost.ranked_at, weights, self.redis)
        rest = [r for r in ranked if r.post_id not in served]
        chain = Chain(uuid.uuid4(), lost.ranked_at, lost.profile, lost.model_id)
        if rest:
            await self._keep(member_id, chain, rest)
        return chain, rest

    async def _kept(self, member_id: uuid.UUID, chain: Chain, offset: int, count: int) -> list[Ranked] | None:
        """`count` entries of the kept list from `offset` (fewer where it ends); None when the list is
        gone or Redis cannot say."""
        if self.redis is None:
            return None
        try:
            raw = await _SLICE(
                self.redis,
                [chains_key(member_id)],
                [chain.id.bytes, offset * _ENTRY.size, (offset + count) * _ENTRY.size - 1],
            )
        except REDIS_FAILURES as error:
            log.warning("for you snapshot unreadable (%s); ranking again from postgres", type(error).__name__)
            return None
        return _unpack(raw) if raw is not None else None

    async def _keep(self, member_id: uuid.UUID, chain: Chain, ranked: list[Ranked]) -> bool:
        """Keeps the ranked list among the member's MAX_CHAINS newest; whether Redis took it."""
        if self.redis is None:
            return False
        try:
            await _KEEP(
                self.redis,
                [chains_key(member_id)],
                [chain.id.bytes, _pack(ranked), MAX_CHAINS, self.settings.foryou_snapshot_ttl_seconds],
            )
        except REDIS_FAILURES as error:
            log.warning("for you snapshot not kept (%s); later pages rank again", type(error).__name__)
            return False
        return True
