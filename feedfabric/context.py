"""The app's lifespan resources and the per-request context built on them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import asyncpg
import redis.asyncio as aioredis

from feedfabric.breaker import CircuitBreaker
from feedfabric.db.loaders import Loaders, make_loaders
from feedfabric.feeds.feedlog import FeedLog
from feedfabric.feeds.viewer import Viewer, ViewerResult
from feedfabric.settings import Settings


@dataclass
class Resources:
    """Made once in the app's lifespan; the only long-lived state, reached through the context."""

    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis | None = None
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)
    feed_log: FeedLog | None = None
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    resources: Resources
    viewer_result: ViewerResult
    loaders: Loaders
    request: Any = None
    response: Any = None
    connection_params: dict[str, Any] | None = None

    @property
    def viewer(self) -> Viewer:
        return self.viewer_result.get()

    @property
    def settings(self) -> Settings:
        return self.resources.settings

    @property
    def pool(self) -> asyncpg.Pool:
        return self.resources.pool

    def fresh_loaders(self) -> Loaders:
        """A subscription sends many events over one socket: each gets loaders of its own."""
        member = self.viewer_result.viewer.member
        return make_loaders(self.pool, member.id if member else None)


def build_context(resources: Resources, viewer_result: ViewerResult, **kwargs: Any) -> Context:
    member = viewer_result.viewer.member
    return Context(
        resources=resources,
        viewer_result=viewer_result,
        loaders=make_loaders(resources.pool, member.id if member else None),
        **kwargs,
    )
