"""A consumer group's span for one event, continuing the trace of the mutation that wrote it.

Every group makes the same span, whichever way the event reached it: from
Kafka (the record's traceparent header, continuing the relay's span) or from
the outbox by the group's sweep (the row's traceparent, the writer's span),
so a post's trace shows every group that applied it. The span is current
while the handler runs: the handler's asyncpg and Redis spans, its fan-out
batches and the outbox rows it writes (a notification, an engagement event)
hang under it and carry the trace on. Its `feedfabric.step` is `consumer`,
one bar per group in the dashboard's Journeys view (feedfabric.http.journeys).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from feedfabric.core.events import Event

CONSUMER_STEP = "consumer"


def event_attributes(group: str, event: Event) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "feedfabric.event.type": event.type,
        "feedfabric.event.id": event.event_id,
        "messaging.consumer.group.name": group,
    }
    if "postId" in event.data:
        attributes["feedfabric.post.id"] = str(event.data["postId"])
    return attributes


@contextlib.contextmanager
def applying(
    tracer: Tracer, group: str, event: Event, parent: Context | None, attributes: dict[str, Any] | None = None
) -> Iterator[None]:
    """The group's span around applying `event`, in `parent`'s trace; nothing when the event carries no trace."""
    if parent is None:
        yield
        return
    span = tracer.start_span(
        f"{group} {event.type}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes={**event_attributes(group, event), **(attributes or {}), "feedfabric.step": CONSUMER_STEP},
    )
    with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        try:
            yield
        except Exception as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
