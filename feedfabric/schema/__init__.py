"""The served GraphQL schema: the contract's types, the roots and the extensions that guard them."""

from __future__ import annotations

import strawberry
from graphql import GraphQLError
from strawberry.extensions import (
    AddValidationRules,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    ParserCache,
    QueryDepthLimiter,
    SchemaExtension,
    ValidationCache,
)
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.types import ExecutionContext

from feedfabric.realtime.live import LIVE_OPERATION
from feedfabric.schema.cost import QueryCost
from feedfabric.schema.errors import ErrorCodes
from feedfabric.schema.mutation import Mutation
from feedfabric.schema.persisted import PersistedQueries
from feedfabric.schema.production import ProductionGuards
from feedfabric.schema.query import Query
from feedfabric.schema.ratelimit import OperationRateLimit
from feedfabric.schema.shared import SharedEventExecutor
from feedfabric.schema.subscription import Subscription
from feedfabric.schema.timing import OperationMetrics

MAX_DEPTH = 10
MAX_ALIASES = 30
MAX_TOKENS = 2000

# The depth and alias limiters make a new rule *class* per instance, and the
# validation cache keys on the rule classes: fresh limiters per request made
# every request miss the cache and re-validate (about a third of a home-feed
# page's CPU). The rules are stateless, so they are made once and each
# request's extension instance only adds them.
_LIMIT_RULES = (
    *QueryDepthLimiter(max_depth=MAX_DEPTH).validation_rules,
    *MaxAliasesLimiter(max_alias_count=MAX_ALIASES).validation_rules,
)


def _limit_rules() -> AddValidationRules:
    return AddValidationRules(list(_LIMIT_RULES))


class FeedFabricSchema(strawberry.Schema):
    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        """Refused input and domain errors are answers, not incidents: only the unexpected is logged (ErrorCodes)."""

    def create_extensions_runner(
        self, execution_context: ExecutionContext, extensions: list[SchemaExtension]
    ) -> SchemaExtensionsRunner:
        """Called once per operation, in the operation's task: a socket operation's pre-encoded messages
        (feedfabric.realtime.live) carry the same extension results as Strawberry's, from this runner."""
        runner = super().create_extensions_runner(execution_context, extensions)
        live = LIVE_OPERATION.get()
        if live is not None and live.runner is None:
            live.runner, live.execution_context = runner, execution_context
        return runner


def build_schema() -> strawberry.Schema:
    return FeedFabricSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        # Live timeline items render once for all subscribers whose selection is viewer-independent.
        execution_context_class=SharedEventExecutor,
        extensions=[
            # Order matters (docs/operations.md): timing wraps everything and sees coded errors;
            # persisted queries fill in the text before parsing; production rules join validation
            # before its cache; cost, then the rate limit, run last, on validated documents.
            OperationMetrics,
            ErrorCodes,
            PersistedQueries,
            ProductionGuards,
            _limit_rules,
            lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
            lambda: ParserCache(maxsize=256),
            lambda: ValidationCache(maxsize=256),
            QueryCost,
            OperationRateLimit,
        ],
    )


schema = build_schema()
