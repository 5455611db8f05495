"""Every Prometheus metric FeedFabric exports, in one module on the default registry.

One place so names and labels stay consistent across the API, the relay and
the workers, and so docs/operations.md can list them all. Code elsewhere
imports the object and calls it, e.g. `metrics.HOME_FEED_PAGES.labels(source="redis").inc()`.

Each process keeps its own values: the API serves them at GET /metrics; the
relay and worker processes call `serve(settings)` to expose theirs on
METRICS_PORT. Gauges that describe shared state (outbox backlog, dead
letters) are read from Postgres at scrape time (feedfabric.db.gauges), so
any API replica reports the truth however many relays or workers run.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from feedfabric.core.settings import Settings

__all__ = [
    "CONSUMER_BATCHED",
    "CONSUMER_FILLED",
    "CONSUMER_HANDLED",
    "CONSUMER_LAG",
    "CONSUMER_RETRIES",
    "CONSUMER_SWEPT",
    "DEAD_LETTERS",
    "DEAD_LETTERS_STORED",
    "DROPPED_SUBSCRIBERS",
    "GRAPHQL_COST",
    "GRAPHQL_ERRORS",
    "GRAPHQL_LATENCY",
    "HOME_FEED_PAGES",
    "LOOP_STALLS",
    "OUTBOX_BACKLOG",
    "OUTBOX_OLDEST_AGE",
    "OUTBOX_PUBLISHED",
    "RATE_LIMITED",
    "RATE_LIMIT_FALLBACKS",
    "REALTIME_DELIVERED",
    "REALTIME_SUBSCRIBERS",
    "REDIS_MAXMEMORY",
    "REDIS_USED_MEMORY",
    "REPLICA_LAG",
    "REPLICA_USABLE",
    "REPORTS_OPEN",
    "REPORT_OLDEST_OPEN",
    "WEBSOCKET_CONNECTIONS",
    "observe_fanout",
    "sample",
    "serve",
]

log = logging.getLogger("feedfabric.metrics")

# --- GraphQL (wired by feedfabric.schema.timing) ---------------------------------
GRAPHQL_LATENCY = Histogram(
    "feedfabric_graphql_operation_duration_seconds",
    "Time to run one GraphQL query or mutation, by operation name and type.",
    ["operation", "type"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
GRAPHQL_ERRORS = Counter("feedfabric_graphql_errors_total", "GraphQL errors returned, by extensions.code.", ["code"])
GRAPHQL_COST = Histogram(
    "feedfabric_graphql_query_cost",
    "Requested cost of GraphQL operations (see docs/operations.md).",
    buckets=(1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000),
)
LOOP_STALLS = Counter(
    "feedfabric_event_loop_stalls_total",
    "Times the event loop missed its heartbeat for longer than LOOP_STALL_SECONDS (feedfabric.http.watchdog).",
)
RATE_LIMITED = Counter("feedfabric_rate_limited_total", "Operations refused with RATE_LIMITED.")
RATE_LIMIT_FALLBACKS = Counter(
    "feedfabric_rate_limit_fallbacks_total",
    "Rate-limit checks Redis did not answer in time, counted by this process's share of the budget instead.",
)

# --- Home feed (call from the home-feed reader once per page served) -------------
HOME_FEED_PAGES = Counter(
    "feedfabric_home_feed_pages_total",
    "Home-feed pages served, by source (redis, postgres, redis+postgres).",
    ["source"],
)

# --- Fan-out (call from worker-events) -------------------------------------------
FANOUT_INSERTS = Counter("feedfabric_fanout_inserts_total", "Timeline entries written by fan-out on write (ZADDs).")
FANOUT_DURATION = Histogram(
    "feedfabric_fanout_duration_seconds",
    "Time to fan one post out to every pushed follower.",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60),
)

# --- Outbox (refreshed from Postgres at scrape; the relay may add PUBLISHED) ----
OUTBOX_BACKLOG = Gauge("feedfabric_outbox_backlog", "Outbox rows not yet published.")
OUTBOX_OLDEST_AGE = Gauge(
    "feedfabric_outbox_oldest_unpublished_age_seconds", "Age of the oldest unpublished outbox row (0 when none)."
)
OUTBOX_PUBLISHED = Counter("feedfabric_outbox_published_total", "Outbox rows the relay published.")

# --- Reports (read from Postgres at scrape: moderators act on reports within 24 hours) ---
REPORTS_OPEN = Gauge("feedfabric_reports_open", "Reports no moderator has resolved yet.")
REPORT_OLDEST_OPEN = Gauge(
    "feedfabric_report_oldest_open_seconds", "Age of the oldest open report (0 when none): alert well before 24 h."
)

# --- Read replica (set by feedfabric.db.replica's monitor, a few times a second) ---
REPLICA_LAG = Gauge(
    "feedfabric_replica_lag_seconds",
    "How long the primary has been ahead of what the read replica replayed (0 when caught up); grows while it is cut off.",
)
REPLICA_USABLE = Gauge(
    "feedfabric_replica_usable",
    "1 while reads may go to the replica (it answers and lags less than the limit), else 0.",
)

# --- Consumers (call from the consumer runner) -----------------------------------
CONSUMER_LAG = Gauge(
    "feedfabric_consumer_lag",
    "Messages behind the partition's high watermark after the last batch handled.",
    ["group", "topic", "partition"],
)
CONSUMER_RETRIES = Counter(
    "feedfabric_consumer_retries_total", "Handler attempts that failed transiently and will be retried.", ["group"]
)
CONSUMER_FILLED = Counter(
    "feedfabric_consumer_filled_total",
    "Events a consumer applied from the outbox because Kafka delivered a later version of their key first.",
    ["group"],
)
CONSUMER_SWEPT = Counter(
    "feedfabric_consumer_swept_total",
    "Events a consumer applied from the outbox because Kafka had not delivered them long after publication.",
    ["group"],
)
CONSUMER_BATCHED = Counter(
    "feedfabric_consumer_batched_total",
    "Events a consumer applied in a transaction with the rest of their poll (the others went one by one).",
    ["group"],
)
CONSUMER_HANDLED = Counter("feedfabric_consumer_events_total", "Events a consumer group finished handling.", ["group"])
DEAD_LETTERS = Counter("feedfabric_dead_letters_total", "Events parked in dead_letters by this process.", ["group"])
DEAD_LETTERS_STORED = Gauge(
    "feedfabric_dead_letters_stored", "Rows in the dead_letters table (read at scrape), by group.", ["group"]
)

# --- Realtime ----------------------------------------------------------------------
WEBSOCKET_CONNECTIONS = Gauge(
    "feedfabric_websocket_connections", "Open GraphQL WebSocket connections on this API process."
)
DROPPED_SUBSCRIBERS = Counter(
    "feedfabric_realtime_dropped_subscribers_total",
    "Subscribers dropped because they could not keep up (queue full) or failed, by reason.",
    ["reason"],
)

REALTIME_SUBSCRIBERS = Gauge(
    "feedfabric_realtime_subscribers", "Live subscriptions on this API process, all channels (read at scrape)."
)
REALTIME_DELIVERED = Counter(
    "feedfabric_realtime_delivered_total", "Live items queued to subscribers by this process's realtime consumer."
)

# --- Redis (read at scrape by the API: memory against its bound, per node) ---------
REDIS_USED_MEMORY = Gauge("feedfabric_redis_used_memory_bytes", "Redis used_memory, per node.", ["node"])
REDIS_MAXMEMORY = Gauge("feedfabric_redis_maxmemory_bytes", "Redis maxmemory (0: unbounded), per node.", ["node"])


def serve(settings: Settings) -> None:
    """Exposes this process's metrics on METRICS_PORT (relay and worker processes; 0 turns it off).

    A taken port (`feedfabric dev` runs the relay and the workers on one host)
    costs the metrics of that process, never the process itself.
    """
    if not settings.metrics_port:
        return
    try:
        start_http_server(settings.metrics_port)
    except OSError as error:
        log.warning("metrics: port %d unavailable (%s); this process serves no /metrics", settings.metrics_port, error)


def observe_fanout(started: float, inserted: int) -> None:
    """Convenience for fan-out: `started = time.perf_counter()` before, then this after."""
    FANOUT_INSERTS.inc(inserted)
    FANOUT_DURATION.observe(time.perf_counter() - started)


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    """The current value of one sample (tests and debugging); 0.0 when it was never set."""
    from prometheus_client import REGISTRY

    value: Any = REGISTRY.get_sample_value(name, labels or {})
    return float(value) if value is not None else 0.0
