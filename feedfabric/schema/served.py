"""The served schema as graphql-core types, for the analyses that walk a document before execution.

Strawberry keeps its graphql-core schema private, so this is built from the
schema's public SDL (`as_str`), once per schema: the same types, fields and
arguments by name, which is all the cost walk and the tests' validation read.
"""

from __future__ import annotations

from functools import cache

from graphql import GraphQLSchema, build_schema
from strawberry import Schema


@cache
def graphql_schema(schema: Schema) -> GraphQLSchema:
    return build_schema(schema.as_str())
