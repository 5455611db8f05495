"""The served schema as graphql-core types, for the analyses that walk a document before execution.

Strawberry keeps its graphql-core schema private, so this is built from the
schema's public SDL (`as_str`), once per schema: the same types, fields and
arguments by name, which is all the cost walk and the tests' validation read.
The SDL carries no field metadata, so each field's Strawberry metadata (the
cost's `max_items` bound on output lists; on input fields and arguments, the
most items a list input may hold, feedfabric.schema.input_bounds) is copied
onto the built field's or argument's extensions under `METADATA`, looked up
through Strawberry's public `get_type_by_name` and name converter.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from graphql import (
    GraphQLArgument,
    GraphQLField,
    GraphQLInputField,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLObjectType,
    GraphQLSchema,
    build_schema,
)
from strawberry import Schema
from strawberry.types.base import StrawberryObjectDefinition

__all__ = ["graphql_schema", "metadata_of"]

METADATA = "feedfabric.metadata"


@cache
def graphql_schema(schema: Schema) -> GraphQLSchema:
    built = build_schema(schema.as_str())
    names = schema.config.name_converter
    for name, served in built.type_map.items():
        kinds = GraphQLObjectType | GraphQLInterfaceType | GraphQLInputObjectType
        if name.startswith("__") or not isinstance(served, kinds):
            continue
        definition = schema.get_type_by_name(name)
        if not isinstance(definition, StrawberryObjectDefinition):
            continue
        for field in definition.fields:
            target = served.fields.get(names.get_graphql_name(field))
            if target is None:
                continue
            if field.metadata:
                target.extensions = {**(target.extensions or {}), METADATA: dict(field.metadata)}
            if isinstance(target, GraphQLField):
                _copy_argument_metadata(field.arguments, target, names)
    return built


def _copy_argument_metadata(arguments: Any, target: GraphQLField, names: Any) -> None:
    for argument in arguments:
        served = target.args.get(names.from_argument(argument))
        if served is not None and argument.metadata:
            served.extensions = {**(served.extensions or {}), METADATA: dict(argument.metadata)}


def metadata_of(field: GraphQLField | GraphQLInputField | GraphQLArgument) -> dict[str, Any]:
    """The Strawberry metadata of a field, input field or argument of `graphql_schema`'s schema (empty
    when it declares none)."""
    return (field.extensions or {}).get(METADATA) or {}
