"""REQUEST_TIMEOUT_SECONDS: a request still running past it ends with 503 SERVICE_UNAVAILABLE, in its route's shape."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx
from feedfabric.core.errors import store_unreachable
from feedfabric.http.deadline import RequestDeadline
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def slow(request: Request) -> JSONResponse:
    await asyncio.sleep(5)
    return JSONResponse({"ok": True})


async def fast(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


async def cancelled_into_an_error(request: Request) -> JSONResponse:
    try:
        await asyncio.sleep(5)
    except asyncio.CancelledError:
        raise RuntimeError("a driver's own error on its way out") from None
    return JSONResponse({"ok": True})


def client(seconds: float) -> httpx.AsyncClient:
    """The deadline where the app puts it: a middleware inside Starlette's own error handling."""
    app = Starlette(
        routes=[Route("/graphql", slow, methods=["POST"]), Route("/slow", slow), Route("/fast", fast)]
        + [Route("/odd", cancelled_into_an_error)],
        middleware=[Middleware(RequestDeadline, seconds=seconds, graphql_path="/graphql")],
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_a_request_past_the_deadline_ends_with_503_in_its_routes_shape() -> None:
    async with client(0.2) as http:
        rest = await http.get("/slow")
        assert rest.status_code == 503 and rest.headers["retry-after"] == "1"
        assert rest.json()["error"]["code"] == "service.unavailable"
        gql = await http.post("/graphql", json={"query": "{ viewer { id } }"})
        assert gql.status_code == 503
        assert gql.json()["errors"][0]["extensions"]["code"] == "SERVICE_UNAVAILABLE"
        odd = await http.get("/odd")  # whatever the cancelled request raised, past the deadline it is the timeout
        assert odd.status_code == 503
        assert (await http.get("/fast")).json() == {"ok": True}


async def test_no_deadline_when_off() -> None:
    async with client(0) as http:
        assert (await http.get("/fast")).status_code == 200


async def unreachable(request: Request) -> JSONResponse:
    raise ConnectionRefusedError("no route to the database")


async def test_a_database_out_of_reach_that_no_handler_answered_is_503_at_once() -> None:
    app = Starlette(
        routes=[Route("/graphql", unreachable, methods=["POST"])],
        middleware=[Middleware(RequestDeadline, seconds=5, graphql_path="/graphql")],
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        gql = await http.post("/graphql", json={"query": "{ viewer { id } }"})
    assert gql.status_code == 503
    assert gql.json()["errors"][0]["extensions"]["code"] == "SERVICE_UNAVAILABLE"


def test_what_counts_as_the_database_out_of_reach() -> None:
    assert store_unreachable(ConnectionRefusedError())
    assert store_unreachable(TimeoutError())
    assert store_unreachable(asyncpg.ConnectionDoesNotExistError("closed in the middle of operation"))
    try:
        try:
            raise OSError("no route")
        except OSError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert store_unreachable(outer)
    assert not store_unreachable(ValueError("bad input"))
    assert not store_unreachable(asyncpg.UniqueViolationError("duplicate"))
