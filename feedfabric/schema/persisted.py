"""Automatic persisted queries: Apollo's `persistedQuery` extension with a sha256 hash.

A client sends `extensions: {persistedQuery: {version: 1, sha256Hash}}` without
the query; a known hash runs the stored text, an unknown one answers
PERSISTED_QUERY_NOT_FOUND and the client retries once with the query, which is
then stored. Repeated operations then cost a hash on the wire, and because the
text is identical every time the parser and validation caches always hit.

Texts live in Redis (shared by every API replica) with an in-process LRU
beside it, so registration keeps working while Redis is down; the LRU sits in
the app's Resources, not in this module. Applied by feedfabric.schema.operation.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import OrderedDict
from typing import Any

from strawberry.types import ExecutionContext

from feedfabric.errors import BadInput, FeedFabricError
from feedfabric.schema.refusal import app_context

log = logging.getLogger("feedfabric.persisted")

LRU_SIZE = 1000
REDIS_PREFIX = "pq:"
_HASH = re.compile(r"^[0-9a-f]{64}$")
# Parsed and validated in place of the missing query, so the refusal is answered from on_execute.
_PLACEHOLDER = "query PersistedQueryNotFound { __typename }"


class PersistedQueryNotFound(FeedFabricError):
    code = "PERSISTED_QUERY_NOT_FOUND"
    rest_code = "query.persisted_not_found"
    status = 200


def query_hash(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


class PersistedQueryStore:
    """Redis first, the local LRU as fallback and for whatever Redis could not take."""

    def __init__(self, redis: Any | None, ttl_seconds: int, lru: OrderedDict[str, str]) -> None:
        self.redis = redis
        self.ttl_seconds = ttl_seconds
        self.lru = lru

    async def get(self, sha: str) -> str | None:
        if sha in self.lru:
            self.lru.move_to_end(sha)
            return self.lru[sha]
        if self.redis is not None:
            try:
                raw = await self.redis.get(REDIS_PREFIX + sha)
            except Exception:  # noqa: BLE001 - Redis is an accelerator; the client will resend the text
                log.warning("persisted queries: Redis unavailable for lookup")
                return None
            if raw is not None:
                text = raw.decode() if isinstance(raw, bytes) else str(raw)
                self._remember(sha, text)
                return text
        return None

    async def put(self, sha: str, query: str) -> None:
        self._remember(sha, query)
        if self.redis is not None:
            try:
                await self.redis.set(REDIS_PREFIX + sha, query, ex=self.ttl_seconds)
            except Exception:  # noqa: BLE001
                log.warning("persisted queries: Redis unavailable for store; kept locally")

    def _remember(self, sha: str, query: str) -> None:
        self.lru[sha] = query
        self.lru.move_to_end(sha)
        while len(self.lru) > LRU_SIZE:
            self.lru.popitem(last=False)


def store_for(context: Any) -> PersistedQueryStore:
    resources = context.resources
    lru = resources.persisted_queries
    return PersistedQueryStore(resources.redis, resources.settings.persisted_query_ttl_seconds, lru)


async def resolve_persisted_query(execution_context: ExecutionContext) -> FeedFabricError | None:
    """Puts the text of `extensions.persistedQuery` in place of the missing query, before parsing.

    Returns the refusal to answer instead (an unknown hash, a malformed request); the query is then
    a placeholder that parses and validates, and the caller refuses the operation from `on_execute`.
    """
    ec = execution_context
    persisted = (ec.operation_extensions or {}).get("persistedQuery")
    context = app_context(ec)
    if persisted is None or context is None:
        return None
    refusal = await _resolve(ec, persisted, store_for(context))
    if refusal is not None:
        ec.query = _PLACEHOLDER
        ec.graphql_document = None
        # The client's operationName names an operation the placeholder does not have.
        ec._provided_operation_name = None  # noqa: SLF001
    return refusal


async def _resolve(ec: ExecutionContext, persisted: Any, store: PersistedQueryStore) -> FeedFabricError | None:
    if not isinstance(persisted, dict) or persisted.get("version") != 1:
        return BadInput("Unsupported persistedQuery: expected {version: 1, sha256Hash}.")
    sha = persisted.get("sha256Hash")
    if not isinstance(sha, str) or not _HASH.match(sha):
        return BadInput("persistedQuery.sha256Hash must be 64 lowercase hex digits.")
    if ec.query:
        if query_hash(ec.query) != sha:
            return BadInput("provided sha does not match query")
        await store.put(sha, ec.query)
        return None
    text = await store.get(sha)
    if text is None:
        return PersistedQueryNotFound("PersistedQueryNotFound")
    ec.query = text
    return None
