"""Recent posts' journeys, from the recent traces of every process: the dashboard's Journeys view.

A journey is the trace of one createPost, cut into the steps an operator asks
about (STEPS, in the order a post takes them): each span marked with a
`feedfabric.step` attribute is a bar, placed from the trace's first span.
Every consumer group that applied the post is a bar of its own (its
`consumer` span, named by the group), right after its time in the broker, the
groups in the order the broker handed them the post. The
realtime consumer's span for a polled chunk belongs to the trace of its first
event and links the others, so a linked delivery is counted in each trace it
links. The slowest bar is named, so the view can highlight it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["journeys"]

STEPS = ("mutation", "outbox wait", "relay", "broker", "consumer", "fan-out batch", "timeline write", "delivery")
GROUP = "messaging.consumer.group.name"


@dataclass(frozen=True)
class Bar:
    step: str
    label: str
    start_ms: float
    duration_ms: float
    service: str


@dataclass(frozen=True)
class Journey:
    trace_id: str
    post_id: str | None
    started_at_ns: int
    total_ms: float
    bars: list[Bar]
    slowest: int  # index into bars

    def to_json(self) -> dict[str, Any]:
        return {
            "traceId": self.trace_id,
            "postId": self.post_id,
            "startedAtMs": self.started_at_ns // 1_000_000,
            "totalMs": round(self.total_ms, 3),
            "bars": [
                {
                    "step": b.step,
                    "label": b.label,
                    "startMs": round(b.start_ms, 3),
                    "durationMs": round(b.duration_ms, 3),
                    "service": b.service,
                }
                for b in self.bars
            ],
            "slowest": self.slowest,
        }


def _label(span: dict[str, Any]) -> str:
    attributes = span.get("attributes") or {}
    step = attributes.get("feedfabric.step", "")
    if step == "mutation":
        name = attributes.get("graphql.operation.name") or attributes.get("graphql.operation.fields") or span["name"]
        return f"mutation {name}"
    if step == "broker":
        return f"broker → {attributes.get(GROUP, '?')}"
    if step == "consumer":
        swept = " from the outbox" if attributes.get("feedfabric.consumer.source") == "outbox sweep" else ""
        return f"{attributes.get(GROUP, '?')} ({attributes.get('feedfabric.event.type', '?')}{swept})"
    if step in ("fan-out batch", "timeline write"):
        followers = attributes.get("feedfabric.fanout.followers")
        inserts = attributes.get("feedfabric.fanout.inserts")
        detail = ", ".join(
            part
            for part in (
                f"{followers} followers" if followers is not None else "",
                f"{inserts} inserts" if inserts is not None else "",
            )
            if part
        )
        return f"{step} ({detail})" if detail else step
    if step == "delivery":
        return f"delivery to {attributes.get('feedfabric.realtime.subscribers', '?')} subscribers"
    return str(step)


def _is_post_journey(spans: list[dict[str, Any]]) -> bool:
    return any((s.get("attributes") or {}).get("feedfabric.event.type") == "PostCreated" for s in spans)


def journeys(spans: Iterable[dict[str, Any]], limit: int = 10) -> list[Journey]:
    """The `limit` newest post journeys among `spans` (each span once, by span ID), newest first."""
    unique: dict[str, dict[str, Any]] = {}
    for span in spans:
        if span.get("spanId") and span.get("end") is not None:
            unique.setdefault(span["spanId"], span)
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in unique.values():
        by_trace.setdefault(span["traceId"], []).append(span)
    for span in unique.values():
        for link in span.get("links") or ():
            if link.get("traceId") in by_trace and link["traceId"] != span["traceId"]:
                by_trace[link["traceId"]].append(span)
    found = [j for trace_id, trace in by_trace.items() if _is_post_journey(trace) and (j := _journey(trace_id, trace))]
    found.sort(key=lambda j: j.started_at_ns, reverse=True)
    return found[:limit]


def _order(stepped: list[dict[str, Any]]) -> Callable[[dict[str, Any]], tuple[int, int, str, bool, int]]:
    """Steps in STEPS order, except that each group's broker and consumer bars come together, the groups in
    the order the broker handed them the post (a broker bar's end, a consumer bar's start)."""
    broker = STEPS.index("broker")
    handed: dict[str, int] = {}
    for s in stepped:
        step = s["attributes"]["feedfabric.step"]
        if step in ("broker", "consumer"):
            group = str(s["attributes"].get(GROUP, ""))
            at = s["end"] if step == "broker" else s["start"]
            handed[group] = min(handed.get(group, at), at)

    def key(s: dict[str, Any]) -> tuple[int, int, str, bool, int]:
        step = s["attributes"]["feedfabric.step"]
        if step in ("broker", "consumer"):
            group = str(s["attributes"].get(GROUP, ""))
            return (broker, handed[group], group, step == "consumer", s["start"])
        return (STEPS.index(step), 0, "", False, s["start"])

    return key


def _journey(trace_id: str, spans: list[dict[str, Any]]) -> Journey | None:
    stepped = [s for s in spans if (s.get("attributes") or {}).get("feedfabric.step") in STEPS]
    if not stepped:
        return None
    if not any(s["attributes"]["feedfabric.step"] == "mutation" for s in stepped):
        # A post made over REST has no GraphQL root field: its request's server span is the mutation.
        roots = [s for s in spans if s.get("parentId") is None and s not in stepped]
        if roots:
            root = min(roots, key=lambda s: s["start"])
            stepped.append({**root, "attributes": {**(root.get("attributes") or {}), "feedfabric.step": "mutation"}})
    origin = min(s["start"] for s in spans)
    stepped.sort(key=_order(stepped))
    # An outbox row's created_at is its transaction's start: its wait is counted from the mutation's end.
    committed = max((s["end"] for s in stepped if s["attributes"]["feedfabric.step"] == "mutation"), default=0)
    bars = []
    for s in stepped:
        step = s["attributes"]["feedfabric.step"]
        start = min(max(s["start"], committed), s["end"]) if step == "outbox wait" else s["start"]
        bars.append(
            Bar(
                step=step,
                label=_label(s),
                start_ms=(start - origin) / 1e6,
                duration_ms=max(s["end"] - start, 0) / 1e6,
                service=str(s.get("service", "")),
            )
        )
    slowest = max(range(len(bars)), key=lambda i: bars[i].duration_ms)
    post_id = next(
        (str(a["feedfabric.post.id"]) for s in spans if "feedfabric.post.id" in (a := s.get("attributes") or {})),
        None,
    )
    total = max(b.start_ms + b.duration_ms for b in bars)
    return Journey(trace_id, post_id, origin, total, bars, slowest)
