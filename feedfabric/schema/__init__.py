"""The served GraphQL schema: the contract's types, the roots and the extensions that guard them."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import strawberry
from graphql import GraphQLError
from strawberry.extensions import (
    MaxAliasesLimiter,
    ParserCache,
    QueryDepthLimiter,
    ValidationCache,
)
from strawberry.types import ExecutionContext

from feedfabric.schema.cost import QueryCost
from feedfabric.schema.mutation import Mutation
from feedfabric.schema.operation import OperationHooks
from feedfabric.schema.query import Query
from feedfabric.schema.ratelimit import OperationRateLimit
from feedfabric.schema.shared import SharedRenderingExecutionContext
from feedfabric.schema.subscription import Subscription

MAX_DEPTH = 10
MAX_ALIASES = 30
MAX_TOKENS = 2000

# The depth and alias limiters make a new rule *class* per instance, and the
# validation cache keys on the rule classes: fresh limiters per request made
# every request miss the cache and re-validate (a large share of a home-feed
# page's CPU, docs/benchmarks.md). The rules are stateless, so they are made once and each
# operation's OperationHooks only adds them.
_LIMIT_RULES = (
    *QueryDepthLimiter(max_depth=MAX_DEPTH).validation_rules,
    *MaxAliasesLimiter(max_alias_count=MAX_ALIASES).validation_rules,
)


class CachedParse(ParserCache):
    """Strawberry's parser cache, but a document that does not parse is left to Strawberry's own parse.

    ParserCache parses in its `on_parse` hook, outside the `try` in which Strawberry turns a syntax
    error into the operation's error result. `execute` (HTTP) catches what escapes, but `stream` (both
    WebSocket protocols) does not, so the error would escape the socket's operation task instead of
    reaching the client as an `error` message. Leaving the document unset makes Strawberry parse it
    again, inside that `try`; only a document that fails pays twice."""

    def on_parse(self) -> Iterator[None]:
        ec = self.execution_context
        try:
            ec.graphql_document = self.cached_parse_document(ec.query, **ec.parse_options)
        except GraphQLError:
            ec.graphql_document = None
        yield


class FeedFabricSchema(strawberry.Schema):
    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        """Refused input and domain errors are answers, not incidents: only the unexpected is logged
        (feedfabric.schema.errors, from OperationHooks)."""


def build_schema() -> strawberry.Schema:
    return FeedFabricSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        # Live timeline items render once for all subscribers whose selection is viewer-independent.
        execution_context_class=SharedRenderingExecutionContext,
        extensions=[
            # Order matters (docs/operations.md): OperationHooks (the only on_operation hook: a
            # subscription keeps each one suspended for its whole life) times everything and sees
            # coded errors, sets the token limit before the parser cache and the limit and production
            # rules before the validation cache, and from on_execute refuses what is wrong as sent
            # (a subscription over HTTP, variables that do not coerce) or registers a persisted query
            # (a hash is resolved to its text by the HTTP view, feedfabric.graphql_http); cost, then
            # the rate limit, run last, on validated documents with valid variables.
            partial(OperationHooks, _LIMIT_RULES, MAX_TOKENS),
            lambda: CachedParse(maxsize=256),
            lambda: ValidationCache(maxsize=256),
            QueryCost,
            OperationRateLimit,
        ],
    )


schema = build_schema()
