"""The consumer groups `feedfabric worker` can run, by name. One line per handler module."""

from __future__ import annotations

from feedfabric.workers.base import GroupSpec

__all__ = ["all_groups"]


def all_groups() -> dict[str, GroupSpec]:
    from feedfabric.workers import embeddings, engagement, events, media, notifications

    specs = [
        events.GROUP,
        engagement.GROUP,
        embeddings.GROUP,
        media.GROUP,
        notifications.GROUP,
    ]
    return {spec.name: spec for spec in specs}
