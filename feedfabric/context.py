"""The app's lifespan resources and the per-request context built on them."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import asyncpg
import redis.asyncio as aioredis

from feedfabric.breaker import CircuitBreaker
from feedfabric.db.loaders import Loaders, make_loaders
from feedfabric.feeds.feed_log import FeedLog
from feedfabric.feeds.viewer import Viewer, ViewerResult
from feedfabric.realtime.hub import Hub
from feedfabric.realtime.rights import Sessions
from feedfabric.settings import Settings

if TYPE_CHECKING:
    from feedfabric.realtime.consumer import RealtimeConsumer


@dataclass
class Resources:
    """Made once in the app's lifespan; the only long-lived state, reached through the context."""

    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis | None = None
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)
    feed_log: FeedLog | None = None
    # The process's live subscribers (feedfabric.realtime.hub) and the consumer that feeds them, if Kafka is set.
    hub: Hub = field(default_factory=Hub)
    realtime_consumer: RealtimeConsumer | None = None
    # Signed-in WebSockets, closed when their token expires or their member is suspended.
    sessions: Sessions = field(default_factory=Sessions)
    # /readyz's last answer: (monotonic time, ready, body), so probes do not each hit every dependency.
    readiness: tuple[float, bool, dict[str, Any]] | None = None
    # Persisted queries by hash, most recently used last (feedfabric.schema.persisted).
    persisted_queries: OrderedDict[str, str] = field(default_factory=OrderedDict)


@dataclass
class Context:
    """Per request, or per WebSocket: then it lives as long as the socket, through many events.

    Loaders are made on first use, not with the context: a socket holding an
    idle subscription never needs any, and an event whose rendering is shared
    with other subscribers (feedfabric.realtime.render) never touches them.
    """

    resources: Resources
    viewer_result: ViewerResult
    request: Any = None
    response: Any = None
    connection_params: dict[str, Any] | None = None
    _loaders: Loaders | None = field(default=None, repr=False)
    _prime: Callable[[Loaders], None] | None = field(default=None, repr=False)

    @property
    def viewer(self) -> Viewer:
        return self.viewer_result.get()

    @property
    def settings(self) -> Settings:
        return self.resources.settings

    @property
    def pool(self) -> asyncpg.Pool:
        return self.resources.pool

    @property
    def loaders(self) -> Loaders:
        if self._loaders is None:
            member = self.viewer_result.viewer.member
            self._loaders = make_loaders(self.pool, member.id if member else None)
            if self._prime is not None:
                self._prime(self._loaders)
                self._prime = None
        return self._loaders

    def reset_loaders(self, prime: Callable[[Loaders], None] | None = None) -> None:
        """A subscription sends many events over one socket: each gets loaders of its own (made when first
        used, then filled by `prime`), so nothing is cached across events or viewers."""
        self._loaders = None
        self._prime = prime


def build_context(resources: Resources, viewer_result: ViewerResult, **kwargs: Any) -> Context:
    return Context(resources=resources, viewer_result=viewer_result, **kwargs)
