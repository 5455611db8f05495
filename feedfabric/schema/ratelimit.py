"""Per-member rate limits that count GraphQL operations, not HTTP requests.

One HTTP request can carry many operations: twenty aliases of a root field, or
a batch of documents. So the unit is the root field: every root field of the
operation that runs (aliases and fragment-spread fields included) counts one,
and each operation of a batch is checked on its own. Counts live in Redis in a
fixed window per member (per client IP when signed out), so every API replica
shares them. If Redis is missing or failing the limiter fails open: a rate
limit is protection, never a reason to take the API down.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from redis.exceptions import NoScriptError
from graphql import DocumentNode, FieldNode, FragmentDefinitionNode, FragmentSpreadNode, InlineFragmentNode, SelectionSetNode, get_operation_ast
from strawberry.extensions import SchemaExtension

from feedfabric import metrics
from feedfabric.errors import RateLimited
from feedfabric.schema.refusal import app_context, refuse

log = logging.getLogger("feedfabric.ratelimit")

REDIS_PREFIX = "ratelimit:"

# Count and, for a new window, expire it in one command: this runs on every GraphQL
# operation, and a MULTI/INCRBY/EXPIRE/EXEC pipeline cost twice the client CPU (~0.2 ms).
_COUNT_LUA = """
local used = redis.call('INCRBY', KEYS[1], ARGV[1])
if used == tonumber(ARGV[1]) then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return used
"""
_COUNT_SHA = hashlib.sha1(_COUNT_LUA.encode()).hexdigest()


async def _count(redis: Any, key: str, cost: int, ttl: int) -> int:
    try:
        return int(await redis.evalsha(_COUNT_SHA, 1, key, cost, ttl))
    except NoScriptError:  # first use on this Redis, or after SCRIPT FLUSH: send the text
        return int(await redis.eval(_COUNT_LUA, 1, key, cost, ttl))


def root_field_count(document: DocumentNode, operation_name: str | None) -> int:
    """Root fields of the selected operation, aliases counted separately; at least 1."""
    operation = get_operation_ast(document, operation_name)
    if operation is None:
        return 1
    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}

    def count(selections: SelectionSetNode, seen: frozenset[str]) -> int:
        total = 0
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                total += 1
            elif isinstance(selection, InlineFragmentNode):
                total += count(selection.selection_set, seen)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                if name in fragments and name not in seen:
                    total += count(fragments[name].selection_set, seen | {name})
        return total

    return max(count(operation.selection_set, frozenset()), 1)


def client_key(context: Any) -> str:
    """The member's ID when signed in, else the client address."""
    member = getattr(getattr(context.viewer_result, "viewer", None), "member", None)
    if member is not None:
        return f"m:{member.id}"
    request = context.request
    client = getattr(request, "client", None)
    return f"ip:{client.host if client else 'unknown'}"


class OperationRateLimit(SchemaExtension):
    """Counts the operation's root fields against the member's window; refuses past the limit."""

    # What get_results reports is fixed once on_execute has run (feedfabric.realtime.live).
    settled_results = True

    def __init__(self) -> None:
        self.status: dict[str, int] | None = None

    async def on_execute(self) -> AsyncIterator[None]:
        ec = self.execution_context
        context = app_context(ec)
        if ec.result is None and ec.graphql_document is not None and context is not None:
            await self._check(context)
        yield

    async def _check(self, context: Any) -> None:
        ec = self.execution_context
        redis = context.resources.redis
        if redis is None:
            return
        settings = context.settings
        window = settings.rate_limit_window_seconds
        now = time.time()
        key = f"{REDIS_PREFIX}{client_key(context)}:{int(now // window)}"
        cost = root_field_count(ec.graphql_document, ec.operation_name)
        try:
            used = await _count(redis, key, cost, window + 1)
        except Exception:  # noqa: BLE001 - fail open
            log.warning("rate limit: Redis unavailable, operation allowed")
            return
        limit = settings.rate_limit_operations
        reset = max(int(window - now % window), 1)
        self.status = {"limit": limit, "remaining": max(limit - int(used), 0), "resetSeconds": reset}
        if int(used) > limit:
            metrics.RATE_LIMITED.inc()
            refuse(ec, RateLimited(
                f"Rate limit of {limit} operations per {window} s exceeded; retry in {reset} s."
            ))

    def get_results(self) -> dict[str, Any]:
        return {"rateLimit": self.status} if self.status is not None else {}
