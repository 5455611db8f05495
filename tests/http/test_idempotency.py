"""Idempotency-Key: a retried write is done once and answered alike; the key is the member's own."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import httpx
import redis.asyncio as aioredis
from feedfabric.core.settings import Settings
from feedfabric.ops.devstack import free_port

from tests.rest.test_media_api import jpeg
from tests.schema.test_limits import STEADY_WINDOW, api_with
from tests.support import Api

CREATE = "mutation($c: String!) { createPost(input: {content: $c}) { id content } }"


async def create(api: Api, token: str, key: str, content: str = "only once") -> httpx.Response:
    return await api.client.post(
        "/graphql",
        json={"query": CREATE, "variables": {"c": content}},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key},
    )


async def posts(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM posts"))


def code(response: httpx.Response) -> Any:
    return response.json()["errors"][0]["extensions"]["code"]


async def test_a_retried_post_is_made_once_and_answered_alike(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    first, retry = await create(api, maya, "k-1"), await create(api, maya, "k-1")
    assert retry.json() == first.json() and first.json()["data"]["createPost"]["content"] == "only once"
    assert retry.headers["idempotent-replayed"] == "true" and "idempotent-replayed" not in first.headers
    assert await posts(pool) == 1
    await create(api, maya, "k-2")
    assert await posts(pool) == 2


async def test_a_retry_serialised_afresh_is_the_same_request(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    headers = {"Authorization": f"Bearer {maya}", "Idempotency-Key": "k", "Content-Type": "application/json"}
    bodies = (
        json.dumps({"query": CREATE, "variables": {"c": "once"}}),
        json.dumps({"variables": {"c": "once"}, "query": CREATE}, indent=2),
    )
    first, retry = [await api.client.post("/graphql", content=body, headers=headers) for body in bodies]
    assert retry.headers["idempotent-replayed"] == "true" and retry.json() == first.json()
    assert await posts(pool) == 1


async def test_concurrent_retries_make_one_post(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    answers = await asyncio.gather(*(create(api, maya, "burst") for _ in range(10)))
    assert await posts(pool) == 1
    for answer in answers:
        if answer.status_code == 409:
            assert code(answer) == "CONFLICT" and answer.headers["retry-after"] == "1"
        else:
            assert answer.json() == answers[0].json() or answers[0].status_code == 409


async def test_a_key_used_for_another_request_is_refused(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    await create(api, maya, "k", "first")
    other = await create(api, maya, "k", "second")
    assert (other.status_code, code(other)) == (422, "BAD_USER_INPUT")
    assert await posts(pool) == 1


async def test_keys_are_each_members_own(api: Api, pool: asyncpg.Pool) -> None:
    maya, sam = await api.member("maya"), await api.member("sam")
    mine, theirs = await create(api, maya, "same"), await create(api, sam, "same")
    assert mine.json() != theirs.json() and "idempotent-replayed" not in theirs.headers
    assert await posts(pool) == 2


async def test_a_rate_limited_attempt_is_not_kept_so_its_retry_runs(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    async with api_with(settings, rate_limit_operations=1, rate_limit_window_seconds=STEADY_WINDOW) as api:
        maya = await api.member("maya")
        await api.raw("{ viewer { username } }", token=maya)  # the window's one operation, if it is left
        refused = await create(api, maya, "later")
        assert code(refused) == "RATE_LIMITED" and await posts(pool) == 0
        await redis.delete(*[key async for key in redis.scan_iter("ratelimit:*")])
        retried = await create(api, maya, "later")
        assert retried.json()["data"]["createPost"]["content"] == "only once" and await posts(pool) == 1


async def test_a_retried_upload_makes_one_media_item(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    headers = {"Authorization": f"Bearer {maya}", "Idempotency-Key": "photo-1"}
    photo = jpeg()
    first = await api.client.post("/media", headers=headers, files={"file": ("p.jpg", photo, "image/jpeg")})
    retry = await api.client.post("/media", headers=headers, files={"file": ("p.jpg", photo, "image/jpeg")})
    assert first.status_code < 300 and retry.json() == first.json()
    assert await pool.fetchval("SELECT count(*) FROM media") == 1


async def test_a_key_that_is_not_visible_ascii_or_too_long_is_refused(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    for key in ("x" * 256, "caf\u00e9".encode(), " "):
        refused = await create(api, maya, key)
        assert (refused.status_code, code(refused)) == (400, "BAD_USER_INPUT"), key
    follow = await api.client.put(
        "/follows/maya", headers={"Authorization": f"Bearer {maya}", "Idempotency-Key": "x" * 256}
    )
    assert (follow.status_code, follow.json()["error"]["code"]) == (400, "request.invalid")
    assert await posts(pool) == 0


async def test_without_redis_a_write_with_a_key_still_runs(settings: Settings, pool: asyncpg.Pool) -> None:
    async with api_with(settings, redis_url=f"redis://127.0.0.1:{free_port()}/0") as api:
        maya = await api.member("maya")
        assert (await create(api, maya, "k")).json()["data"]["createPost"]["content"] == "only once"
    assert await posts(pool) == 1


async def test_a_retried_bodiless_write_is_answered_from_the_kept_answer(api: Api) -> None:
    maya, _ = await api.member("maya"), await api.member("sam")
    headers = {"Authorization": f"Bearer {maya}", "Idempotency-Key": "follow-sam"}
    first = await api.client.put("/follows/sam", headers=headers)
    retry = await api.client.put("/follows/sam", headers=headers)
    assert first.status_code == 200 and retry.json() == first.json()
    assert retry.headers["idempotent-replayed"] == "true"


def deep_body(depth: int) -> str:
    return json.dumps({"query": CREATE, "variables": {"c": "deep"}})[:-1] + ', "x": ' + "[" * depth + "]" * depth + "}"


async def test_a_deeply_nested_body_is_refused_in_json_and_its_retry_replays_the_refusal(
    api: Api, pool: asyncpg.Pool
) -> None:
    maya = await api.member("maya")
    headers = {"Authorization": f"Bearer {maya}", "Idempotency-Key": "deep", "Content-Type": "application/json"}
    first = await api.client.post("/graphql", content=deep_body(10_000), headers=headers)
    retry = await api.client.post("/graphql", content=deep_body(10_000), headers=headers)
    assert (first.status_code, code(first)) == (400, "BAD_USER_INPUT")
    assert retry.headers["idempotent-replayed"] == "true" and retry.json() == first.json()
    assert await posts(pool) == 0


async def test_a_body_nested_past_what_the_fingerprint_reads_is_compared_byte_for_byte(
    api: Api, pool: asyncpg.Pool
) -> None:
    maya = await api.member("maya")
    headers = {"Authorization": f"Bearer {maya}", "Idempotency-Key": "nested", "Content-Type": "application/json"}
    first = await api.client.post("/graphql", content=deep_body(600), headers=headers)
    retry = await api.client.post("/graphql", content=deep_body(600), headers=headers)
    assert first.status_code == 200 and first.json()["data"]["createPost"]["content"] == "deep"
    assert retry.headers["idempotent-replayed"] == "true" and retry.json() == first.json()
    other = await api.client.post("/graphql", content=deep_body(601), headers=headers)
    assert (other.status_code, code(other)) == (422, "BAD_USER_INPUT")
    assert await posts(pool) == 1


def multipart(query: str, variables: dict[str, Any], photo: bytes) -> dict[str, Any]:
    """A GraphQL multipart request (the form Apollo's upload link sends), its file mapped to `$file`."""
    return {
        "data": {
            "operations": json.dumps({"query": query, "variables": {**variables, "file": None}}),
            "map": json.dumps({"0": ["variables.file"]}),
        },
        "files": {"0": ("p.jpg", photo, "image/jpeg")},
    }


UPLOAD = "mutation($file: Upload!) { uploadMedia(file: $file) { id } }"
DELETE = "mutation($id: ID!, $file: Upload) { deletePost(id: $id) }"


async def test_a_multipart_retry_is_the_same_request_whatever_its_boundary(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    headers = {"Authorization": f"Bearer {maya}", "Idempotency-Key": "upload-1"}
    photo = jpeg()
    first = await api.client.post("/graphql", headers=headers, **multipart(UPLOAD, {}, photo))
    retry = await api.client.post("/graphql", headers=headers, **multipart(UPLOAD, {}, photo))
    assert retry.headers["idempotent-replayed"] == "true" and retry.json() == first.json()
    assert await pool.fetchval("SELECT count(*) FROM media") == 1


async def test_a_multipart_request_under_a_used_key_is_compared_by_operation_variables_and_files(
    api: Api, pool: asyncpg.Pool
) -> None:
    maya = await api.member("maya")
    headers = {"Authorization": f"Bearer {maya}", "Idempotency-Key": "upload-2"}
    first = await api.client.post("/graphql", headers=headers, **multipart(UPLOAD, {}, jpeg()))
    assert "errors" not in first.json()
    another_file = await api.client.post("/graphql", headers=headers, **multipart(UPLOAD, {}, jpeg((32, 32))))
    another_operation = await api.client.post(
        "/graphql", headers=headers, **multipart(DELETE, {"id": "00000000-0000-0000-0000-000000000000"}, jpeg())
    )
    for refused in (another_file, another_operation):
        assert (refused.status_code, code(refused)) == (422, "BAD_USER_INPUT")
        assert "idempotent-replayed" not in refused.headers
    assert await pool.fetchval("SELECT count(*) FROM media") == 1
