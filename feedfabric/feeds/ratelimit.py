"""Per-member rate limits, shared by GraphQL and REST.

Counts live in Redis in a fixed window per member (per client IP when signed
out), so every API replica shares them. GraphQL spends one unit per root field
of an operation (feedfabric.schema.ratelimit); a REST request is one
operation and spends one. When Redis does not answer in time (it is down, or
the event loop is so busy that the call misses REDIS_TIMEOUT_MS: 1,000 sockets
connecting at once did that), the limit does not fail open, or anyone who can
make the loop lag could switch it off: the process counts the same windows
itself (`LocalWindows`), each instance allowing its share of the budgets
(divided by RATE_LIMIT_INSTANCES), and counts the fallback in
feedfabric_rate_limit_fallbacks_total. Without Redis configured at all there
is no limit (development). A rate limit is protection, never a reason to take
the API down: Redis failing refuses nobody by itself.

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

__all__ = ["BYTES_PER_UNIT", "Allowance", "LocalWindows", "client_key", "spend"]

log = logging.getLogger("feedfabric.ratelimit")

REDIS_PREFIX = "ratelimit:"
BYTES_PER_UNIT = 10
"""A refused request spends a unit of the cost budget per this many bytes it made the server read (its
GraphQL variables, its REST body): refusing a megabyte is work, and must not cost one operation."""

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


class LocalWindows:
    """This process's own count of the current window, per client: used only when Redis does not answer.
    A new window starts every count over, and at most `max_clients` clients are kept (past it the counts
    start over too: a flood of new client keys cannot grow the process)."""

    def __init__(self, max_clients: int = 100_000) -> None:
        self.max_clients = max_clients
        self.window = -1
        self.counts: dict[str, list[int]] = {}

    def spend(self, client: str, window: int, cost: int, query_cost: int) -> tuple[int, int]:
        if window != self.window or (client not in self.counts and len(self.counts) >= self.max_clients):
            self.window = window
            self.counts.clear()
        counted = self.counts.setdefault(client, [0, 0])
        counted[0] += cost
        counted[1] += query_cost
        return counted[0], counted[1]


def client_key(member_id: object | None, client_host: str | None) -> str:
    """The member's ID when signed in, else the client address."""
    if member_id is not None:
        return f"m:{member_id}"
    return f"ip:{client_host or 'unknown'}"


async def spend(  # noqa: PLR0913, PLR0917
    redis: Any, settings: Settings, fallback: LocalWindows, client: str, cost: int, query_cost: int = 0
) -> Allowance | None:
    """Spends `cost` operations and `query_cost` of the cost budget from `client`'s window; None when no
    Redis is configured. When Redis does not answer, the process's share of the budgets is spent instead, from
    `fallback` (Resources.rate_windows)."""
    if redis is None:
        return None
    window = settings.rate_limit_window_seconds
    now = time.time()
    number = int(now // window)
    key = f"{REDIS_PREFIX}{client}:{number}"
    limit, cost_limit = settings.rate_limit_operations, settings.rate_limit_cost
    try:
        used, spent = (int(n) for n in await _COUNT(redis, [key], (cost, query_cost, window + 1)))
    except Exception:  # noqa: BLE001 - counted in process instead, never let through uncounted
        metrics.RATE_LIMIT_FALLBACKS.inc()
        if fallback.window != number:  # once a window, not once a request: a slow Redis would flood the log
            log.warning("rate limit: Redis did not answer; this process counts its share of the budget")
        used, spent = fallback.spend(client, number, cost, query_cost)
        shares = settings.rate_limit_instances
        limit, cost_limit = max(limit // shares, 1), max(cost_limit // shares, 1)
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
