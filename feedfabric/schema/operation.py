"""The schema's work around each operation, in one extension with one `on_operation` hook.

Strawberry runs each extension's `on_operation` as a generator context
manager that stays suspended until the operation ends, and a subscription's
operation ends when its socket does. Six such hooks (timing, error codes,
persisted queries, production guards, the validation limits and the token
limit, each its own extension) were a large share of every idle
subscription's memory (about 6 kB, measured with bench/realtime.py): the suspended generators, the context-manager objects and the exit stack
that holds them, and the extension instances. Here one hook spans the
operation, and it only does what must happen before parsing or after the
result: noting a persisted query to register, and timing. What belongs to one step is
done in that step's hook, which finishes with the step: the token limit
in `on_parse`, the validation rules in `on_validate` (a document whose fragments
expand past MAX_EXPANDED_FIELDS, feedfabric.schema.selections, is refused there,
before any validation rule walks it), in `on_execute` a refusal (a document of
that shape, a malformed persisted query, a subscription over HTTP, variables
that do not coerce) or else the persisted query's registration, and the
error handling on each result.

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
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from graphql import DocumentNode
from graphql.error import GraphQLError
from graphql.validation import ASTValidationRule, NoFragmentCyclesRule
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionContext
from strawberry.types.graphql import OperationType

from feedfabric.core.errors import FeedFabricError, QueryTooComplex
from feedfabric.schema.documents import UNNAMED_OF_SEVERAL, several_operations
from feedfabric.schema.errors import code_errors
from feedfabric.schema.persisted import Registration
from feedfabric.schema.production import (
    PRODUCTION_RULES,
    is_production,
    without_suggestions,
)
from feedfabric.schema.ratelimit import spend_refused
from feedfabric.schema.refusal import app_context, refuse, refuse_before_execution
from feedfabric.schema.replica_reads import after_operation, before_execute
from feedfabric.schema.selections import (
    MAX_EXPANDED_FIELDS,
    MAX_MERGED_PAIRS,
    expanded_size,
    has_fragment_cycle,
    merged_pairs,
)
from feedfabric.schema.timing import count_errors, observe_latency
from feedfabric.schema.variables import variable_errors

__all__ = ["screen"]

Rules = tuple[type[ASTValidationRule], ...]

_CYCLE_RULES: Rules = (NoFragmentCyclesRule,)
VALIDATION_FAILED = "GRAPHQL_VALIDATION_FAILED"
"""The code of a document refused for a fragment cycle (other validation errors are BAD_USER_INPUT)."""

SUBSCRIPTION_OVER_HTTP = (
    "Subscriptions are served over the WebSocket at /graphql (graphql-transport-ws or graphql-ws), not over HTTP."
)


def _unnamed_of_several(execution_context: ExecutionContext) -> bool:
    """The GraphQL spec's GetOperation: a request that names no operation must send a document of one.
    Strawberry runs the first one instead, which would run a mutation the client did not name."""
    context = app_context(execution_context)
    document = execution_context.graphql_document
    return context is not None and context.operation_unnamed and document is not None and several_operations(document)


def _on_websocket(execution_context: ExecutionContext) -> bool:
    """Whether the operation came over a socket; outside the app (plain schema tests) it counts as one."""
    context = app_context(execution_context)
    if context is None:
        return True
    return getattr(context.request, "scope", {}).get("type") == "websocket"


@lru_cache(maxsize=16)
def _joined(base: Rules, extra: Rules) -> Rules:
    """One tuple per combination of rules, shared by every operation: an operation (a subscription's,
    for its whole life) keeps its rules, and the validation cache compares them on every lookup."""
    return base + extra


def shape_refusal(document: DocumentNode) -> FeedFabricError | None:
    """Documents whose shape makes validation itself expensive (feedfabric.schema.selections)."""
    size = expanded_size(document)
    if size > MAX_EXPANDED_FIELDS:
        return QueryTooComplex(
            f"The query expands to {size} fields through its fragments; the maximum is "
            f"{MAX_EXPANDED_FIELDS}. Spread each fragment fewer times."
        )
    pairs = merged_pairs(document)
    if pairs > MAX_MERGED_PAIRS:
        return QueryTooComplex(
            f"The query selects the same fields so many times that checking they merge takes {pairs} "
            f"comparisons; the maximum is {MAX_MERGED_PAIRS}. Select each field once."
        )
    return None


def _validation_failed(error: GraphQLError) -> GraphQLError:
    return GraphQLError(
        error.message,
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        extensions={"code": VALIDATION_FAILED},
    )


@dataclass(frozen=True)
class Screening:
    """What a document's shape leaves validation to do, decided before any rule walks it."""

    cyclic: bool = False
    refusal: FeedFabricError | None = None

    @property
    def rules(self) -> Rules:
        """For a document that may not meet every rule: graphql-core's cycle rule alone, which words the
        refusal, or no rule at all (the validation cache's pass is then one linear visit, and the
        refusal is answered from on_execute, where the rate limit spends)."""
        return _CYCLE_RULES if self.cyclic else ()


def screen(document: DocumentNode) -> Screening:
    """A fragment cycle first, since every other analysis follows spreads; then the shape."""
    if has_fragment_cycle(document):
        return Screening(cyclic=True)
    return Screening(refusal=shape_refusal(document))


class OperationHooks(SchemaExtension):
    """Persisted queries, limits, production guards, error codes and metrics, for one operation."""

    def __init__(self, limit_rules: Rules, max_tokens: int) -> None:
        self.limit_rules = limit_rules
        self.max_tokens = max_tokens
        self.refusal: FeedFabricError | None = None
        self.registration: Registration | None = None
        self.budget_refusal: FeedFabricError | None = None
        self.streamed = False
        self.cyclic = False

    async def on_operation(self) -> AsyncIterator[None]:
        started = time.perf_counter()
        if app_context(self.execution_context) is not None:
            try:
                self.registration = Registration.requested(self.execution_context)
            except FeedFabricError as refusal:
                self.refusal = refusal
        yield
        if not self.streamed:  # a streamed result was handled as it went out (on_stream_result)
            result = self.execution_context.result
            self._answer(getattr(result, "initial_result", None) or result)
        await after_operation(self.execution_context)  # the member's next reads see this mutation's writes
        observe_latency(self.execution_context, started)

    async def on_parse(self) -> AsyncIterator[None]:
        self.execution_context.parse_options["max_tokens"] = self.max_tokens
        yield
        if self.execution_context.graphql_document is None:  # it did not parse
            await self._spend_refused(with_variables=True)  # its variables were read all the same

    async def on_validate(self) -> AsyncIterator[None]:
        ec = self.execution_context
        if ec.graphql_document is not None:
            screening = screen(ec.graphql_document)
            self.cyclic = screening.cyclic
            self.refusal = self.refusal or screening.refusal
            if screening.cyclic or screening.refusal is not None:
                ec.validation_rules = screening.rules
                yield
                return
        extra = self.limit_rules + PRODUCTION_RULES if is_production(ec) else self.limit_rules
        ec.validation_rules = _joined(ec.validation_rules, extra)
        yield
        if ec.pre_execution_errors:  # a rule refused it: the guards of on_execute never see it
            await self._spend_refused(with_variables=True)

    async def _spend_refused(self, *, with_variables: bool = False) -> None:
        """A document refused at parse or validation, or for its variables, spends for the work it caused
        (feedfabric.schema.ratelimit); past the budget its answer is the rate limit's refusal."""
        allowance = await spend_refused(self.execution_context, with_variables=with_variables)
        if allowance is not None:
            self.execution_context.extensions_results["rateLimit"] = allowance.as_extension()
            self.budget_refusal = allowance.refusal

    async def on_execute(self) -> AsyncIterator[None]:
        ec = self.execution_context
        if self.refusal is not None:
            refuse(ec, self.refusal)
            yield
            return
        subscription = ec.operation_type is OperationType.SUBSCRIPTION
        if _unnamed_of_several(ec):  # the HTTP endpoint and the sockets refuse it first; any other caller here
            refuse_before_execution(ec, [GraphQLError(UNNAMED_OF_SEVERAL, extensions={"code": "BAD_USER_INPUT"})])
        elif subscription and not _on_websocket(ec):
            refuse_before_execution(ec, [GraphQLError(SUBSCRIPTION_OVER_HTTP, extensions={"code": "BAD_USER_INPUT"})])
        elif errors := variable_errors(ec, hide_suggestions=is_production(ec)):
            coded = [GraphQLError(e.message, extensions={"code": "BAD_USER_INPUT"}) for e in errors]
            await self._spend_refused(with_variables=True)  # the bytes it made us read, on every transport
            if subscription:  # a stream has no result slot: Strawberry makes the raised error its one result
                raise coded[0]
            refuse_before_execution(ec, coded)
        elif self.registration is not None:  # parsed and validated: the text may be stored
            refusal = await self.registration.store(app_context(ec))
            if refusal is not None:
                refuse(ec, refusal)
        before_execute(ec)  # a mutation reads back what it wrote: from the primary
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
        if self.budget_refusal is not None:
            errors = [GraphQLError(self.budget_refusal.message, extensions={"code": self.budget_refusal.code})]
        if is_production(self.execution_context):
            errors = without_suggestions(errors)
        elif self.cyclic:
            errors = [_validation_failed(error) for error in errors]
        result.errors = code_errors(errors)
        count_errors(result.errors)
