"""GraphQL operation latency and error codes for Prometheus.

Listed first among the schema's extensions, so its timer covers every other
extension and it sees errors after they got their `extensions.code`.
Operation names come from clients, so a name the histogram has not seen is
only recorded while fewer than MAX_NAMES exist; after that it is "other",
which keeps a hostile client from exhausting memory with unique names.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from feedfabric import metrics

MAX_NAMES = 200
_NAME = re.compile(r"^[_A-Za-z][_0-9A-Za-z]{0,63}$")


def _label(name: str | None) -> str:
    if not name:
        return "anonymous"
    if not _NAME.match(name):
        return "other"
    known = getattr(metrics.GRAPHQL_LATENCY, "_metrics", {})
    if len(known) >= MAX_NAMES and not any(key[0] == name for key in known):
        return "other"
    return name


class OperationMetrics(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        started = time.perf_counter()
        yield
        ec = self.execution_context
        try:
            kind = ec.operation_type
        except Exception:  # noqa: BLE001 - unparsable documents have no type
            kind = None
        errors = getattr(ec.result, "errors", None) or []
        for error in errors:
            metrics.GRAPHQL_ERRORS.labels(code=str((error.extensions or {}).get("code", "UNKNOWN"))).inc()
        if kind is OperationType.SUBSCRIPTION:
            return  # its "latency" would be the subscription's lifetime
        try:
            name = ec.operation_name
        except Exception:  # noqa: BLE001
            name = None
        metrics.GRAPHQL_LATENCY.labels(operation=_label(name), type=kind.value if kind else "invalid").observe(
            time.perf_counter() - started
        )
