"""The served schema as graphql-core types, for the analyses that walk a document before execution.

Strawberry keeps its graphql-core schema private, so this is built from the
schema's public SDL (`as_str`), once per schema: the same types, fields and
arguments by name, which is all the cost walk and the tests' validation read.
The SDL carries no field metadata, so each field's Strawberry metadata (the
cost's `max_items` bound) is copied onto the built field's extensions under
`METADATA`, looked up through Strawberry's public `get_type_by_name` and name
converter.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from graphql import GraphQLField, GraphQLInterfaceType, GraphQLObjectType, GraphQLSchema, build_schema
from strawberry import Schema
from strawberry.types.base import StrawberryObjectDefinition

METADATA = "feedfabric.metadata"


@cache
def graphql_schema(schema: Schema) -> GraphQLSchema:
    built = build_schema(schema.as_str())
    names = schema.config.name_converter
    for name, served in built.type_map.items():
        if name.startswith("__") or not isinstance(served, GraphQLObjectType | GraphQLInterfaceType):
            continue
        definition = schema.get_type_by_name(name)
        if not isinstance(definition, StrawberryObjectDefinition):
            continue
        for field in definition.fields:
            target = served.fields.get(names.get_graphql_name(field))
            if target is not None and field.metadata:
                target.extensions = {**(target.extensions or {}), METADATA: dict(field.metadata)}
    return built


def metadata_of(field: GraphQLField) -> dict[str, Any]:
    """The Strawberry metadata of a field of `graphql_schema`'s schema (empty when it declares none)."""
    return (field.extensions or {}).get(METADATA) or {}
