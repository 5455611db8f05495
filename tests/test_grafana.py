"""The provisioned Grafana dashboards (deploy/grafana) ask only for metrics the code exports.

Every panel's query must name at least one FeedFabric metric, and every name
it uses must be one feedfabric.core.metrics registers (with the suffix its type
exports: _total for a counter, _bucket/_count/_sum for a histogram), so a
renamed metric fails here rather than as an empty panel in production.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from feedfabric.core import metrics  # noqa: F401 - registers every FeedFabric metric
from prometheus_client import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
METRIC = re.compile(r"\b(feedfabric_[a-z0-9_]+)")
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "gauge": ("",),
    "summary": ("_count", "_sum", ""),
}
# What an operator opens the dashboard for (issue: request rate, errors and latency per operation; outbox lag;
# consumer lag per group; fan-out inserts; home-feed source share; live subscribers and delivered events;
# Redis memory against maxmemory): each must be on some panel.
REQUIRED = (
    "feedfabric_graphql_operation_duration_seconds_count",
    "feedfabric_graphql_errors_total",
    "feedfabric_graphql_operation_duration_seconds_bucket",
    "feedfabric_outbox_oldest_unpublished_age_seconds",
    "feedfabric_consumer_lag",
    "feedfabric_fanout_inserts_total",
    "feedfabric_home_feed_pages_total",
    "feedfabric_realtime_subscribers",
    "feedfabric_realtime_delivered_total",
    "feedfabric_redis_used_memory_bytes",
    "feedfabric_redis_maxmemory_bytes",
)


def exported_series() -> set[str]:
    """The series names FeedFabric's metrics expose, by their registered types (labelled ones included)."""
    names = set()
    for family in REGISTRY.collect():
        if family.name.startswith("feedfabric_"):
            names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for panel in dashboard.get("panels", []):
        found.append(panel)
        found += panel.get("panels", [])  # rows hold their panels
    return [p for p in found if p.get("type") != "row"]


def unknown_metrics(dashboard: dict[str, Any], exported: set[str]) -> dict[str, set[str]]:
    """Per panel title, the metric names its queries use that nothing exports, and '<none>' for a panel without
    a query or with a query that names no FeedFabric metric."""
    problems = {}
    for panel in panels(dashboard):
        missing: set[str] = set()
        targets = panel.get("targets") or [{}]
        for target in targets:
            used = set(METRIC.findall(target.get("expr", "")))
            missing |= used - exported if used else {"<none>"}
        if missing:
            problems[panel["title"]] = missing
    return problems


def test_there_are_dashboards_to_check() -> None:
    assert DASHBOARDS


def test_every_panel_queries_only_metrics_the_code_exports() -> None:
    exported = exported_series()
    for path in DASHBOARDS:
        assert unknown_metrics(json.loads(path.read_text()), exported) == {}, path.name


def test_the_check_catches_a_renamed_metric() -> None:
    dashboard = {"panels": [{"title": "lag", "targets": [{"expr": "max(feedfabric_outbox_lag_seconds)"}]}]}
    assert unknown_metrics(dashboard, exported_series()) == {"lag": {"feedfabric_outbox_lag_seconds"}}
    bare = {"panels": [{"title": "up", "targets": [{"expr": "up"}]}]}
    assert unknown_metrics(bare, exported_series()) == {"up": {"<none>"}}
    # Each query on its own: a panel's second query naming nothing of ours is caught beside a good first one.
    mixed = {"panels": [{"title": "mixed", "targets": [{"expr": "feedfabric_consumer_lag"}, {"expr": "up"}]}]}
    assert unknown_metrics(mixed, exported_series()) == {"mixed": {"<none>"}}
    empty = {"panels": [{"title": "empty", "targets": []}]}
    assert unknown_metrics(empty, exported_series()) == {"empty": {"<none>"}}


def test_the_dashboards_cover_what_an_operator_opens_them_for() -> None:
    used = {
        name
        for path in DASHBOARDS
        for panel in panels(json.loads(path.read_text()))
        for target in panel.get("targets", [])
        for name in METRIC.findall(target.get("expr", ""))
    }
    assert set(REQUIRED) - used == set()


def test_panels_use_a_provisioned_data_source() -> None:
    provisioned = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "datasources.yaml").read_text())
    uids = {source["uid"] for source in provisioned["datasources"]}
    for path in DASHBOARDS:
        for panel in panels(json.loads(path.read_text())):
            for target in panel["targets"]:
                assert target["datasource"]["uid"] in uids, (path.name, panel["title"])


def test_compose_mounts_the_provisioning_and_the_dashboards() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    grafana = compose["services"]["grafana"]["volumes"]
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro" in grafana
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "dashboards.yaml").read_text())
    path = provider["providers"][0]["options"]["path"]
    assert f"./deploy/grafana/dashboards:{path}:ro" in grafana
