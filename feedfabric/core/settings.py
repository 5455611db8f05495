"""Configuration from the environment; the names and defaults are public (docs/api.md, "Environment")."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "load_settings"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", frozen=True)

    database_url: str | None = None
    # A streaming replica for reads that may lag (feedfabric.db.replica); unset: every read goes to DATABASE_URL.
    database_read_url: str | None = None
    # Past this lag (or when it does not answer) the replica is not read from.
    read_replica_max_lag_ms: int = Field(2_000, ge=0)
    # How long after a member's write their reads go to the primary, unless the replica replayed it sooner.
    read_your_writes_seconds: float = Field(30.0, ge=0)
    redis_url: str | None = None
    # REDIS_URL names one node of a Redis Cluster (feedfabric.db.redisclient).
    redis_cluster: bool = False
    kafka_bootstrap_servers: str | None = None
    feedfabric_jwt_secret: str | None = None
    # The longest a token may still be valid for (its `exp` from now); a token past it is refused.
    jwt_max_lifetime_seconds: int = Field(30 * 86_400, ge=60)

    feed_max_length: int = Field(500, ge=1)
    fanout_batch_size: int = Field(1000, ge=1)
    celebrity_follower_threshold: int = Field(10_000, ge=0)
    inactive_after_days: int = Field(14, ge=0)
    outbox_batch_size: int = Field(100, ge=1)
    outbox_idle_ms: int = Field(500, ge=1)
    outbox_retention_hours: int = Field(72, ge=1)
    outbox_shards: int = Field(16, ge=1, le=1024)
    kafka_topic_partitions: int = Field(6, ge=1)
    # Namespaces topics so several systems (or test runs) can share one broker.
    kafka_topic_prefix: str = ""
    # Consumer group liveness: a consumer silent this long is removed and its partitions reassigned.
    kafka_session_timeout_ms: int = Field(10_000, ge=1000)
    kafka_heartbeat_interval_ms: int = Field(3_000, ge=100)
    # A published event no consumer of a group has applied this long after publication is applied
    # from the outbox by the group's sweep: a broker may lose acknowledged records.
    consumer_sweep_after_s: float = Field(30.0, ge=0.1)
    # How long topics the workers create keep records: the longest a redelivery can trail its event,
    # so it also bounds how long each group's record of applied events must be kept.
    kafka_retention_hours: int = Field(168, ge=1)

    # Parked payloads kept for inspection and replay by hand (`feedfabric maintain` deletes older ones).
    dead_letter_retention_days: int = Field(30, ge=1)
    # How often each worker process runs one pass of `feedfabric maintain` (0: never).
    maintain_interval_seconds: float = Field(3600.0, ge=0)

    @property
    def processed_events_retention_hours(self) -> int:
        """Twice the longer of the broker's and the outbox's retention: Kafka drops a segment only
        once its newest record has aged out, so a record may outlive its retention by a segment."""
        return 2 * max(self.kafka_retention_hours, self.outbox_retention_hours)

    feedfabric_data_dir: Path = Path(".feedfabric")
    feedfabric_instance: str | None = None
    feedfabric_dev_mode: bool = False
    # The dev stack's own secret (`feedfabric dev` makes one and prints it in the playground's URL):
    # /dev/token mints an admin token only for a caller that sends it (feedfabric.http.playground).
    feedfabric_dev_secret: str = ""

    post_max_length: int = Field(5000, ge=1)
    comment_max_length: int = Field(2000, ge=1)
    favourite_limit: int = Field(30, ge=1, le=100)  # `favourites` returns them all: at most a page (its query cost)
    max_body_bytes: int = Field(1_000_000, ge=1024)
    redis_timeout_ms: int = Field(250, ge=1)
    # The longest one Postgres statement may wait (pools and the relay's own connection): a connection to a
    # host that was cut off fails after it instead of hanging until TCP gives up.
    database_command_timeout_seconds: float = Field(30.0, gt=0)
    # Workers' Redis commands (fan-out, rebuilds): a node cut off fails the batch, which is retried, instead of
    # hanging the consumer; longer than the API's, since a fan-out pipeline carries many commands.
    worker_redis_timeout_ms: int = Field(2_000, ge=1)
    # An HTTP request still running this long ends with 503 SERVICE_UNAVAILABLE (a store that stopped answering
    # must not hold a client past it); 0: no limit. WebSockets are not bounded by it.
    request_timeout_seconds: float = Field(30.0, ge=0)
    redis_breaker_cooldown_ms: int = Field(5000, ge=0)
    # Each dependency /readyz checks answers within it or reads as down (a balancer's own probe timeout is longer).
    readiness_check_timeout_seconds: float = Field(0.5, gt=0, le=30)

    # Engagement: a comment says more about a member's taste than a like.
    like_weight: float = Field(1.0, gt=0)
    comment_weight: float = Field(3.0, gt=0)
    # Media uploads: bytes of the original, decoded pixels, longest side served.
    media_max_bytes: int = Field(20_000_000, ge=1024)
    media_max_pixels: int = Field(50_000_000, ge=1)
    media_max_side: int = Field(2048, ge=16)
    # Worker memory one image may take to decode and rebuild (feedfabric.feeds.photos's estimate); larger
    # images are rejected as too_many_pixels before any pixel is decoded.
    media_decode_max_bytes: int = Field(200_000_000, ge=1_000_000)
    # Stored media bytes per member (pending originals and rebuilt files); past it, QUOTA_EXCEEDED.
    media_quota_bytes: int = Field(1_000_000_000, ge=0)
    # similarPosts compares against at most this many of the newest embedded posts.
    similar_scan_limit: int = Field(5_000, ge=1)
    # worker-embeddings: model replicas encoding in parallel, one CPU thread each.
    embedding_replicas: int = Field(2, ge=1, le=16)
    # For You (docs/foryou.md): candidates ranked per request, how long a ranked chain of pages is
    # kept in Redis, and the days of feed log kept (daily partitions).
    foryou_candidates: int = Field(800, ge=1, le=10_000)
    foryou_snapshot_ttl_seconds: int = Field(1800, ge=1)
    feed_log_retention_days: int = Field(30, ge=1)
    # False only to measure what the feed log costs a page (bench/home_feed.py); refused in production,
    # where every served page is logged.
    feed_log_enabled: bool = True
    # How often the feed log's writer folds the exposure it counted into Postgres (For You ranks with
    # those counts, so they lag serving by up to this; the log's own rows are exact either way).
    feed_log_fold_seconds: float = Field(10.0, ge=0, le=300)
    # The worker retrains the ranker daily when at least this many new log rows have a known outcome.
    ranker_retrain_min_rows: int = Field(10_000, ge=1)

    # Public-API limits and production switches (docs/operations.md).
    feedfabric_production: bool = False  # no introspection, GraphiQL or field suggestions
    graphql_max_cost: int = Field(10_000, ge=1)
    rate_limit_operations: int = Field(600, ge=1)  # root fields per member (or client IP) per window
    rate_limit_window_seconds: int = Field(60, ge=1)
    rate_limit_cost: int = Field(60_000, ge=1)  # query cost (feedfabric.schema.cost) per member per window
    # API instances sharing the budgets: while Redis cannot answer in time, each instance counts its share
    # (the budgets divided by this) in process instead (feedfabric.feeds.ratelimit).
    rate_limit_instances: int = Field(1, ge=1)
    persisted_query_ttl_seconds: int = Field(7 * 86_400, ge=60)
    ws_allowed_origins: str = ""  # comma-separated origins allowed to open cross-origin WebSockets
    cors_allowed_origins: str = ""  # comma-separated origins allowed to call /graphql and REST from a browser
    # Peers whose X-Forwarded-For names the client (comma-separated addresses or networks): the balancer.
    # The signed-out rate limit counts per client address, so behind an untrusted balancer every
    # signed-out client would share its one budget. uvicorn takes the rightmost untrusted address.
    forwarded_allow_ips: str = "127.0.0.1,::1"
    max_subscriptions_per_connection: int = Field(10, ge=1)
    ws_max_sockets_per_member: int = Field(20, ge=1)  # open WebSockets per member, across instances
    # Messages one WebSocket may send a second (a ping too: each costs the event loop); past it, closed 1008.
    ws_max_messages_per_second: int = Field(100, ge=1)
    # How long a new WebSocket may wait before its connection_init (then closed, 4408).
    ws_init_timeout_seconds: float = Field(10.0, gt=0, le=60)
    # How often open WebSockets are checked for an expired token or a suspended member (then closed, 4403).
    ws_rights_check_seconds: float = Field(2.0, gt=0, le=10)
    # Live items queued per subscriber; a subscriber this far behind is disconnected as too slow.
    realtime_queue_size: int = Field(256, ge=1)
    # Bytes one WebSocket may have unsent (queued, or being written to a peer that does not read); past
    # it, closed 1013 (feedfabric.adapter.websocket.connection). Times WS_MAX_SOCKETS_PER_MEMBER: what one
    # member can park.
    ws_max_unsent_bytes: int = Field(1_048_576, ge=65_536)
    # The realtime consumer's fetch wait: some brokers (Tansu) hold a fetch this long even when data
    # arrives sooner, so it bounds the latency every live item adds; Apache Kafka answers at once.
    realtime_fetch_wait_ms: int = Field(20, ge=1)
    # An event loop that misses its heartbeat this long is logged with its stack and counted (feedfabric.http.watchdog).
    loop_stall_seconds: float = Field(1.0, gt=0, le=60)
    # How long a stopping API may finish what it serves; a loop still stalled this long after SIGTERM exits.
    shutdown_grace_seconds: float = Field(10.0, gt=0, le=300)
    # Observability: relay and worker processes serve /metrics on this port.
    metrics_port: int = Field(9100, ge=0)
    # Tracing (feedfabric.core.tracing): the share of new traces kept (parent-based: a continued trace follows
    # its parent's choice); unset: 1.0 in dev, 0.1 otherwise; 0: off.
    tracing_sample_ratio: float | None = Field(None, ge=0, le=1)
    # Recent traces each process keeps in memory (and, in dev, in FEEDFABRIC_DATA_DIR/traces) for the
    # dashboard's Journeys view; unset: 300 in dev, 0 otherwise.
    tracing_recent_traces: int | None = Field(None, ge=0)
    # The OpenTelemetry SDK's standard variables: OTLP export goes where they say (the exporter reads them).
    otel_exporter_otlp_endpoint: str | None = None
    otel_exporter_otlp_traces_endpoint: str | None = None
    otel_service_name: str | None = None
    otel_sdk_disabled: bool = False
    log_level: str = "INFO"
    log_format: str = "json"  # or "text"

    @model_validator(mode="after")
    def _feed_log_in_production(self) -> Settings:
        if self.feedfabric_production and not self.feed_log_enabled:
            raise ValueError("FEED_LOG_ENABLED=false is for benchmarks; production logs every served page")
        return self

    @cached_property
    def jwt_secret(self) -> str:
        if not self.feedfabric_jwt_secret:
            raise RuntimeError("FEEDFABRIC_JWT_SECRET is not set")
        return self.feedfabric_jwt_secret

    @property
    def trace_sample_ratio(self) -> float:
        """TRACING_SAMPLE_RATIO, or its default: every trace in dev, one in ten otherwise."""
        if self.tracing_sample_ratio is not None:
            return self.tracing_sample_ratio
        return 1.0 if self.feedfabric_dev_mode else 0.1

    @property
    def recent_traces_kept(self) -> int:
        """TRACING_RECENT_TRACES, or its default: 300 in dev, none otherwise."""
        if self.tracing_recent_traces is not None:
            return self.tracing_recent_traces
        return 300 if self.feedfabric_dev_mode else 0

    @property
    def otlp_endpoint(self) -> str | None:
        return self.otel_exporter_otlp_traces_endpoint or self.otel_exporter_otlp_endpoint

    @property
    def cors_origins(self) -> list[str]:
        return [o.strip().rstrip("/") for o in self.cors_allowed_origins.split(",") if o.strip()]


def load_settings(**overrides: object) -> Settings:
    return Settings(**overrides)  # type: ignore[arg-type]
