"""The schema's work around each operation, in one extension with one `on_operation` hook.

Strawberry runs each extension's `on_operation` as a generator context
manager that stays suspended until the operation ends, and a subscription's
operation ends when its socket does. Six such hooks (timing, error codes,
persisted queries, production guards, the validation limits and the token
limit, each its own extension) were a large share of every idle
subscription's memory (docs/benchmarks.md, design measurements): the suspended generators, the context-manager objects and the exit stack
that holds them, and the extension instances. Here one hook spans the
operation, and it only does what must happen before parsing or after the
result: resolving a persisted query, and timing. What belongs to one step is
done in that step's hook, which finishes with the step: the token limit
in `on_parse`, the validation rules in `on_validate`, a refusal in
`on_execute`, the error handling on each result.

Every result, returned once (queries and mutations over HTTP) or streamed
(WebSocket, one per event), gets the same treatment, in this order: field
suggestions stripped in production (feedfabric.schema.production), every
error coded and the unexpected masked (feedfabric.schema.errors), then the
errors counted by code (feedfabric.schema.timing). Latency is observed when
the operation ends.

Listed first among the schema's extensions (feedfabric.schema), so its
`on_parse`, `on_validate` and `on_execute` run before the parser and
validation caches and before the cost and rate-limit guards.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from functools import lru_cache
from typing import Any

from graphql.validation import ASTValidationRule
from strawberry.extensions import SchemaExtension

from feedfabric.errors import FeedFabricError
from feedfabric.schema.errors import code_errors
from feedfabric.schema.persisted import resolve_persisted_query
from feedfabric.schema.production import (
    PRODUCTION_RULES,
    is_production,
    without_suggestions,
)
from feedfabric.schema.refusal import refuse
from feedfabric.schema.timing import count_errors, observe_latency

Rules = tuple[type[ASTValidationRule], ...]


@lru_cache(maxsize=16)
def _joined(base: Rules, extra: Rules) -> Rules:
    """One tuple per combination of rules, shared by every operation: an operation (a subscription's,
    for its whole life) keeps its rules, and the validation cache compares them on every lookup."""
    return base + extra


class OperationHooks(SchemaExtension):
    """Persisted queries, limits, production guards, error codes and metrics, for one operation."""

    def __init__(self, limit_rules: Rules, max_tokens: int) -> None:
        self.limit_rules = limit_rules
        self.max_tokens = max_tokens
        self.refusal: FeedFabricError | None = None
        self.streamed = False

    async def on_operation(self) -> AsyncIterator[None]:
        started = time.perf_counter()
        self.refusal = await resolve_persisted_query(self.execution_context)
        yield
        if not self.streamed:  # a streamed result was handled as it went out (on_stream_result)
            result = self.execution_context.result
            self._answer(getattr(result, "initial_result", None) or result)
        observe_latency(self.execution_context, started)

    def on_parse(self) -> Iterator[None]:
        self.execution_context.parse_options["max_tokens"] = self.max_tokens
        yield

    def on_validate(self) -> Iterator[None]:
        ec = self.execution_context
        extra = self.limit_rules + PRODUCTION_RULES if is_production(ec) else self.limit_rules
        ec.validation_rules = _joined(ec.validation_rules, extra)
        yield

    def on_execute(self) -> Iterator[None]:
        if self.refusal is not None:
            refuse(self.execution_context, self.refusal)
        yield

    def on_stream_result(self, result: Any) -> Iterator[None]:
        """Before each streamed result reaches the client, incremental-delivery frames included."""
        self.streamed = True
        self._answer(result)
        for part in (*(getattr(result, "incremental", None) or ()), *(getattr(result, "completed", None) or ())):
            self._answer(part)
        yield

    def _answer(self, result: Any) -> None:
        """The result's errors as the client gets them: no suggestions in production, coded, counted."""
        errors = getattr(result, "errors", None)
        if not errors:
            return
        if is_production(self.execution_context):
            errors = without_suggestions(errors)
        result.errors = code_errors(errors)
        count_errors(result.errors)
