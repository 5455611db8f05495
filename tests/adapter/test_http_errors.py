"""Every answer a client can get is one it can parse: JSON with a code, the GraphQL-over-HTTP way."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from feedfabric.core.settings import Settings

from tests.schema.test_errors import assert_no_leak
from tests.schema.test_limits import api_with
from tests.support import Api

JSON = {"content-type": "application/json"}
GRAPHQL_RESPONSE = "application/graphql-response+json"


def coded(response: httpx.Response, status: int) -> list[str]:
    """The response is JSON `{"errors": [...]}`, every error coded; returns the codes."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].split(";")[0] in ("application/json", GRAPHQL_RESPONSE)
    body = response.json()
    assert_no_leak(body)
    codes = [e["extensions"]["code"] for e in body["errors"]]
    assert codes and all(codes)
    return codes


@pytest.mark.parametrize("body", [b"null", b"123", b'"str"', b"true", b"[1]", b"[]"])
async def test_a_body_that_is_not_an_object_is_a_coded_400(api: Api, body: bytes) -> None:
    response = await api.client.post("/graphql", content=body, headers=JSON)
    assert coded(response, 400) == ["BAD_USER_INPUT"]


TYPENAME = {"__typename": "Query"}


@pytest.mark.parametrize(
    "nulls", [{"variables": "null"}, {"extensions": "null"}, {"variables": "null", "extensions": "null"}]
)
async def test_null_optional_parameters_of_a_get_count_as_left_out(api: Api, nulls: dict[str, str]) -> None:
    response = await api.client.get("/graphql", params={"query": "{ __typename }", **nulls})
    assert (response.status_code, response.json().get("errors"), response.json()["data"]) == (200, None, TYPENAME)


async def test_null_optional_parameters_of_a_post_count_as_left_out(api: Api) -> None:
    body = {"query": "{ __typename }", "variables": None, "extensions": None, "operationName": None}
    response = await api.client.post("/graphql", json=body)
    assert (response.status_code, response.json().get("errors"), response.json()["data"]) == (200, None, TYPENAME)


async def test_a_multipart_body_whose_operations_are_not_an_object_is_a_coded_400(api: Api) -> None:
    response = await api.client.post(
        "/graphql", data={"operations": "null", "map": "{}"}, files={"0": ("a.png", b"x", "image/png")}
    )
    assert coded(response, 400) == ["BAD_USER_INPUT"]


UPLOAD = "mutation($f: Upload!) { uploadMedia(file: $f) { id } }"


@pytest.mark.parametrize(
    ("variables", "file_map"),
    [
        ({"f": None}, "[1]"),
        ({"f": None}, '{"0": [5]}'),
        ({"f": None}, '{"0": 5}'),
        ({"f": [None]}, '{"0": ["variables.f.7"]}'),
    ],
)
async def test_a_multipart_map_that_does_not_fit_the_operations_is_a_coded_400(
    api: Api, variables: dict[str, Any], file_map: str
) -> None:
    token = await api.member("uploader")
    response = await api.client.post(
        "/graphql",
        data={"operations": json.dumps({"query": UPLOAD, "variables": variables}), "map": file_map},
        files={"0": ("a.png", b"x", "image/png")},
        headers={"authorization": f"Bearer {token}"},
    )
    assert coded(response, 400) == ["BAD_USER_INPUT"]


async def test_a_malformed_multipart_body_is_a_coded_400_in_the_graphql_shape(api: Api) -> None:
    response = await api.client.post(
        "/graphql", content=b"--x\r\nnot a part", headers={"content-type": "multipart/form-data"}
    )
    assert coded(response, 400) == ["BAD_USER_INPUT"]


async def test_a_body_over_the_limit_is_a_coded_413_in_the_graphql_shape(api: Api) -> None:
    body = json.dumps({"query": "{ __typename }", "variables": {"pad": "x" * api.settings.max_body_bytes}}).encode()
    declared = await api.client.post("/graphql", content=body, headers=JSON)
    assert coded(declared, 413) == ["BAD_USER_INPUT"]
    chunked = await api.client.post("/graphql", content=_chunks(body), headers=JSON)
    assert coded(chunked, 413) == ["BAD_USER_INPUT"]


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    """The body without a Content-Length: the limit must hold while it is read."""
    for start in range(0, len(body), 65536):
        yield body[start : start + 65536]


async def test_an_unknown_operation_name_is_a_coded_400(api: Api) -> None:
    response = await api.client.post("/graphql", json={"query": "query A { viewer { id } }", "operationName": "B"})
    assert coded(response, 400) == ["BAD_USER_INPUT"]
    assert "B" in response.json()["errors"][0]["message"]


async def test_several_operations_without_an_operation_name_run_none(api: Api) -> None:
    token = await api.member("ambiguous")
    document = (
        'mutation B { upsertProfile(username: "ambiguous", displayName: "changed") { id } }'
        " query A { viewer { displayName } }"
    )
    response = await api.client.post(
        "/graphql",
        json={"query": document},
        headers={"authorization": f"Bearer {token}", "accept": GRAPHQL_RESPONSE},
    )
    assert coded(response, 400) == ["BAD_USER_INPUT"]
    viewer = await api.gql("{ viewer { displayName } }", token=token)
    assert viewer["viewer"]["displayName"] != "changed"


@pytest.mark.parametrize("accept", ["application/json", GRAPHQL_RESPONSE])
@pytest.mark.parametrize(
    "document",
    ["{ a: viewer { id } } { b: viewer { id } }", "query A { viewer { id } } query B { viewer { id } }"],
    ids=["anonymous", "named"],
)
async def test_several_operations_without_an_operation_name_are_a_400_whatever_the_accept(
    api: Api, document: str, accept: str
) -> None:
    response = await api.client.post("/graphql", json={"query": document}, headers={"accept": accept})
    assert coded(response, 400) == ["BAD_USER_INPUT"]
    assert "operationName" in response.json()["errors"][0]["message"]


async def test_several_operations_without_an_operation_name_spend_the_rate_limit(settings: Settings) -> None:
    async with api_with(
        settings, rate_limit_operations=2, rate_limit_window_seconds=1_000_000_000, redis_timeout_ms=10_000
    ) as limited:
        document = {"query": "query A { viewer { id } } query B { viewer { id } }"}
        answers = [await limited.client.post("/graphql", json=document) for _ in range(3)]
        assert [a.status_code for a in answers] == [400, 400, 429]
        assert coded(answers[2], 429) == ["RATE_LIMITED"] and int(answers[2].headers["retry-after"]) >= 1


async def test_a_mutation_over_get_is_405_allowing_post(api: Api) -> None:
    response = await api.client.get("/graphql", params={"query": 'mutation { follow(externalUserId: "x") { id } }'})
    assert coded(response, 405) == ["BAD_USER_INPUT"]
    assert response.headers["allow"] == "POST"


async def test_a_batch_is_refused_with_a_code(api: Api) -> None:
    response = await api.client.post("/graphql", json=[{"query": "{ __typename }"}, {"query": "{ __typename }"}])
    assert coded(response, 400) == ["BAD_USER_INPUT"]


@pytest.mark.parametrize("method", ["OPTIONS", "PUT", "DELETE", "PATCH"])
async def test_other_methods_are_405_allowing_get_and_post(api: Api, method: str) -> None:
    response = await api.client.request(method, "/graphql")
    assert coded(response, 405) == ["BAD_USER_INPUT"]
    assert response.headers["allow"] == "GET, POST"


async def test_graphql_response_json_gets_its_media_type_and_4xx_before_execution(api: Api) -> None:
    accept = {"accept": GRAPHQL_RESPONSE}
    invalid = await api.client.post("/graphql", json={"query": "{ nope }"}, headers=accept)
    assert invalid.headers["content-type"].startswith(GRAPHQL_RESPONSE)
    assert coded(invalid, 400) == ["BAD_USER_INPUT"]
    assert "data" not in invalid.json()
    unparsable = await api.client.post("/graphql", json={"query": "{"}, headers=accept)
    assert coded(unparsable, 400) == ["BAD_USER_INPUT"]
    fine = await api.client.post("/graphql", json={"query": "{ __typename }"}, headers=accept)
    assert fine.status_code == 200 and fine.headers["content-type"].startswith(GRAPHQL_RESPONSE)
    assert fine.json()["data"] == {"__typename": "Query"}
    # A field error happens during execution: 200, with data.
    missing = await api.client.post("/graphql", json={"query": "{ post(id: 5) { id } }"}, headers=accept)
    assert missing.status_code == 200 and "data" in missing.json()


async def test_legacy_json_keeps_200_for_validation_errors(api: Api) -> None:
    response = await api.client.post("/graphql", json={"query": "{ nope }"}, headers={"accept": "application/json"})
    assert coded(response, 200) == ["BAD_USER_INPUT"]
    assert response.headers["content-type"].startswith("application/json")


async def test_a_subscription_over_http_is_told_to_use_the_websocket(api: Api) -> None:
    token = await api.member("subber")
    for send in (
        api.client.post(
            "/graphql",
            json={"query": "subscription { homeTimeline { __typename } }"},
            headers={"Authorization": f"Bearer {token}"},
        ),
        api.client.get(
            "/graphql",
            params={"query": "subscription { notificationAdded { __typename } }"},
            headers={"Authorization": f"Bearer {token}", "accept": "application/json"},
        ),
    ):
        response = await send
        assert coded(response, 200) == ["BAD_USER_INPUT"]
        assert "WebSocket" in response.json()["errors"][0]["message"]


HOME = "query($n: Int) { homeFeed(first: $n) { edges { node { id } } } }"


@pytest.mark.parametrize("n", [2**63, 2**64 + 1, -(2**63), 2**31])
async def test_an_int_variable_outside_32_bits_is_refused_before_the_guards(api: Api, n: int) -> None:
    token = await api.member("counter")
    response = await api.client.post(
        "/graphql", json={"query": HOME, "variables": {"n": n}}, headers={"Authorization": f"Bearer {token}"}
    )
    assert coded(response, 200) == ["BAD_USER_INPUT"]
    assert "32-bit" in response.json()["errors"][0]["message"]


async def test_production_variable_errors_suggest_nothing(settings: Settings) -> None:
    query = "mutation($i: CreatePostInput!) { createPost(input: $i) { id } }"
    variables: dict[str, Any] = {"i": {"contnt": "hello"}}
    async with api_with(settings, feedfabric_production=False) as dev:
        token = await dev.member("typo")
        body = await dev.raw(query, variables, token=token)
        assert "Did you mean" in json.dumps(body)
    async with api_with(settings, feedfabric_production=True) as prod:
        body = await prod.raw(query, variables, token=token)
        assert body["errors"] and body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
        assert "Did you mean" not in json.dumps(body)


# --- REST -----------------------------------------------------------------------------


@pytest.mark.parametrize("limit", ["\u00b2", "\u0663", "1e3", "99999999999999999999", "-1"])
async def test_rest_limit_that_is_not_ascii_digits_is_a_400(api: Api, limit: str) -> None:
    token = await api.member("pager")
    response = await api.rest("GET", "/userfeed/home", token=token, params={"limit": limit})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "request.invalid"


async def test_rest_upload_with_two_file_parts_is_a_400(api: Api) -> None:
    token = await api.member("twice")
    files = [("file", ("a.png", b"x", "image/png")), ("file", ("b.png", b"y", "image/png"))]
    response = await api.rest("POST", "/media", token=token, files=files)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "request.invalid"


async def test_a_chunked_rest_body_over_the_limit_is_a_413(api: Api) -> None:
    token = await api.member("chunky")
    body = b'{"preset": "' + b"x" * api.settings.max_body_bytes + b'"}'
    headers = {**JSON, "authorization": f"Bearer {token}"}
    response = await api.client.put("/feed-profile", content=_chunks(body), headers=headers)
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "request.too_large"


async def test_json_nested_too_deep_to_parse_is_a_rest_400(api: Api) -> None:
    token = await api.member("nester")
    body = b'{"sources": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    headers = {**JSON, "authorization": f"Bearer {token}"}
    response = await api.client.put("/feed-profile", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "request.invalid"


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/no-such-route", 404, "resource.not_found"),
        ("OPTIONS", "/userfeed/home", 405, "request.method_not_allowed"),
        ("DELETE", "/userfeed/home", 405, "request.method_not_allowed"),
        ("GET", "/static/vendor/no-such-file.js", 404, "resource.not_found"),
    ],
)
async def test_routing_refusals_are_json_in_the_rest_shape(
    api: Api, method: str, path: str, status: int, code: str
) -> None:
    response = await api.client.request(method, path)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    if status == 405:
        assert "GET" in response.headers["allow"]
