"""Topic names with the deployment's prefix, and creating the missing ones: the workers and the realtime consumer
both read the topics, so both find them here."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from feedfabric.core.events import TOPICS
from feedfabric.core.settings import Settings

__all__ = ["all_topic_names", "ensure_topics", "topic_name"]

log = logging.getLogger(__name__)


def topic_name(settings: Settings, base: str) -> str:
    return settings.kafka_topic_prefix + base


def all_topic_names(settings: Settings) -> list[str]:
    return [topic_name(settings, t) for t in TOPICS]


async def ensure_topics(settings: Settings, names: Iterable[str] | None = None) -> list[str]:
    """Creates the missing topics (KAFKA_TOPIC_PARTITIONS each) and returns the names it created.

    Replication is 3 where the cluster has three brokers, else what it has,
    so the same code serves the one-node dev broker and production. Records
    are kept KAFKA_RETENTION_HOURS in segments of a seventh of that, which
    bounds how old a redelivered record can be (see
    `Settings.processed_events_retention_hours`).
    """
    wanted = list(all_topic_names(settings) if names is None else names)
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers or "")
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [t for t in wanted if t not in existing]
        if not missing:
            return []
        cluster = await admin.describe_cluster()
        replicas = max(1, min(3, len(cluster.get("brokers", [])) or 1))
        retention_ms = settings.kafka_retention_hours * 3_600_000
        configs = {"retention.ms": str(retention_ms), "segment.ms": str(max(retention_ms // 7, 60_000))}
        response = await admin.create_topics(
            [NewTopic(t, settings.kafka_topic_partitions, replicas, topic_configs=configs) for t in missing]
        )
        created = []
        for name, code, *_rest in response.topic_errors:
            if code == 0:
                created.append(name)
            elif code != 36:  # TOPIC_ALREADY_EXISTS: another worker won the race
                raise RuntimeError(f"creating topic {name} failed with Kafka error code {code}")
        if created:
            log.info("created topics %s", ", ".join(created))
        return created
    finally:
        await admin.close()
