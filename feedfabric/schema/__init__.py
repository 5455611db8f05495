"""The served GraphQL schema: the contract's types, the roots and the extensions that guard them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import strawberry
from graphql import Executor, GraphQLError
from opentelemetry.trace import TracerProvider
from strawberry.extensions import (
    MaxAliasesLimiter,
    QueryDepthLimiter,
    SchemaExtension,
    ValidationCache,
)
from strawberry.types import ExecutionContext

from feedfabric.schema.cost import QueryCost
from feedfabric.schema.documents import MAX_TOKENS, parse_document
from feedfabric.schema.mutation import Mutation
from feedfabric.schema.operation import OperationHooks
from feedfabric.schema.query import Query
from feedfabric.schema.ratelimit import OperationRateLimit
from feedfabric.schema.subscription import Subscription
from feedfabric.schema.tracing import traced_operations
from feedfabric.schema.viewer_marks import ViewerMarks

__all__ = ["LIMIT_RULES", "MAX_ALIASES", "MAX_DEPTH", "MAX_TOKENS", "build_schema"]

MAX_DEPTH = 10
MAX_ALIASES = 30

# The depth and alias limiters make a new rule *class* per instance, and the
# validation cache keys on the rule classes: fresh limiters per request made
# every request miss the cache and re-validate (a large share of a home-feed
# page's CPU, docs/benchmarks.md). The rules are stateless, so they are made once and each
# operation's OperationHooks only adds them.
LIMIT_RULES = (
    *QueryDepthLimiter(max_depth=MAX_DEPTH).validation_rules,
    *MaxAliasesLimiter(max_alias_count=MAX_ALIASES).validation_rules,
)


class ParseCache(SchemaExtension):
    """Parses through the shared LRU, so a repeated document (every persisted query) is parsed once.

    A document that does not parse is left unset: Strawberry then parses it itself, inside the `try`
    that turns a syntax error into the operation's error result. Raised from this hook, the error
    would escape `schema.subscribe` over a WebSocket (nothing there catches it) and the client would
    get no `error` message; only a document that fails pays for two parses."""

    def on_parse(self) -> Iterator[None]:
        ec = self.execution_context
        with contextlib.suppress(GraphQLError):
            ec.graphql_document = parse_document(ec.query)
        yield


class FeedFabricSchema(strawberry.Schema):
    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        """Refused input and domain errors are answers, not incidents: only the unexpected is logged
        (feedfabric.schema.errors, from OperationHooks)."""


Engine = Callable[[ViewerMarks], type[Executor[Any]]]
"""What executes the schema's operations, given its fields' viewer marks: the app passes the engine room's
(feedfabric.adapter.execution.engine), which shares what reads the same for every viewer."""


def build_schema(tracer_provider: TracerProvider | None = None, *, engine: Engine | None = None) -> strawberry.Schema:
    """The schema; with a tracer provider (tracing on, feedfabric.core.tracing), every operation is a span too.
    Without one the schema carries no tracing extension at all: tracing off costs nothing per field.
    Without an `engine`, Strawberry's own execution context executes every operation per request."""
    traced = [traced_operations(tracer_provider)] if tracer_provider is not None else []
    marks = ViewerMarks()
    served = FeedFabricSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        # Live timeline items render once for all subscribers whose selection is viewer-independent, and a
        # post's shared part once per post version (the engine room: feedfabric.adapter.execution).
        execution_context_class=engine(marks) if engine is not None else None,
        extensions=[
            # Order matters (docs/api.md, "GraphQL over HTTP"): OperationHooks (the only on_operation hook: a
            # subscription keeps each one suspended for its whole life) times everything and sees
            # coded errors, sets the token limit before the parser cache and the limit and production
            # rules before the validation cache, and from on_execute refuses what is wrong as sent
            # (a subscription over HTTP, variables that do not coerce) or registers a persisted query
            # (a hash is resolved to its text by the HTTP endpoint, feedfabric.adapter.graphql_http); cost, then
            # the rate limit, run last, on validated documents with valid variables.
            partial(OperationHooks, LIMIT_RULES, MAX_TOKENS),
            ParseCache,
            lambda: ValidationCache(maxsize=256),
            QueryCost,
            OperationRateLimit,
            *traced,
        ],
    )
    marks.attach(served)
    return served
