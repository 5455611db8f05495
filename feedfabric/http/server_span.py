"""One server span per HTTP request or WebSocket, on OpenTelemetry's public API: the root of a traced request.

It continues a caller's W3C `traceparent` (and `tracestate`) when the request
carries one, else starts a trace the sampler may keep. The span is current
for the whole request, so the GraphQL operation's span, the asyncpg and Redis
client spans and an outbox row's traceparent all hang under it.

It does what a trace of the journey needs and no more, because it runs on
every request: no span per ASGI message, no metrics of its own (Prometheus
has them), no header capture, no URL parsing. A request the sampler drops
costs one sampling decision and a context switch: its `send` is not wrapped,
no attribute is computed, and the maintained instrumentations are suppressed
for it (OpenTelemetry's documented `suppress_instrumentation`), so its
asyncpg queries and Redis commands skip their wrappers' work (attributes
parsed from the statement and the connection before any sampling decision)
instead of making spans that would be dropped anyway. Its traceparent, unsampled,
still goes with the outbox rows it writes, so the relay and the groups drop
the post's spans alike. Probes and scrapes (`/healthz`, `/readyz`,
`/metrics`) get no span at all.
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ServerSpans"]

UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
_PROPAGATOR = TraceContextTextMapPropagator()


def incoming_context(headers: Iterable[tuple[bytes, bytes]]) -> Context | None:
    """The caller's trace, from its `traceparent` and `tracestate` headers; None when it sent none."""
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name == b"traceparent" or name == b"tracestate":
            carrier[name.decode("latin-1")] = value.decode("latin-1")
    return _PROPAGATOR.extract(carrier) if "traceparent" in carrier else None


class ServerSpans:
    """Wraps the app: each HTTP request and each WebSocket is one SERVER span named `METHOD path` (a socket:
    `WS path`), with the method, path, scheme and, for HTTP, the response status; a 5xx or an exception
    marks it an error."""

    def __init__(self, app: ASGIApp, tracer: Tracer, untraced_paths: frozenset[str] = UNTRACED_PATHS) -> None:
        self.app = app
        self.tracer = tracer
        self.untraced_paths = untraced_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if (kind != "http" and kind != "websocket") or scope["path"] in self.untraced_paths:
            await self.app(scope, receive, send)
            return
        method = scope["method"] if kind == "http" else "WS"
        span = self.tracer.start_span(
            f"{method} {scope['path']}", context=incoming_context(scope["headers"]), kind=SpanKind.SERVER
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            if not span.is_recording():
                with suppress_instrumentation():
                    await self.app(scope, receive, send)
                return
            span.set_attributes(
                {
                    "http.request.method": method,
                    "url.path": scope["path"],
                    "url.scheme": scope.get("scheme", "http"),
                    "network.protocol.name": kind,
                }
            )
            if kind != "http":
                await self.app(scope, receive, send)
                return

            async def send_noting_status(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = message["status"]
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR, str(status)))
                await send(message)

            await self.app(scope, receive, send_noting_status)
        except BaseException as exc:
            if span.is_recording():
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            otel_context.detach(token)
            span.end()
