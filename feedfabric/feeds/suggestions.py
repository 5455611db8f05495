"""Who to follow and topics worth following, each suggestion with the reason it is made.

Candidates come from what exists: the follow table (followed by the members you follow), the likes
(members liked by those who like what you like), your affinity per post served (authors you engage
with and do not follow yet), the tags (active in your topics, popular and fresh)
and member_stats (the most followed, for a member who follows few yet); db.suggestions reads each
through bounded index ranges. Reasons are merged into one list: each reason's scores are scaled to
its best (so a count of co-likers and a sum of likes weigh alike), weighted (WEIGHTS) and summed per
candidate, and the reason shown is the one that gave most. The merged list (KEEP entries) is cached
per member in Redis for CACHE_SECONDS; every read filters it again, so a member followed, dismissed
or suspended since leaves at once, and a follow of a member or a tag forgets the cache (`forget`),
so what it changes (friends of friends, your topics) shows on the next read.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from feedfabric.core.errors import BadInput
from feedfabric.core.models import Member
from feedfabric.core.settings import Settings
from feedfabric.db import members as members_db
from feedfabric.db import suggestions as db
from feedfabric.db.redisclient import REDIS_FAILURES
from feedfabric.feeds import members as members_svc
from feedfabric.feeds.relations import NONE, Relations

__all__ = ["MemberSuggestion", "TopicSuggestion", "dismiss", "forget", "suggested_members", "suggested_topics"]

log = logging.getLogger("feedfabric.suggestions")

# The contract's SuggestionReason values, in db.suggestions' reason numbers' order (strongest first).
REASONS = ("followed_by_people_you_follow", "similar_engagement", "popular_in_your_topics", "popular")
# The reason shown for each of db.suggestions' reason numbers: ENGAGED (authors whose posts you engage
# with) is shown as similar_engagement, but scaled on its own (an affinity rate is no count of co-likers).
SHOWN = (0, 1, 2, 3, 1)
# Each reason number's weight once its scores are scaled to its best: the members your circle follows,
# the ones liked alongside you and the ones you engage with say most about you, the most followed
# overall least.
WEIGHTS = (1.0, 1.0, 0.7, 0.4, 1.0)
DISMISS_FOR = timedelta(days=30)
# Topics, and members popular in them, are read from the posts of this window (recentPostCount's too).
WINDOW = timedelta(days=7)
# A member following fewer members than this gets the most followed overall among their suggestions.
NEW_MEMBER_FOLLOWS = 10
KEEP = 200
CACHE_SECONDS = 300


@dataclass(frozen=True, slots=True)
class MemberSuggestion:
    member: Member
    reason: str


@dataclass(frozen=True, slots=True)
class TopicSuggestion:
    tag: str
    reason: str
    recent_post_count: int


def combine(found: Sequence[db.Found], keep: int = KEEP) -> list[tuple[str, int]]:
    """The candidates of every reason as one list, best first, each with the reason number that gave
    most to its score (a tie to the stronger reason); ties between candidates by key, so it is
    deterministic."""
    best = [0.0] * len(WEIGHTS)
    for f in found:
        best[f.reason] = max(best[f.reason], f.score)
    parts: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(WEIGHTS))
    for f in found:
        if best[f.reason] > 0:
            parts[f.key][f.reason] += WEIGHTS[f.reason] * f.score / best[f.reason]
    ranked = sorted(parts.items(), key=lambda kv: (-sum(kv[1]), kv[0]))
    return [(key, max(range(len(WEIGHTS)), key=lambda r: (share[r], -r))) for key, share in ranked[:keep]]


def _key(member_id: uuid.UUID, kind: str) -> str:
    """One key per member and kind, the member's ID as hash tag (one Cluster slot)."""
    return f"suggestions:{{{member_id}}}:{kind}"


async def _cached(redis: Any, key: str) -> bytes | None:
    if redis is None:
        return None
    try:
        raw = await redis.get(key)
    except REDIS_FAILURES as error:
        log.warning("suggestions cache unreadable (%s); computing them", type(error).__name__)
        return None
    return raw if isinstance(raw, bytes) else None


async def _cache(redis: Any, key: str, value: bytes) -> None:
    if redis is None:
        return
    try:
        await redis.set(key, value, ex=CACHE_SECONDS)
    except REDIS_FAILURES as error:
        log.warning("suggestions not cached (%s)", type(error).__name__)


async def forget(redis: Any, member_id: uuid.UUID) -> None:
    """Drops the member's cached suggestions: a follow changed what they are made from."""
    if redis is None:
        return
    try:
        await redis.delete(_key(member_id, "members"), _key(member_id, "topics"))  # one slot: one command
    except REDIS_FAILURES as error:
        log.warning("suggestions cache not dropped (%s)", type(error).__name__)


async def suggested_members(
    pool: asyncpg.Pool,
    redis: Any,
    settings: Settings,
    member_id: uuid.UUID,
    limit: int,
    *,
    now: datetime | None = None,
    relations: Relations = NONE,
) -> list[MemberSuggestion]:
    """Up to `limit` members to follow, best first, each with its reason; never one the viewer's
    relations hide (blocked either way, muted: the rule every feed applies to an author)."""
    now = now or datetime.now(UTC)
    dismissed_since = now - DISMISS_FOR
    key = _key(member_id, "members")
    raw = await _cached(redis, key)
    ranked: list[tuple[uuid.UUID, int]] | None = None
    if raw is not None:
        kept = [(uuid.UUID(bytes=raw[n : n + 16]), raw[n + 16]) for n in range(0, len(raw) - 16, 17)]
        shown = await db.still_suggestable(pool, member_id, [m for m, _ in kept], dismissed_since)
        ranked = [(m, r) for m, r in kept if m in shown and not relations.hides_author(m, feed=True)]
        if len(ranked) < limit and len(kept) == KEEP:
            ranked = None  # a full list worn below the page: there may be more to find
    if ranked is None:
        found = await db.member_candidates(
            pool,
            member_id,
            since=now - WINDOW,
            dismissed_since=dismissed_since,
            new_member_follows=NEW_MEMBER_FOLLOWS,
            comment_weight=settings.comment_weight,
        )
        ranked = [(uuid.UUID(k), r) for k, r in combine(found)]
        await _cache(redis, key, b"".join(m.bytes + bytes([r]) for m, r in ranked))
        ranked = [(m, r) for m, r in ranked if not relations.hides_author(m, feed=True)]
    top = ranked[:limit]
    members = await members_db.by_ids(pool, [m for m, _ in top])
    return [MemberSuggestion(members[m], REASONS[SHOWN[r]]) for m, r in top if m in members]


async def suggested_topics(
    pool: asyncpg.Pool,
    redis: Any,
    settings: Settings,
    member_id: uuid.UUID,
    limit: int,
    *,
    now: datetime | None = None,
) -> list[TopicSuggestion]:
    """Up to `limit` tags to follow, best first, each with its reason and its live posts of the window."""
    now = now or datetime.now(UTC)
    key = _key(member_id, "topics")
    raw = await _cached(redis, key)
    ranked: list[tuple[str, int]] | None = None
    if raw is not None:
        kept = [(str(t), int(r)) for t, r in json.loads(raw)]
        followed = await db.followed_tags_among(pool, member_id, [t for t, _ in kept])
        ranked = [(t, r) for t, r in kept if t not in followed]
        if len(ranked) < limit and len(kept) == KEEP:
            ranked = None
    if ranked is None:
        found = await db.topic_candidates(pool, member_id, since=now - WINDOW, comment_weight=settings.comment_weight)
        ranked = combine(found)
        await _cache(redis, key, json.dumps(ranked).encode())
    top = ranked[:limit]
    counts = await db.recent_post_counts(pool, [t for t, _ in top], now - WINDOW)
    return [TopicSuggestion(t, REASONS[SHOWN[r]], counts.get(t, 0)) for t, r in top]


async def dismiss(conn: asyncpg.Connection, member: Member, external_id: str) -> None:
    """Keeps a member out of the viewer's suggestions for DISMISS_FOR; an unknown member is NOT_FOUND."""
    target = await members_svc.target(conn, external_id)
    if target.id == member.id:
        raise BadInput("you cannot dismiss yourself")
    await db.dismiss(conn, member.id, target.id)
