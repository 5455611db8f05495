"""The served GraphQL schema: the contract's types, the roots and the extensions that guard them."""

from __future__ import annotations

import strawberry
from strawberry.extensions import MaxAliasesLimiter, MaxTokensLimiter, ParserCache, QueryDepthLimiter, ValidationCache

from feedfabric.schema.errors import ErrorCodes
from feedfabric.schema.mutation import Mutation
from feedfabric.schema.query import Query

MAX_DEPTH = 10
MAX_ALIASES = 30
MAX_TOKENS = 2000


def build_schema() -> strawberry.Schema:
    return strawberry.Schema(
        query=Query,
        mutation=Mutation,
        extensions=[
            ErrorCodes,
            lambda: QueryDepthLimiter(max_depth=MAX_DEPTH),
            lambda: MaxAliasesLimiter(max_alias_count=MAX_ALIASES),
            lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
            lambda: ParserCache(maxsize=256),
            lambda: ValidationCache(maxsize=256),
        ],
    )


schema = build_schema()
