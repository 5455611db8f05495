"""Per-member rate limits, shared by GraphQL and REST.

Counts live in Redis in a fixed window per member (per client IP when signed
out), so every API replica shares them. GraphQL spends one unit per root field
of an operation (feedfabric.schema.ratelimit); a REST request is one
operation and spends one. If Redis is missing or failing the limiter fails
open: a rate limit is protection, never a reason to take the API down.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from feedfabric import metrics
from feedfabric.errors import RateLimited
from feedfabric.redisclient import Script
from feedfabric.settings import Settings

log = logging.getLogger("feedfabric.ratelimit")

REDIS_PREFIX = "ratelimit:"

# Count and, for a new window, expire it in one command: this runs on every GraphQL
# operation, and a MULTI/INCRBY/EXPIRE/EXEC pipeline costs the client several round trips' CPU.
_COUNT = Script("""
local used = redis.call('INCRBY', KEYS[1], ARGV[1])
if used == tonumber(ARGV[1]) then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return used
""")


@dataclass(frozen=True)
class Allowance:
    """Where a client stands in its window after spending; `refusal` is set past the limit."""

    limit: int
    remaining: int
    reset_seconds: int
    refusal: RateLimited | None

    def as_extension(self) -> dict[str, int]:
        return {"limit": self.limit, "remaining": self.remaining, "resetSeconds": self.reset_seconds}

    def as_headers(self) -> dict[str, str]:
        headers = {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset_seconds),
        }
        if self.refusal is not None:
            headers["Retry-After"] = str(self.reset_seconds)
        return headers


def client_key(member_id: object | None, client_host: str | None) -> str:
    """The member's ID when signed in, else the client address."""
    if member_id is not None:
        return f"m:{member_id}"
    return f"ip:{client_host or 'unknown'}"


async def spend(redis: Any, settings: Settings, client: str, cost: int) -> Allowance | None:
    """Spends `cost` operations of `client`'s window; None when there is no Redis to count in (fail open)."""
    if redis is None:
        return None
    window = settings.rate_limit_window_seconds
    now = time.time()
    key = f"{REDIS_PREFIX}{client}:{int(now // window)}"
    try:
        used = int(await _COUNT(redis, [key], (cost, window + 1)))
    except Exception:  # noqa: BLE001 - fail open
        log.warning("rate limit: Redis unavailable, operation allowed")
        return None
    limit = settings.rate_limit_operations
    reset = max(int(window - now % window), 1)
    refusal = None
    if used > limit:
        metrics.RATE_LIMITED.inc()
        refusal = RateLimited(f"Rate limit of {limit} operations per {window} s exceeded; retry in {reset} s.")
    return Allowance(limit, max(limit - used, 0), reset, refusal)
