"""The rate limit never fails open: a Redis that does not answer in time leaves each process its share."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis
from feedfabric.core import metrics
from feedfabric.core.settings import Settings
from feedfabric.db.redisclient import create_redis
from feedfabric.feeds import ratelimit


def _fallbacks() -> float:
    return metrics.RATE_LIMIT_FALLBACKS._value.get()


async def test_a_redis_too_slow_to_answer_leaves_the_process_share_of_the_budget(
    settings: Settings, redis: aioredis.Redis
) -> None:
    """Redis is up but paused (as a busy event loop makes its answers late): the calls time out, and
    each instance allows its share of the window, not everything."""
    settings = settings.model_copy(
        update={
            "rate_limit_operations": 6,
            "rate_limit_instances": 3,
            "rate_limit_window_seconds": 3_600,
            "redis_timeout_ms": 100,
        }
    )
    client = create_redis(settings, timeout_ms=settings.redis_timeout_ms)  # as the API makes it
    try:
        member = "m:slow-redis-member"
        windows = ratelimit.LocalWindows()
        answered = await ratelimit.spend(client, settings, windows, member, 1)
        assert answered is not None and answered.limit == 6  # Redis answers: the whole budget
        before = _fallbacks()
        await redis.execute_command("CLIENT", "PAUSE", 2_000, "ALL")
        outcomes = []
        for _ in range(3):
            allowance = await ratelimit.spend(client, settings, windows, member, 1)
            assert allowance is not None, "the limit failed open"
            outcomes.append(allowance.refusal is None)
        assert outcomes == [True, True, False]  # a share of 6 / 3 = 2 operations per window
        assert _fallbacks() == before + 3
    finally:
        await _unpaused(settings.redis_url)
        await client.aclose()


async def _unpaused(url: str) -> None:
    """Waits for the pause to end: a client without a timeout gets its PING answered once it has."""
    waiting = aioredis.from_url(url)
    try:
        await asyncio.wait_for(waiting.ping(), 10)
    finally:
        await waiting.aclose()
