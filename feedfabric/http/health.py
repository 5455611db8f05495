"""Readiness: Postgres, Redis and the broker, each reported on its own.

Only Postgres decides readiness. Redis is an accelerator (reads fall back to
Postgres) and the API never produces to Kafka (the relay does), so an API
without either still serves correctly; taking it out of the load balancer
would turn a degradation into an outage. Both are reported so operators see
them. Results are cached for a second so a probe storm cannot become a
database storm; the cache lives in the app's Resources, not in the module.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import Response

from feedfabric.core import metrics
from feedfabric.db.gauges import refresh_from_postgres, refresh_from_redis
from feedfabric.resources import Resources

__all__ = ["check", "metrics_endpoint"]

CACHE_SECONDS = 1.0


async def _postgres(resources: Resources) -> str:
    try:
        async with asyncio.timeout(resources.settings.readiness_check_timeout_seconds):
            await resources.pool.fetchval("SELECT 1")
        return "ok"
    except Exception:  # noqa: BLE001 - readiness reports, it never raises
        return "down"


async def _redis(resources: Resources) -> str:
    if resources.redis is None:
        return "not configured"
    try:
        async with asyncio.timeout(resources.settings.readiness_check_timeout_seconds):
            await resources.redis.ping()
        return "ok"
    except Exception:  # noqa: BLE001
        return "down"


async def _broker(bootstrap: str | None, timeout: float) -> str:
    """A TCP connect to any bootstrap server: cheap, and enough to tell 'unreachable' from 'up'."""
    if not bootstrap:
        return "not configured"
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit():
            continue
        try:
            async with asyncio.timeout(timeout):
                _, writer = await asyncio.open_connection(host, int(port))
            writer.close()
            try:
                await writer.wait_closed()
            except Exception:  # noqa: BLE001
                pass
            return "ok"
        except Exception:  # noqa: BLE001
            continue
    return "down"


async def check(resources: Resources) -> tuple[bool, dict[str, Any]]:
    """(ready, body) for /readyz; at most one real check per second per process."""
    cached = resources.readiness
    now = time.monotonic()
    if cached is not None and now - cached[0] < CACHE_SECONDS:
        return cached[1], cached[2]
    postgres, redis, broker = await asyncio.gather(
        _postgres(resources),
        _redis(resources),
        _broker(resources.settings.kafka_bootstrap_servers, resources.settings.readiness_check_timeout_seconds),
    )
    checks = {"postgres": postgres, "redis": redis, "broker": broker}
    ready = postgres == "ok"
    degraded = any(v == "down" for v in (redis, broker))
    body = {
        "ready": ready,
        "status": "degraded" if ready and degraded else ("ok" if ready else "down"),
        "checks": checks,
    }
    resources.readiness = (now, ready, body)
    return ready, body


async def metrics_endpoint(request: Request) -> Response:
    """GET /metrics on the API: the default registry, after refreshing the gauges read at scrape."""
    resources = getattr(request.app.state, "resources", None)
    if resources is not None:
        await refresh_from_postgres(resources.pool)
        if resources.redis is not None:
            await refresh_from_redis(resources.redis)
        metrics.REALTIME_SUBSCRIBERS.set(resources.hub.subscriber_count())
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
