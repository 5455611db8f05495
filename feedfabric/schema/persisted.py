"""Automatic persisted queries: Apollo's `persistedQuery` extension with a sha256 hash.

A client sends `extensions: {persistedQuery: {version: 1, sha256Hash}}` without
the query; a known hash runs the stored text, an unknown one answers
PERSISTED_QUERY_NOT_FOUND and the client retries once with the query, which is
then stored. Repeated operations then cost a hash on the wire, and because the
text is identical every time the parser and validation caches always hit.

Two steps, each where it belongs:

- Looking a hash up happens before Strawberry sees the request
  (`resolve_request`, called by the HTTP endpoint, feedfabric.adapter.graphql_http): the
  stored text becomes the request's query, so the operation is parsed,
  validated and run as if it had been sent; an unknown hash never reaches the
  schema. Persisted queries are an HTTP feature (the socket protocols always
  carry the query).
- Registering a text happens only once its operation has parsed (under the
  same token cap as any query) and validated, and has spent one unit of the
  client's rate limit (`Registration`, from feedfabric.schema.operation's
  `on_execute`). Texts over MAX_STORED_BYTES run but are not stored, so a
  document padded with comments cannot make a large entry.

Texts live in Redis (shared by every API replica, `pq:<hash>` with
PERSISTED_QUERY_TTL_SECONDS) with an in-process LRU beside it bounded in bytes
(feedfabric.resources.PERSISTED_QUERY_CACHE_BYTES), so registration keeps working while Redis is down; the LRU sits
in the app's Resources, not in this module.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from typing import Any

from strawberry.http import GraphQLRequestData
from strawberry.types import ExecutionContext

from feedfabric.core.bytelru import ByteBoundedLRU
from feedfabric.core.errors import BadInput, FeedFabricError
from feedfabric.feeds import ratelimit
from feedfabric.resolvers.context import Context

__all__ = ["MAX_STORED_BYTES", "resolve_request"]

log = logging.getLogger("feedfabric.persisted")

# A stored text: the longest a document within the token cap (feedfabric.schema.documents.MAX_TOKENS, 2,000)
# reasonably is, at ten bytes a token.
MAX_STORED_BYTES = 20_000
REDIS_PREFIX = "pq:"
EXTENSION = "persistedQuery"
_HASH = re.compile(r"^[0-9a-f]{64}$")


class PersistedQueryNotFound(FeedFabricError):
    code = "PERSISTED_QUERY_NOT_FOUND"
    rest_code = "query.persisted_not_found"
    status = 200


def query_hash(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


class PersistedQueryStore:
    """Redis first, the local LRU as fallback and for whatever Redis could not take."""

    def __init__(self, redis: Any | None, ttl_seconds: int, lru: ByteBoundedLRU) -> None:
        self.redis = redis
        self.ttl_seconds = ttl_seconds
        self.lru = lru

    async def get(self, sha: str) -> str | None:
        text = self.lru.get(sha)
        if text is not None:
            return text
        if self.redis is not None:
            try:
                raw = await self.redis.get(REDIS_PREFIX + sha)
            except Exception:  # noqa: BLE001 - Redis is an accelerator; the client will resend the text
                log.warning("persisted queries: Redis unavailable for lookup")
                return None
            # Longer texts were stored before the bound: treated as unknown, never kept in process.
            if raw is not None and len(raw) <= MAX_STORED_BYTES:
                text = raw.decode() if isinstance(raw, bytes) else str(raw)
                self.lru.put(sha, text)
                return text
        return None

    async def put(self, sha: str, query: str) -> None:
        self.lru.put(sha, query)
        if self.redis is not None:
            try:
                await self.redis.set(REDIS_PREFIX + sha, query, ex=self.ttl_seconds)
            except Exception:  # noqa: BLE001
                log.warning("persisted queries: Redis unavailable for store; kept locally")


def store_for(context: Context) -> PersistedQueryStore:
    resources = context.resources
    lru = resources.persisted_queries
    return PersistedQueryStore(resources.redis, resources.settings.persisted_query_ttl_seconds, lru)


def _requested_hash(persisted: Any) -> str:
    if not isinstance(persisted, dict) or persisted.get("version") != 1:
        raise BadInput("Unsupported persistedQuery: expected {version: 1, sha256Hash}.")
    sha = persisted.get("sha256Hash")
    if not isinstance(sha, str) or not _HASH.match(sha):
        raise BadInput("persistedQuery.sha256Hash must be 64 lowercase hex digits.")
    return sha


async def resolve_request(context: Context, request: GraphQLRequestData) -> GraphQLRequestData:
    """The request with its stored text as the query, for a hash sent without one.

    Raises PersistedQueryNotFound for an unknown hash and BadInput for a malformed extension. A request
    carrying its query is returned as it is (registration happens after validation). The resolved
    request no longer carries the extension, so running it registers nothing.
    """
    extensions = request.extensions or {}
    if EXTENSION not in extensions or request.query:
        return request
    sha = _requested_hash(extensions[EXTENSION])
    text = await store_for(context).get(sha)
    if text is None:
        raise PersistedQueryNotFound("PersistedQueryNotFound")
    rest = {k: v for k, v in extensions.items() if k != EXTENSION}
    return dataclasses.replace(request, query=text, extensions=rest)


@dataclasses.dataclass(frozen=True)
class Registration:
    """A query sent with its hash, to be stored once its operation has validated."""

    sha: str
    query: str

    @classmethod
    def requested(cls, execution_context: ExecutionContext) -> Registration | None:
        """The registration the operation asks for; BadInput for a malformed extension or a hash that
        is not the query's."""
        ec = execution_context
        extensions = ec.operation_extensions or {}
        if EXTENSION not in extensions or not ec.query:
            return None
        sha = _requested_hash(extensions[EXTENSION])
        if query_hash(ec.query) != sha:
            raise BadInput("provided sha does not match query")
        return cls(sha, ec.query)

    async def store(self, context: Any) -> FeedFabricError | None:
        """Spends one operation of the client's rate limit, then stores the text (unless too long).
        Returns the rate limit's refusal instead, storing nothing."""
        viewer = getattr(context.viewer_result, "viewer", None)
        member = getattr(viewer, "member", None)
        client = getattr(context.request, "client", None)
        allowance = await ratelimit.spend(
            context.resources.redis,
            context.settings,
            context.resources.rate_windows,
            ratelimit.client_key(member.id if member else None, client.host if client else None),
            1,
        )
        if allowance is not None and allowance.refusal is not None:
            return allowance.refusal
        if len(self.query.encode("utf-8")) <= MAX_STORED_BYTES:
            await store_for(context).put(self.sha, self.query)
        return None
