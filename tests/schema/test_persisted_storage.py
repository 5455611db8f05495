"""Persisted-query storage is bounded: only valid documents, within the token cap and a byte bound,
paid for from the rate limit, and an in-process copy bounded in bytes."""

from __future__ import annotations

import hashlib
from typing import Any

import redis.asyncio as aioredis
from feedfabric.core.bytelru import ByteBoundedLRU
from feedfabric.core.settings import Settings
from feedfabric.resources import PERSISTED_QUERY_CACHE_BYTES as LRU_BYTES
from feedfabric.schema import MAX_TOKENS
from feedfabric.schema.documents import MAX_DOCUMENT_CHARS
from feedfabric.schema.persisted import MAX_STORED_BYTES

from tests.schema.test_limits import STEADY_WINDOW, api_with, codes
from tests.support import Api


def pq(query: str) -> dict[str, Any]:
    return {"persistedQuery": {"version": 1, "sha256Hash": hashlib.sha256(query.encode()).hexdigest()}}


async def send(api: Api, payload: dict[str, Any]) -> dict[str, Any]:
    response = await api.client.post("/graphql", json=payload)
    return response.json()  # type: ignore[no-any-return]


async def stored(api: Api, redis: aioredis.Redis, query: str) -> bool:
    """Whether the hash alone now runs (in this process) and whether Redis holds it."""
    by_hash = await send(api, {"extensions": pq(query)})
    in_process = codes(by_hash) != ["PERSISTED_QUERY_NOT_FOUND"]
    in_redis = await redis.exists("pq:" + pq(query)["persistedQuery"]["sha256Hash"]) == 1
    assert in_process == in_redis
    return in_process


async def test_a_valid_document_is_stored(api: Api, redis: aioredis.Redis) -> None:
    query = "{ viewer { id } }"
    assert codes(await send(api, {"query": query, "extensions": pq(query)})) == []
    assert await stored(api, redis, query)


async def test_text_that_is_not_graphql_is_not_stored(api: Api, redis: aioredis.Redis) -> None:
    blob = "x" * 500_000
    body = await send(api, {"query": blob, "extensions": pq(blob)})
    assert codes(body) == ["BAD_USER_INPUT"]
    assert not await stored(api, redis, blob)
    assert await redis.keys("pq:*") == []


async def test_a_document_that_does_not_validate_is_not_stored(api: Api, redis: aioredis.Redis) -> None:
    query = "{ nope { id } }"
    assert codes(await send(api, {"query": query, "extensions": pq(query)})) == ["BAD_USER_INPUT"]
    assert not await stored(api, redis, query)


async def test_a_document_past_the_token_cap_is_not_stored(api: Api, redis: aioredis.Redis) -> None:
    query = "{ " + " ".join(f"a{i}: __typename" for i in range(MAX_TOKENS)) + " }"
    assert codes(await send(api, {"query": query, "extensions": pq(query)})) == ["BAD_USER_INPUT"]
    assert not await stored(api, redis, query)


async def test_a_document_padded_past_the_byte_bound_runs_but_is_not_stored(api: Api, redis: aioredis.Redis) -> None:
    # Comments are not tokens; two bytes a character, past the store's bytes within the document's characters.
    query = "{ __typename }\n#" + "\u00e9" * (MAX_STORED_BYTES // 2)
    assert len(query) <= MAX_DOCUMENT_CHARS < len(query.encode())
    body = await send(api, {"query": query, "extensions": pq(query)})
    assert codes(body) == [] and body["data"] == {"__typename": "Query"}
    assert not await stored(api, redis, query)


async def test_storing_spends_rate_limit_budget(api: Api, settings: Settings) -> None:
    async with api_with(
        settings, rate_limit_operations=100, rate_limit_window_seconds=STEADY_WINDOW, redis_timeout_ms=10_000
    ) as limited:
        query = "{ viewer { id } }"
        registered = await send(limited, {"query": query, "extensions": pq(query)})
        assert registered["extensions"]["rateLimit"]["remaining"] == 98  # one root field, one store
        by_hash = await send(limited, {"extensions": pq(query)})
        assert by_hash["extensions"]["rateLimit"]["remaining"] == 97


async def test_a_client_out_of_budget_stores_nothing(api: Api, settings: Settings, redis: aioredis.Redis) -> None:
    async with api_with(
        settings, rate_limit_operations=2, rate_limit_window_seconds=STEADY_WINDOW, redis_timeout_ms=10_000
    ) as limited:
        await send(limited, {"query": "{ a: __typename b: __typename }"})  # spends the window's 2
        query = "{ viewer { id } }"
        assert codes(await send(limited, {"query": query, "extensions": pq(query)})) == ["RATE_LIMITED"]
        assert await redis.keys("pq:*") == []


def test_the_in_process_copy_is_bounded_in_bytes() -> None:
    lru = ByteBoundedLRU(10_000)
    for i in range(100):
        lru.put(f"{i:064x}", "q" * 936)  # 1,000 bytes with its hash
    assert lru.bytes <= 10_000 and len(lru) == 10
    assert lru.get(f"{99:064x}") is not None and lru.get(f"{0:064x}") is None
    lru.put(f"{99:064x}", "short")  # replacing an entry gives its bytes back
    assert lru.bytes == 9 * 1_000 + 64 + 5
    assert MAX_STORED_BYTES < LRU_BYTES


async def test_an_oversized_text_already_in_redis_is_treated_as_unknown(api: Api, redis: aioredis.Redis) -> None:
    blob = "{ __typename }" + " " * MAX_STORED_BYTES
    await redis.set("pq:" + pq(blob)["persistedQuery"]["sha256Hash"], blob)  # stored by an older version
    assert codes(await send(api, {"extensions": pq(blob)})) == ["PERSISTED_QUERY_NOT_FOUND"]
