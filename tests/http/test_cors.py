"""Browsers on other origins may call the API only from CORS_ALLOWED_ORIGINS; none by default."""

from __future__ import annotations

import pytest
from feedfabric.core.settings import Settings

from tests.schema.test_limits import api_with
from tests.support import Api

APP = "https://app.example"
PREFLIGHT = {
    "origin": APP,
    "access-control-request-method": "POST",
    # What Apollo Client (named), apollo-upload-client and tracing SDKs (OpenTelemetry, Sentry) add.
    "access-control-request-headers": (
        "authorization, content-type, apollographql-client-name, apollographql-client-version,"
        " apollo-require-preflight, traceparent, sentry-trace, baggage, idempotency-key"
    ),
}


@pytest.mark.parametrize("path", ["/graphql", "/userfeed/home"])
async def test_no_origin_is_allowed_by_default(api: Api, path: str) -> None:
    preflight = await api.client.options(path, headers=PREFLIGHT)
    assert "access-control-allow-origin" not in preflight.headers
    response = await api.client.get(path, headers={"origin": APP, "accept": "application/json"})
    assert "access-control-allow-origin" not in response.headers


@pytest.mark.parametrize("path", ["/graphql", "/userfeed/home", "/media"])
async def test_an_allowed_origin_gets_its_preflight_answered(settings: Settings, path: str) -> None:
    async with api_with(settings, cors_allowed_origins=f"{APP}, https://other.example") as api:
        preflight = await api.client.options(path, headers=PREFLIGHT)
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == APP
        assert "POST" in preflight.headers["access-control-allow-methods"]
        allowed = preflight.headers["access-control-allow-headers"].lower()
        assert all(h.strip() in allowed for h in PREFLIGHT["access-control-request-headers"].split(","))
        assert "access-control-allow-credentials" not in preflight.headers  # bearer tokens, not cookies


async def test_an_allowed_origin_reads_answers_and_rate_limit_headers(settings: Settings) -> None:
    async with api_with(settings, cors_allowed_origins=APP) as api:
        token = await api.member("cors")
        response = await api.client.post(
            "/graphql",
            json={"query": "{ viewer { id } }"},
            headers={"origin": APP, "authorization": f"Bearer {token}"},
        )
        assert response.headers["access-control-allow-origin"] == APP
        rest = await api.client.get("/userfeed/home", headers={"origin": APP, "authorization": f"Bearer {token}"})
        assert rest.headers["access-control-allow-origin"] == APP
        assert "ratelimit-remaining" in rest.headers["access-control-expose-headers"].lower()


async def test_other_origins_stay_refused_when_some_are_allowed(settings: Settings) -> None:
    async with api_with(settings, cors_allowed_origins=APP) as api:
        preflight = await api.client.options("/graphql", headers={**PREFLIGHT, "origin": "https://evil.example"})
        assert preflight.status_code == 400
        assert "access-control-allow-origin" not in preflight.headers
        response = await api.client.post(
            "/graphql", json={"query": "{ __typename }"}, headers={"origin": "https://evil.example"}
        )
        assert "access-control-allow-origin" not in response.headers
