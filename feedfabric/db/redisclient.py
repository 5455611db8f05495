"""The one place a Redis client is made: one server, or a Redis Cluster when REDIS_CLUSTER is on.

Everything else takes the client it is given. Every key the system writes is
used by single-key commands (or a script or transaction on one key), so the
same calls work on both; the few places that batch many keys at once
(`timelines.push`, verify) pipeline per node on a cluster.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from feedfabric.core.settings import Settings

__all__ = ["REDIS_ERRORS", "REDIS_FAILURES", "Script", "create_redis", "is_cluster"]

# What a failing Redis raises: the cluster client's own errors (no node reachable, a slot no node
# serves) are not RedisErrors.
REDIS_ERRORS: tuple[type[Exception], ...] = (RedisError, RedisClusterException)
# ... and a Redis that is unreachable or too slow: what a caller falls back from.
REDIS_FAILURES: tuple[type[Exception], ...] = (*REDIS_ERRORS, OSError, TimeoutError)


def create_redis(settings: Settings, *, url: str | None = None, timeout_ms: int | None = None, **options: Any) -> Any:
    """A client for REDIS_URL (or `url`); on a cluster that URL names any one node, the rest are discovered.

    `timeout_ms` bounds connecting and each command (the API's reads must fail fast and fall back).
    Typed Any: redis-py's two clients share their commands but no declared type.
    """
    target = url or settings.redis_url
    if not target:
        raise ValueError("REDIS_URL is not set")
    if timeout_ms is not None:
        options.setdefault("socket_timeout", timeout_ms / 1000)
        options.setdefault("socket_connect_timeout", timeout_ms / 1000)
    if settings.redis_cluster:
        if timeout_ms is not None:
            # redis-py's cluster default backs off for seconds between retries; a request would wait them
            # all for a node that is down. One quick retry still follows a failover's new owner.
            options.setdefault("retry", Retry(ExponentialBackoff(cap=timeout_ms / 1000, base=0.01), 1))
        # Cluster URLs carry no database; a node that is down fails its own slots' commands only.
        return RedisCluster.from_url(target.rpartition("/")[0] if _has_db(target) else target, **options)
    return aioredis.from_url(target, **options)


def is_cluster(redis: object) -> bool:
    return isinstance(redis, RedisCluster)


def _has_db(url: str) -> bool:
    tail = url.split("://", 1)[-1]
    return "/" in tail and tail.rsplit("/", 1)[1].isdigit()


@dataclass(frozen=True)
class Script:
    """A Lua script sent by its hash, and by its text only when the server does not know it yet (first
    use, a restart, SCRIPT FLUSH): one round trip either way, on a server or on the slot of its keys."""

    source: str

    @cached_property
    def sha(self) -> str:
        return hashlib.sha1(self.source.encode()).hexdigest()

    async def __call__(self, redis: Any, keys: Sequence[str], args: Sequence[bytes | str | int | float]) -> Any:
        try:
            return await redis.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await redis.eval(self.source, len(keys), *keys, *args)
