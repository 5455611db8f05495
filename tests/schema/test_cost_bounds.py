"""A query's cost is never less than the objects it can return."""

from __future__ import annotations

from feedfabric.app import schema
from feedfabric.resolvers.foryou import MAX_STATS_DAYS, STATS_ROWS_PER_DAY
from feedfabric.schema.core_schema import graphql_schema
from feedfabric.schema.cost import operation_cost
from graphql import parse


def test_feed_stats_costs_every_day_it_can_return() -> None:
    """`feedStats(days:)` returns a row a day per feed and preset, for up to MAX_STATS_DAYS (366), and
    cost a page (100)."""
    query = f"{{ feedStats(days: {MAX_STATS_DAYS}) {{ __typename }} }}"
    assert operation_cost(graphql_schema(schema), parse(query), None, {}) >= MAX_STATS_DAYS * STATS_ROWS_PER_DAY
