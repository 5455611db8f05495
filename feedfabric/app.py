"""The ASGI app: GraphQL (HTTP and WebSocket) at /graphql, the REST routes, health and readiness."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from datetime import timedelta

import strawberry
from opentelemetry.trace import TracerProvider
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feedfabric.adapter import execution
from feedfabric.adapter.graphql_http import GRAPHQL_PATH, GraphQLHTTP
from feedfabric.adapter.websocket.endpoint import GraphQLSockets
from feedfabric.core import tracing
from feedfabric.core.errors import RequestTooLarge
from feedfabric.core.logging import configure_logging
from feedfabric.core.settings import Settings, load_settings
from feedfabric.db.breaker import CircuitBreaker
from feedfabric.db.pool import PrimaryWatch, create_pool
from feedfabric.db.redisclient import create_redis
from feedfabric.db.replica import ReadRouting
from feedfabric.feeds.feed_log import FeedLog
from feedfabric.feeds.viewer import resolve_viewer
from feedfabric.http import dashboard, health, playground
from feedfabric.http.cors import CorsExceptDev
from feedfabric.http.deadline import RequestDeadline
from feedfabric.http.idempotency import Idempotency
from feedfabric.http.refusal import refusal
from feedfabric.http.request_id import REQUEST_ID_HEADER, RequestIdMiddleware
from feedfabric.http.server_span import ServerSpans
from feedfabric.http.static import StaticFolder
from feedfabric.http.watchdog import LoopWatchdog
from feedfabric.ops import vendor
from feedfabric.realtime.consumer import start_realtime
from feedfabric.realtime.hub import Hub
from feedfabric.realtime.sessions import Sessions
from feedfabric.resolvers.context import Context, build_context, route_reads
from feedfabric.resources import Resources
from feedfabric.rest import routes as rest_routes
from feedfabric.rest.responses import JSONResponse
from feedfabric.schema import build_schema

__all__ = ["create_app", "schema"]

log = logging.getLogger("feedfabric.app")


def served_schema(tracer_provider: TracerProvider | None = None) -> strawberry.Schema:
    """The schema as served: executed by the engine room (feedfabric.adapter.execution), which shares what
    reads the same for every viewer; with a tracer provider, every operation is a span too."""
    return build_schema(tracer_provider, engine=execution.engine)


schema = served_schema()
"""The served schema without tracing: the app's, unless tracing is on, and the tests' and tools'."""


async def request_context(request: Request, response: Response) -> Context:
    """One HTTP operation's context: the viewer from the bearer token, the resources and the read routing."""
    resources: Resources = request.app.state.resources
    viewer = await resolve_viewer(
        resources.pool, resources.settings, resources.tokens, request.headers.get("authorization")
    )
    context = build_context(resources, viewer, request=request, response=response)
    await route_reads(context)
    return context


UPLOAD_PATH = "/media"


class BodyLimit:
    """Refuses request bodies over the limit before anything reads them (413).

    Multipart bodies carry photos and get the upload limit (plus room for the
    form's other parts), as does REST's `POST /media` whatever its content
    type (the raw photo as the body); everything else gets the request limit.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, upload_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.upload_bytes = upload_bytes + 64 * 1024

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] != "http":
            return self.app(scope, receive, send)  # no frame of ours kept for a socket's life (feedfabric.http)
        return self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        upload = headers.get(b"content-type", b"").startswith(b"multipart/form-data") or (
            scope["path"] == UPLOAD_PATH and scope["method"] == "POST"
        )
        limit = self.upload_bytes if upload else self.max_bytes
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _too_large(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise RequestTooLarge("request body too large")
            return message

        try:
            await self.app(scope, limited, send)
        except RequestTooLarge:  # a reader that does not answer it itself (REST and /graphql do)
            await _too_large(scope, receive, send)


async def _too_large(scope: Scope, receive: Receive, send: Send) -> None:
    response = refusal(scope, 413, "request body too large", code="BAD_USER_INPUT", rest_code="request.too_large")
    await response(scope, receive, send)


_HTTP_CODES = {404: "resource.not_found", 405: "request.method_not_allowed", 413: "request.too_large"}


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no route, a method a route does not take) in the REST error shape, not
    plain text; a 405 keeps its `Allow` header."""
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "request.invalid")
    return JSONResponse(
        {"error": {"code": code, "message": exc.detail}}, status_code=exc.status_code, headers=exc.headers
    )


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    """Postgres, Redis and the broker reported separately; only Postgres decides (feedfabric.http.health)."""
    ready, body = await health.check(request.app.state.resources)
    return JSONResponse(body, status_code=200 if ready else 503)


def create_app(settings: Settings | None = None, traced: tracing.Tracing | None = None) -> Starlette:
    """`traced`: this process's tracing, when the caller set it up (tests); else set up from the settings."""
    settings = settings or load_settings()
    configure_logging(settings)
    owns_tracing = traced is None
    traced = traced or tracing.setup(settings, "feedfabric-api")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if not settings.database_url:
            raise RuntimeError("DATABASE_URL is not set")
        if traced is not None:
            # Here, not when the app is made: asyncpg's patch is process-wide, and only a lifespan's end takes it
            # back (an app made and never started would leave it on, its spans going to a provider nobody reads).
            traced.instrument_asyncpg()
        pool = await create_pool(
            settings.database_url,
            max_size=20,
            lean_reset=True,
            generic_plans=True,
            command_timeout=settings.database_command_timeout_seconds,
        )
        primary_watch = PrimaryWatch(pool)
        primary_watch.start()
        redis = create_redis(settings, timeout_ms=settings.redis_timeout_ms) if settings.redis_url else None
        if redis is not None and traced is not None:
            traced.instrument_redis(redis)
        # min_size 0: a replica down at start is a state the routing handles, not a reason not to serve.
        read_pool = (
            await create_pool(settings.database_read_url, min_size=0, max_size=20, lean_reset=True, generic_plans=True)
            if settings.database_read_url
            else None
        )
        reads = ReadRouting(
            primary=pool,
            replica=read_pool,
            redis=redis,
            max_lag_s=settings.read_replica_max_lag_ms / 1000,
            marked_for_s=settings.read_your_writes_seconds,
        )
        reads.start()
        # Off only to measure what logging costs (bench/home_feed.py); settings refuse it in production.
        feed_log = (
            FeedLog(pool, comment_weight=settings.comment_weight, fold_every_s=settings.feed_log_fold_seconds)
            if settings.feed_log_enabled
            else None
        )
        if feed_log is not None:
            feed_log.start()
        app.state.resources = Resources(
            settings=settings,
            pool=pool,
            redis=redis,
            feed_log=feed_log,
            reads=reads,
            breaker=CircuitBreaker(cool_down_s=settings.redis_breaker_cooldown_ms / 1000),
            sessions=Sessions(
                interval_s=settings.ws_rights_check_seconds,
                max_per_member=settings.ws_max_sockets_per_member,
                redis=redis,
            ),
            hub=Hub(queue_size=settings.realtime_queue_size),
            tracing=traced,
        )
        realtime = start_realtime(
            settings, pool, app.state.resources.hub, tracing.tracer_of(traced), app.state.resources.relations
        )
        app.state.resources.realtime_consumer = realtime
        app.state.resources.sessions.start(pool)
        watchdog = LoopWatchdog(threshold_s=settings.loop_stall_seconds, grace_s=settings.shutdown_grace_seconds)
        watchdog.start()
        try:
            yield
        finally:
            await watchdog.stop()
            await app.state.resources.sessions.stop()
            if realtime is not None:
                await realtime.stop()
            if feed_log is not None:
                await feed_log.stop()
            await app.state.resources.rebalances.wait_idle()  # a rebalance in flight finishes before its pool closes
            await reads.stop()
            await primary_watch.stop()
            if read_pool is not None:
                await read_pool.close()
            if redis is not None:
                await redis.aclose()
            await pool.close()
            if traced is not None and owns_tracing:
                traced.shutdown()

    served = served_schema(traced.provider) if traced is not None else schema
    graphql_http = GraphQLHTTP(served, request_context, graphiql=not settings.feedfabric_production)
    sockets = GraphQLSockets(
        served,
        allowed_origins=settings.ws_allowed_origins.split(","),
        init_timeout=timedelta(seconds=settings.ws_init_timeout_seconds),
        max_operations=settings.max_subscriptions_per_connection,
    )
    app = Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", health.metrics_endpoint),
            *rest_routes.routes(),
            Route(GRAPHQL_PATH, graphql_http),
            WebSocketRoute(GRAPHQL_PATH, sockets),
            *playground.routes(settings),
            # GraphiQL's scripts and styles, from the package (feedfabric.ops.vendor): no CDN.
            Mount("/static/vendor", StaticFolder(directory=vendor.STATIC, check_dir=False), name="vendor"),
            *dashboard.routes(),
        ],
        lifespan=lifespan,
        exception_handlers={StarletteHTTPException: http_error},
    )
    app.add_middleware(Idempotency)  # inside BodyLimit: what it reads is bounded
    # Inside the request ID: a request cut short is logged with its 503.
    app.add_middleware(RequestDeadline, seconds=settings.request_timeout_seconds, graphql_path=GRAPHQL_PATH)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes, upload_bytes=settings.media_max_bytes)
    app.add_middleware(RequestIdMiddleware)
    if traced is not None:
        # One server span per request or socket, continuing a caller's traceparent (feedfabric.http.server_span).
        app.add_middleware(ServerSpans, tracer=traced.tracer())
    origins = settings.cors_origins
    if origins:
        # Bearer tokens, not cookies: no credentials. Without origins there is no middleware at all:
        # browsers then allow no other origin, and same-origin requests pay nothing for it.
        app.add_middleware(
            CorsExceptDev,  # the dev sign-in routes never answer another origin (feedfabric.http.cors)
            allow_origins=origins,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            # Any request header: clients and their SDKs add their own (Apollo's client name, tracing), and
            # without credentials a header grants nothing.
            allow_headers=["*"],
            expose_headers=[
                REQUEST_ID_HEADER,
                "ratelimit-limit",
                "ratelimit-remaining",
                "ratelimit-reset",
                "retry-after",
                "idempotent-replayed",
            ],
            max_age=600,
        )
    return app
