"""Per-member rate limits, shared by GraphQL and REST.

Counts live in Redis in a fixed window per member (per client IP when signed
out), so every API replica shares them. GraphQL spends one unit per root field
of an operation (feedfabric.schema.ratelimit); a REST request is one
operation and spends one. If Redis is missing or failing the limiter fails
open: a rate limit is protection, never a reason to take the API down.

Operations alone do not bound the work: one operation just under
GRAPHQL_MAX_COST takes a hundred times a feed page's CPU, so a member could
keep an API process busy well within the operation budget. So GraphQL also
spends its query cost (feedfabric.schema.cost) from a second budget of the
same window, RATE_LIMIT_COST, counted in the same key by the same script.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from feedfabric.core import metrics
from feedfabric.core.errors import RateLimited
from feedfabric.core.settings import Settings
from feedfabric.db.redisclient import Script

log = logging.getLogger("feedfabric.ratelimit")

REDIS_PREFIX = "ratelimit:"

# Count both budgets and, for a new window, expire it in one command: this runs on every GraphQL
# operation, and a MULTI/HINCRBY/EXPIRE/EXEC pipeline costs the client several round trips' CPU.
_COUNT = Script("""
local used = redis.call('HINCRBY', KEYS[1], 'ops', ARGV[1])
local cost = redis.call('HINCRBY', KEYS[1], 'cost', ARGV[2])
if used == tonumber(ARGV[1]) then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return {used, cost}
""")


@dataclass(frozen=True)
class Allowance:
    """Where a client stands in its window after spending; `refusal` is set past the limit."""

    limit: int
    remaining: int
    reset_seconds: int
    refusal: RateLimited | None
    cost_limit: int = 0
    cost_remaining: int = 0

    def as_extension(self) -> dict[str, int]:
        return {
            "limit": self.limit,
            "remaining": self.remaining,
            "resetSeconds": self.reset_seconds,
            "costLimit": self.cost_limit,
            "costRemaining": self.cost_remaining,
        }

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


async def spend(redis: Any, settings: Settings, client: str, cost: int, query_cost: int = 0) -> Allowance | None:
    """Spends `cost` operations and `query_cost` of the cost budget from `client`'s window; None when there
    is no Redis to count in (fail open)."""
    if redis is None:
        return None
    window = settings.rate_limit_window_seconds
    now = time.time()
    key = f"{REDIS_PREFIX}{client}:{int(now // window)}"
    try:
        used, spent = (int(n) for n in await _COUNT(redis, [key], (cost, query_cost, window + 1)))
    except Exception:  # noqa: BLE001 - fail open
        log.warning("rate limit: Redis unavailable, operation allowed")
        return None
    limit, cost_limit = settings.rate_limit_operations, settings.rate_limit_cost
    reset = max(int(window - now % window), 1)
    refusal = None
    if used > limit:
        refusal = RateLimited(f"Rate limit of {limit} operations per {window} s exceeded; retry in {reset} s.")
    elif spent > cost_limit:
        refusal = RateLimited(
            f"Rate limit of {cost_limit} query cost per {window} s exceeded; retry in {reset} s, "
            "or ask for fewer items (`first`)."
        )
    if refusal is not None:
        metrics.RATE_LIMITED.inc()
    return Allowance(limit, max(limit - used, 0), reset, refusal, cost_limit, max(cost_limit - spent, 0))
