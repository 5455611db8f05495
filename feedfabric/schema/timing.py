"""GraphQL operation latency and error codes for Prometheus (called by feedfabric.schema.operation).

The latency covers every other extension's work, and errors are counted
after they got their `extensions.code`. Operation names come from clients,
so a name is only recorded as itself while fewer than MAX_NAMES have been
(this module keeps that set itself); after that it is "other", which keeps a
hostile client from exhausting memory with unique names.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from graphql import GraphQLError
from strawberry.types import ExecutionContext
from strawberry.types.graphql import OperationType

from feedfabric.core import metrics

MAX_NAMES = 200
# The operation names recorded as labels so far in this process; bounded by MAX_NAMES.
_named: set[str] = set()
_NAME = re.compile(r"^[_A-Za-z][_0-9A-Za-z]{0,63}$")


def _label(name: str | None) -> str:
    if not name:
        return "anonymous"
    if not _NAME.match(name):
        return "other"
    if name in _named:
        return name
    if len(_named) >= MAX_NAMES:
        return "other"
    _named.add(name)
    return name


def count_errors(errors: Iterable[GraphQLError]) -> None:
    """One count per error returned, by its `extensions.code`."""
    for error in errors:
        metrics.GRAPHQL_ERRORS.labels(code=str((error.extensions or {}).get("code", "UNKNOWN"))).inc()


def observe_latency(execution_context: ExecutionContext, started: float) -> None:
    """The operation's duration since `started` (perf_counter), by name and type; not for subscriptions,
    whose "latency" would be their lifetime."""
    ec = execution_context
    try:
        kind = ec.operation_type
    except Exception:  # noqa: BLE001 - unparsable documents have no type
        kind = None
    if kind is OperationType.SUBSCRIPTION:
        return
    try:
        name = ec.operation_name
    except Exception:  # noqa: BLE001
        name = None
    metrics.GRAPHQL_LATENCY.labels(operation=_label(name), type=kind.value if kind else "invalid").observe(
        time.perf_counter() - started
    )
