"""Cutting a post's trace into the Journeys view's steps."""

from __future__ import annotations

from typing import Any

from feedfabric.http.journeys import journeys

MS = 1_000_000


def span(trace: str, span_id: str, step: str, start_ms: int, end_ms: int, **attributes: Any) -> dict[str, Any]:
    return {
        "traceId": trace,
        "spanId": span_id,
        "parentId": None,
        "name": step,
        "service": "feedfabric-test",
        "start": start_ms * MS,
        "end": end_ms * MS,
        "attributes": {"feedfabric.step": step, **attributes},
        "links": [],
    }


def post_trace(trace: str, at_ms: int) -> list[dict[str, Any]]:
    return [
        span(trace, f"{trace}-m", "mutation", at_ms, at_ms + 20, **{"graphql.operation.name": "Post"}),
        span(trace, f"{trace}-w", "outbox wait", at_ms + 5, at_ms + 30),
        span(trace, f"{trace}-r", "relay", at_ms + 30, at_ms + 35, **{"feedfabric.event.type": "PostCreated"}),
        span(trace, f"{trace}-f", "fan-out batch", at_ms + 40, at_ms + 140, **{"feedfabric.fanout.followers": 9}),
    ]


def test_steps_come_in_the_order_a_post_takes_them_and_the_slowest_is_named() -> None:
    [journey] = journeys(post_trace("a", 1000))
    assert [b.step for b in journey.bars] == ["mutation", "outbox wait", "relay", "fan-out batch"]
    assert journey.bars[journey.slowest].label == "fan-out batch (9 followers)"
    assert journey.total_ms == 140


def test_the_outbox_wait_counts_from_the_mutations_end_not_its_transactions_start() -> None:
    [journey] = journeys(post_trace("a", 1000))
    wait = journey.bars[1]
    assert (wait.start_ms, wait.duration_ms) == (20, 10)


def test_a_delivery_linked_from_another_posts_trace_shows_in_both_journeys() -> None:
    delivery = span("b", "b-d", "delivery", 1200, 1210, **{"feedfabric.realtime.subscribers": 3})
    delivery["links"] = [{"traceId": "a", "spanId": "a-r"}]
    found = {j.trace_id: j for j in journeys([*post_trace("a", 1000), *post_trace("b", 1100), delivery])}
    assert [j.trace_id for j in journeys([*post_trace("a", 1000), *post_trace("b", 1100), delivery])] == ["b", "a"]
    assert found["a"].bars[-1].label == "delivery to 3 subscribers"
    assert found["b"].bars[-1].label == "delivery to 3 subscribers"


def test_traces_of_anything_but_a_new_post_are_no_journeys() -> None:
    like = [
        span("c", "c-m", "mutation", 0, 5),
        span("c", "c-r", "relay", 6, 7, **{"feedfabric.event.type": "PostLiked"}),
    ]
    assert journeys(like) == []


def test_a_post_made_over_rest_has_its_request_as_the_mutation() -> None:
    request = span("d", "d-h", "", 0, 15)
    del request["attributes"]["feedfabric.step"]
    request["name"] = "POST /posts"
    trace = [request, span("d", "d-r", "relay", 20, 22, **{"feedfabric.event.type": "PostCreated"})]
    trace[1]["parentId"] = "d-h"
    [journey] = journeys(trace)
    assert [(b.step, b.label) for b in journey.bars] == [("mutation", "mutation POST /posts"), ("relay", "relay")]


def test_each_consumer_group_is_a_bar_after_its_time_in_the_broker_the_groups_in_the_order_they_got_the_post() -> None:
    trace = post_trace("e", 0)[:3]
    group = "messaging.consumer.group.name"
    event = {"feedfabric.event.type": "PostCreated"}
    trace += [
        span("e", "e-b2", "broker", 36, 50, **{group: "worker-notifications"}),
        span("e", "e-c2", "consumer", 50, 52, **{group: "worker-notifications"}, **event),
        span("e", "e-b1", "broker", 36, 40, **{group: "worker-events"}),
        span("e", "e-c1", "consumer", 40, 90, **{group: "worker-events"}, **event),
        span("e", "e-f", "fan-out batch", 41, 80, **{"feedfabric.fanout.followers": 2}),
        span(
            "e",
            "e-c3",
            "consumer",
            300,
            301,
            **{group: "worker-embeddings", "feedfabric.consumer.source": "outbox sweep"},
            **event,
        ),
    ]
    [journey] = journeys(trace)
    assert [b.label for b in journey.bars] == [
        "mutation Post",
        "outbox wait",
        "relay",
        "broker → worker-events",
        "worker-events (PostCreated)",
        "broker → worker-notifications",
        "worker-notifications (PostCreated)",
        "worker-embeddings (PostCreated from the outbox)",
        "fan-out batch (2 followers)",
    ]
    assert journey.bars[journey.slowest].label == "worker-events (PostCreated)"
