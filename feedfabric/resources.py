"""The app's composition root: the process's long-lived state, made once in the app's lifespan.

`feedfabric.app` builds it when the API starts (pools, Redis, the realtime consumer, the background
tasks) and every request reaches it through its context (`feedfabric.resolvers.context.Context`). It
sits beside `app.py` rather than in it because the layers that read it, the resolvers, the API edge, the
adapter and the HTTP app, all sit below the app and may not import it; it holds only what lives below
them (live delivery, the domain, storage, foundations), so it is a layer of its own just above those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import asyncpg
import redis.asyncio as aioredis

from feedfabric.core.auth import TokenCache
from feedfabric.core.bytelru import ByteBoundedLRU
from feedfabric.core.settings import Settings
from feedfabric.db.breaker import CircuitBreaker
from feedfabric.db.replica import ReadRouting
from feedfabric.feeds.feed_log import FeedLog
from feedfabric.feeds.playlist_rebalance import Rebalances
from feedfabric.feeds.ratelimit import LocalWindows
from feedfabric.feeds.relations import RelationsCache
from feedfabric.realtime.hub import Hub
from feedfabric.realtime.sessions import Sessions

if TYPE_CHECKING:
    from feedfabric.core.tracing import Tracing
    from feedfabric.realtime.consumer import RealtimeConsumer

__all__ = ["PERSISTED_QUERY_CACHE_BYTES", "Resources"]


# Persisted-query texts kept in each API process (and their hashes), in bytes.
PERSISTED_QUERY_CACHE_BYTES = 4_000_000


@dataclass
class Resources:
    """Made once in the app's lifespan; the only long-lived state, reached through the context."""

    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis | None = None
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)
    feed_log: FeedLog | None = None
    # DATABASE_READ_URL: which pool a request's reads use (feedfabric.db.replica); None: the primary.
    reads: ReadRouting | None = None
    # The process's live subscribers (feedfabric.realtime.hub) and the consumer that feeds them, if Kafka is set.
    hub: Hub = field(default_factory=Hub)
    realtime_consumer: RealtimeConsumer | None = None
    # Signed-in WebSockets, closed when their token expires or their member is suspended.
    sessions: Sessions = field(default_factory=Sessions)
    # /readyz's last answer: (monotonic time, ready, body), so probes do not each hit every dependency.
    readiness: tuple[float, bool, dict[str, Any]] | None = None
    # Persisted queries by hash, most recently used last (feedfabric.schema.persisted).
    persisted_queries: ByteBoundedLRU = field(default_factory=lambda: ByteBoundedLRU(PERSISTED_QUERY_CACHE_BYTES))
    # This process's tracing (feedfabric.core.tracing), None when off; the dashboard reads its recent traces.
    tracing: Tracing | None = None
    # Members' relations (blocks, mutes, muted words) this process holds, by version (feedfabric.feeds.relations);
    # the realtime consumer forgets a member's on the events of their changes.
    relations: RelationsCache = field(default_factory=RelationsCache)
    # Verified bearer tokens (bounded, never past a token's expiry), so a token is checked once.
    tokens: TokenCache = field(default_factory=TokenCache)
    # This process's share of the rate-limit budgets, counted here only while Redis does not answer.
    rate_windows: LocalWindows = field(default_factory=LocalWindows)
    # Playlist rebalances running in the background after the write that grew the keys.
    rebalances: Rebalances = field(default_factory=Rebalances)
