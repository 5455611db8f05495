"""One server span per request (feedfabric.http.server_span): a caller's traceparent continued, probes untraced,
and a request its trace's sampler dropped recording nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from feedfabric.app import create_app
from feedfabric.core import tracing
from feedfabric.core.settings import Settings
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

from tests.support import Api
from tests.tracing_support import traced_process

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def traced(settings: Settings) -> Iterator[tracing.Tracing]:
    with traced_process(settings) as made:
        yield made


@pytest.fixture
async def api(settings: Settings, traced: tracing.Tracing) -> AsyncIterator[Api]:
    app = create_app(settings, traced)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield Api(client, settings)


def recorded(traced: tracing.Tracing) -> list[dict[str, Any]]:
    assert traced.recent is not None
    return traced.recent.spans()


async def test_a_request_with_a_traceparent_is_one_server_span_in_the_callers_trace(
    api: Api, traced: tracing.Tracing
) -> None:
    token = await api.member("alice")
    before = {s["spanId"] for s in recorded(traced)}
    headers = {"Authorization": f"Bearer {token}", "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
    response = await api.client.post(
        "/graphql", json={"query": "query Home { homeFeed(first: 5) { edges { cursor } } }"}, headers=headers
    )
    assert response.status_code == 200 and "errors" not in response.json()

    spans = [s for s in recorded(traced) if s["spanId"] not in before]
    assert {s["traceId"] for s in spans} == {CALLER_TRACE}
    [server] = [s for s in spans if s["parentId"] == CALLER_SPAN]
    assert server["name"] == "POST /graphql"
    assert server["attributes"]["http.response.status_code"] == 200
    assert server["attributes"]["http.request.method"] == "POST"
    [operation] = [s for s in spans if s["name"] == "GraphQL query Home"]
    assert operation["parentId"] == server["spanId"]
    assert operation["attributes"]["graphql.operation.fields"] == "homeFeed"
    assert operation["attributes"]["feedfabric.graphql.cost"] >= 1
    # The rest are the request's client spans (the viewer's token before execution, the resolvers' reads in it):
    # no span per ASGI message, no second server span.
    rest = [s for s in spans if s not in (server, operation)]
    assert rest and all(s["attributes"].get("db.system") in ("postgresql", "redis") for s in rest)
    assert all(s["parentId"] in (server["spanId"], operation["spanId"]) for s in rest)
    assert [s for s in rest if s["parentId"] == operation["spanId"]]


async def test_a_request_without_one_starts_a_trace_and_a_mutation_is_marked_as_the_journeys_first_step(
    api: Api, traced: tracing.Tracing
) -> None:
    token = await api.member("bob")
    await api.post(token, "a first post")
    server = [s for s in recorded(traced) if s["name"] == "POST /graphql" and s["parentId"] is None][-1]
    operations = [s for s in recorded(traced) if s["traceId"] == server["traceId"] and s["name"].startswith("GraphQL")]
    assert [o["attributes"].get("feedfabric.step") for o in operations] == ["mutation"]
    assert server["traceId"] != CALLER_TRACE


async def test_probes_and_scrapes_make_no_span(api: Api, traced: tracing.Tracing) -> None:
    before = len(recorded(traced))
    for path in ("/healthz", "/readyz", "/metrics"):
        assert (await api.client.get(path)).status_code == 200
    assert len(recorded(traced)) == before


async def test_a_request_its_caller_did_not_sample_records_nothing_and_passes_the_decision_on(
    api: Api, traced: tracing.Tracing, pool: asyncpg.Pool
) -> None:
    token = await api.member("carol")
    before = len(recorded(traced))
    unsampled = {"Authorization": f"Bearer {token}", "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-00"}
    response = await api.client.post(
        "/graphql",
        json={"query": 'mutation { createPost(input: {content: "unsampled"}) { id } }'},
        headers=unsampled,
    )
    post_id = response.json()["data"]["createPost"]["id"]
    assert len(recorded(traced)) == before
    # The outbox row continues the caller's trace, unsampled: the relay and the groups record nothing of it either.
    stored = await pool.fetchval(
        "SELECT traceparent FROM outbox WHERE event_type = 'PostCreated' AND payload->>'postId' = $1", post_id
    )
    assert stored is not None and stored.startswith(f"00-{CALLER_TRACE}-") and stored.endswith("-00")


async def test_asyncpgs_process_wide_patch_lives_as_long_as_a_started_app_and_no_longer(settings: Settings) -> None:
    dev = settings.model_copy(update={"feedfabric_dev_mode": True})  # tracing on, kept in the ring
    create_app(dev)  # made and never started (a test reading its routes): it must leave the driver alone
    assert not AsyncPGInstrumentor().is_instrumented_by_opentelemetry
    app = create_app(dev)
    async with app.router.lifespan_context(app):
        assert AsyncPGInstrumentor().is_instrumented_by_opentelemetry
    assert not AsyncPGInstrumentor().is_instrumented_by_opentelemetry
