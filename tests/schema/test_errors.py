"""Bad input gets a clear error, changes nothing, and never leaks SQL, paths or stack traces."""

import json

import asyncpg

from tests.support import Api

LEAKS = ("Traceback", "asyncpg", "SELECT ", "INSERT ", "/work/", "site-packages", 'File "')


def assert_no_leak(body: object) -> None:
    text = json.dumps(body)
    for marker in LEAKS:
        assert marker not in text, f"{marker!r} leaked in {text[:300]}"


async def test_an_unexpected_failure_is_masked_and_coded(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    await pool.execute("ALTER TABLE posts RENAME TO posts_gone")
    try:
        body = await api.raw('mutation { createPost(input: {content: "x"}) { id } }', token=maya)
    finally:
        await pool.execute("ALTER TABLE posts_gone RENAME TO posts")
    assert [e["extensions"]["code"] for e in body["errors"]] == ["INTERNAL_SERVER_ERROR"]
    assert body["errors"][0]["message"] == "Internal server error."
    assert_no_leak(body)


async def test_query_errors_are_coded_without_leaks(api: Api) -> None:
    for query in ("{ nope }", "{", "{ post(id: 5) { id } }", '{ homeFeed(first: "x") { source } }'):
        body = await api.raw(query)
        assert body["errors"] and all(e["extensions"]["code"] for e in body["errors"])
        assert_no_leak(body)


async def test_the_server_stays_healthy_after_bad_input(api: Api) -> None:
    maya = await api.member("maya")
    for variables in ({"c": "\x00"}, {"c": "x" * 100_000}, {"c": ""}):
        await api.raw("mutation($c: String!) { createPost(input: {content: $c}) { id } }", variables, token=maya)
    assert (await api.client.get("/healthz")).json() == {"status": "ok"}
    assert (await api.client.get("/readyz")).status_code == 200
    assert await api.post(maya, "still fine")


async def test_an_oversized_body_is_refused_with_413(api: Api) -> None:
    response = await api.client.post(
        "/graphql", content=b"x" * (api.settings.max_body_bytes + 1), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert_no_leak(response.json())
