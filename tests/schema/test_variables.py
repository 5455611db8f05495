"""The quick check of built-in scalar variables agrees with GraphQL's own coercion, value for value."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from feedfabric.app import schema
from feedfabric.schema.variables import input_schema, schema_sdl, variable_errors
from graphql import get_operation_ast, get_variable_values, parse

QUERY = """query($i: Int, $n: Int!, $f: Float, $s: String, $b: Boolean, $id: ID, $d: Int! = 3) {
  homeFeed(first: $n) { source } }"""
BASE: dict[str, Any] = {"n": 1}
VALUES: list[dict[str, Any]] = [
    {},
    {"n": None},
    {"n": 2**31 - 1},
    {"n": 2**31},
    {"n": -(2**31)},
    {"n": -(2**31) - 1},
    {"n": 2**63},
    {"n": 3.0},
    {"n": 3.5},
    {"n": True},
    {"n": "3"},
    {"i": None},
    {"f": 1},
    {"f": 1.5},
    {"f": float("inf")},
    {"f": False},
    {"s": "x"},
    {"s": 1},
    {"b": True},
    {"b": 0},
    {"id": "x"},
    {"id": 5},
    {"id": 5.5},
    {"d": None},
    {"d": "x"},
]


@pytest.mark.parametrize("values", VALUES, ids=repr)
def test_quick_check_agrees_with_full_coercion(values: dict[str, Any]) -> None:
    document = parse(QUERY)
    variables = {**BASE, **values}
    context = SimpleNamespace(schema=schema, graphql_document=document, operation_name=None, variables=variables)
    operation = get_operation_ast(document)
    assert operation is not None and operation.variable_definitions
    full = get_variable_values(input_schema(schema_sdl(schema)), operation.variable_definitions, variables)
    assert bool(variable_errors(context, hide_suggestions=True)) == isinstance(full, list)  # type: ignore[arg-type]
