"""Traces of a post's journey (OpenTelemetry): set up once per process from the settings.

A process traces only when a trace has somewhere to go: an OTLP endpoint
(OTEL_EXPORTER_OTLP_ENDPOINT, the standard variables) or the in-memory ring of
recent traces (on by default in dev). Otherwise nothing is instrumented and
every tracer handed out is OpenTelemetry's no-op one, so tracing off costs a
function call per span site and nothing else. The provider is passed to what
it instruments (the app, the Redis client, the relay, the runners), not set
as OpenTelemetry's global, so several apps in one process (the tests) each
get their own; asyncpg's instrumentation is the exception: it patches the
driver for the whole process, once.

Export is asynchronous (a batch processor on its own thread): an exporter
that is down costs dropped spans and a log line, never a request.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult, TraceIdRatioBased
from opentelemetry.trace import Link, SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

from feedfabric.core.settings import Settings

__all__ = [
    "NO_TRACER",
    "TRACES_DIR",
    "RecentTraces",
    "Tracing",
    "context_of",
    "header_of",
    "kafka_headers",
    "ns_of",
    "read_recent",
    "setup",
    "traceparent",
    "traceparent_of",
    "tracer_of",
    "traces_url",
]

log = logging.getLogger(__name__)

TRACES_DIR = "traces"
TRACER_NAME = "feedfabric"
_PROPAGATOR = TraceContextTextMapPropagator()
NO_TRACER: Tracer = trace.NoOpTracer()


def traceparent() -> str | None:
    """The W3C traceparent of the current span, or None when there is none (tracing off)."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


def traceparent_of(span: trace.Span, fallback: str | None = None) -> str | None:
    """The traceparent that continues `span`; `fallback` when it is not a real span (this process does not trace)."""
    if not span.get_span_context().is_valid:
        return fallback
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent", fallback)


def context_of(header: str | bytes | None) -> Context | None:
    """The context a stored or received traceparent continues; None for none or a malformed one."""
    if not header:
        return None
    value = header.decode("ascii", "replace") if isinstance(header, bytes) else header
    extracted = _PROPAGATOR.extract({"traceparent": value})
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


def ns_of(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def kafka_headers(header: str | None) -> list[tuple[str, bytes]] | None:
    return [("traceparent", header.encode("ascii"))] if header else None


def header_of(headers: Sequence[tuple[str, bytes]] | None) -> bytes | None:
    for name, value in headers or ():
        if name == "traceparent":
            return value
    return None


def span_record(span: ReadableSpan, service: str) -> dict[str, Any]:
    """A finished span as the ring, its file and the dashboard's Journeys view hold it."""
    ctx = span.get_span_context()
    assert ctx is not None
    parent = span.parent
    return {
        "traceId": format(ctx.trace_id, "032x"),
        "spanId": format(ctx.span_id, "016x"),
        "parentId": format(parent.span_id, "016x") if parent is not None else None,
        "name": span.name,
        "service": service,
        "start": span.start_time,
        "end": span.end_time,
        "attributes": {
            k: v if isinstance(v, (str, int, float, bool)) else str(v) for k, v in (span.attributes or {}).items()
        },
        "links": [
            {"traceId": format(link.context.trace_id, "032x"), "spanId": format(link.context.span_id, "016x")}
            for link in span.links
        ],
    }


class RecentTraces(SpanProcessor):
    """The last `limit` traces this process took part in, whole, in memory; written to `path` (when set)
    about a second after a span ends, so the other processes' dashboards can read them.

    Each process writes its own file (the dashboard merges them by trace ID): no locking across processes.
    """

    def __init__(self, limit: int, service: str, path: Path | None = None, write_after_s: float = 1.0) -> None:
        self.limit = limit
        self.service = service
        self.path = path
        self.write_after_s = write_after_s
        self._traces: OrderedDict[int, list[ReadableSpan]] = OrderedDict()
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def on_start(self, span: Any, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        """On the request's path: only a dictionary update; spans are turned into records when read."""
        ctx = span.get_span_context()
        if ctx is None:
            return
        with self._lock:
            spans = self._traces.pop(ctx.trace_id, None) or []
            spans.append(span)
            self._traces[ctx.trace_id] = spans
            if len(self._traces) > self.limit:
                self._traces.popitem(last=False)
            if self.path is not None and self._timer is None:
                self._timer = threading.Timer(self.write_after_s, self.write)
                self._timer.daemon = True
                self._timer.start()

    def spans(self) -> list[dict[str, Any]]:
        with self._lock:
            held = [s for spans in self._traces.values() for s in spans]
        return [span_record(s, self.service) for s in held]

    def write(self) -> None:
        if self.path is None:
            return
        with self._lock:
            self._timer = None
        body = json.dumps(self.spans(), separators=(",", ":"))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            scratch = self.path.with_suffix(".tmp")
            scratch.write_text(body)
            scratch.replace(self.path)
        except OSError as exc:
            log.warning("tracing: writing recent traces to %s failed: %s", self.path, exc)

    def shutdown(self) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self.write()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.write()
        return True


class NoOrphanClients(Sampler):
    """Parent-based ratio sampling that never starts a trace with a client span.

    A query or Redis command outside any traced work (the relay's polling, the
    feed log's background writes, a worker's sweep) would otherwise be a trace
    of its own: most of what a process records, and it would push post journeys
    out of the ring.
    """

    def __init__(self, ratio: float) -> None:
        self.delegate = ParentBased(TraceIdRatioBased(ratio))

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: trace.TraceState | None = None,
    ) -> SamplingResult:
        if kind is SpanKind.CLIENT and not trace.get_current_span(parent_context).get_span_context().is_valid:
            return SamplingResult(Decision.DROP)
        return self.delegate.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"NoOrphanClients{{{self.delegate.get_description()}}}"  # type: ignore[no-untyped-call]


@dataclass
class Tracing:
    """One process's tracing: its provider and, in dev, its ring of recent traces."""

    provider: TracerProvider
    service: str
    recent: RecentTraces | None = None
    instrumented_asyncpg: bool = False

    def tracer(self) -> Tracer:
        return self.provider.get_tracer(TRACER_NAME)

    def instrument_asyncpg(self) -> None:
        """Client spans for every asyncpg query in this process (the driver is patched once per process)."""
        from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

        instrumentor = AsyncPGInstrumentor()  # type: ignore[no-untyped-call]
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=self.provider)
            self.instrumented_asyncpg = True

    def instrument_redis(self, client: Any) -> None:
        from opentelemetry.instrumentation.redis import RedisInstrumentor

        RedisInstrumentor.instrument_client(client, tracer_provider=self.provider)

    def uninstrument_asyncpg(self) -> None:
        """Takes back asyncpg's patch, if this provider made it."""
        if self.instrumented_asyncpg:
            from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

            AsyncPGInstrumentor().uninstrument()  # type: ignore[no-untyped-call]
            self.instrumented_asyncpg = False

    def shutdown(self) -> None:
        """Flushes what is left to export and takes back asyncpg's patch."""
        self.uninstrument_asyncpg()
        self.provider.shutdown()


def tracer_of(tracing: Tracing | None) -> Tracer:
    return tracing.tracer() if tracing is not None else NO_TRACER


def traces_path(settings: Settings, service: str) -> Path:
    return settings.feedfabric_data_dir / TRACES_DIR / f"{service}-{os.getpid()}.json"


def traces_url(settings: Settings) -> str:
    """Where OTLP/HTTP spans go, as the SDK reads its variables: the traces endpoint as given, or the base
    endpoint with the signal's path."""
    if settings.otel_exporter_otlp_traces_endpoint:
        return settings.otel_exporter_otlp_traces_endpoint
    return (settings.otel_exporter_otlp_endpoint or "").rstrip("/") + "/v1/traces"


def setup(settings: Settings, service: str, *, write_recent: bool = True) -> Tracing | None:
    """The process's tracing per the settings, or None when it is off (no ratio, or nowhere to send to)."""
    ratio = settings.trace_sample_ratio
    recent_limit = settings.recent_traces_kept
    if settings.otel_sdk_disabled or ratio <= 0 or not (settings.otlp_endpoint or recent_limit):
        return None
    provider = TracerProvider(
        sampler=NoOrphanClients(ratio),
        resource=Resource.create({SERVICE_NAME: settings.otel_service_name or service}),
    )
    if settings.otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url(settings))))
    recent = None
    if recent_limit:
        recent = RecentTraces(recent_limit, service, traces_path(settings, service) if write_recent else None)
        provider.add_span_processor(recent)
    return Tracing(provider=provider, service=service, recent=recent)


def read_recent(directory: Path) -> list[dict[str, Any]]:
    """Every span the processes wrote to `directory` (their rings, as last written)."""
    spans: list[dict[str, Any]] = []
    if not directory.is_dir():
        return spans
    for path in sorted(directory.glob("*.json")):
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(loaded, list):
            spans += [s for s in loaded if isinstance(s, dict)]
    return spans
