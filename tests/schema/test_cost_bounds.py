"""A query's cost is never less than the objects it can return."""

from __future__ import annotations

import asyncpg
import pytest
from feedfabric.app import schema
from feedfabric.core.models import SAMPLE_ACTORS
from feedfabric.core.settings import Settings
from feedfabric.feeds import moderation_terms, ranking
from feedfabric.feeds.moderation_terms import MAX_TERMS
from feedfabric.feeds.paging import MAX_PAGE
from feedfabric.feeds.posts import MAX_MEDIA_PER_POST, MAX_MENTIONS_PER_POST
from feedfabric.feeds.safety import MAX_MUTED_WORDS
from feedfabric.resolvers.foryou import MAX_STATS_DAYS, STATS_ROWS_PER_DAY
from feedfabric.schema.core_schema import graphql_schema, metadata_of
from feedfabric.schema.cost import MAX_ITEMS, operation_cost
from graphql import (
    GraphQLField,
    GraphQLObjectType,
    get_named_type,
    get_nullable_type,
    is_composite_type,
    is_list_type,
    parse,
)

from tests.support import Api


def test_feed_stats_costs_every_day_it_can_return() -> None:
    """`feedStats(days:)` returns a row a day per feed and preset, for up to MAX_STATS_DAYS (366), and
    cost a page (100)."""
    query = f"{{ feedStats(days: {MAX_STATS_DAYS}) {{ __typename }} }}"
    assert operation_cost(graphql_schema(schema), parse(query), None, {}) >= MAX_STATS_DAYS * STATS_ROWS_PER_DAY


def _lists_without_first() -> dict[str, GraphQLField]:
    """Every field of the served schema that returns a list of objects and takes no `first`, but a
    connection's `edges` (as many as the connection's `first`)."""
    served = graphql_schema(schema)
    return {
        f"{t.name}.{name}": field
        for t in served.type_map.values()
        if isinstance(t, GraphQLObjectType) and not t.name.startswith("__")
        for name, field in t.fields.items()
        if is_list_type(get_nullable_type(field.type))
        and is_composite_type(get_named_type(field.type))
        and "first" not in field.args
        and not (t.name.endswith("Connection") and name == "edges")
    }


MOST_RETURNED = {
    "Post.media": MAX_MEDIA_PER_POST,
    "Post.mentions": MAX_MENTIONS_PER_POST,
    "NotificationGroup.sampleActors": SAMPLE_ACTORS,
    "Query.feedStats": MAX_STATS_DAYS * STATS_ROWS_PER_DAY,
    "Query.mutedWords": MAX_MUTED_WORDS,
    "Query.moderationTerms": MAX_TERMS,
    "Query.favourites": next(m.le for m in Settings.model_fields["favourite_limit"].metadata if hasattr(m, "le")),
    "RankerModel.weights": len(ranking.SIGNALS),
}
"""What bounds each such field's resolver: the cap its writes keep, or the setting's upper bound."""


def test_every_list_without_first_is_costed_at_least_what_it_can_return() -> None:
    """The cost counts such a list at its declared `max_items`, else a page (100). `mutedWords` (up to
    1,000) and `moderationTerms` (no cap at all) were counted 100: a query cost less than the objects it
    returned. A new list field fails here until its bound is stated."""
    fields = _lists_without_first()
    assert set(fields) == set(MOST_RETURNED)
    for name, field in fields.items():
        declared = metadata_of(field).get(MAX_ITEMS)
        assert (declared if isinstance(declared, int) else MAX_PAGE) >= MOST_RETURNED[name], name


async def test_a_member_with_every_muted_word_pays_for_each(api: Api, pool: asyncpg.Pool) -> None:
    alice = await api.member("alice")
    member_id = await pool.fetchval("SELECT id FROM members WHERE username = 'alice'")
    await pool.execute(
        "INSERT INTO muted_words (id, member_id, phrase) SELECT gen_random_uuid(), $1, 'w' || g"
        " FROM generate_series(1, $2::int) g",
        member_id,
        MAX_MUTED_WORDS,
    )
    body = await api.raw("{ mutedWords { id } }", token=alice)
    assert len(body["data"]["mutedWords"]) == MAX_MUTED_WORDS
    assert body["extensions"]["cost"]["requestedQueryCost"] >= MAX_MUTED_WORDS


async def test_moderation_terms_are_capped_and_their_list_pays_for_each(
    api: Api, pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = await api.member("root", admin=True)
    add = "mutation($p: String!) { addModerationTerm(phrase: $p) { phrase } }"
    monkeypatch.setattr(moderation_terms, "MAX_TERMS", 3)
    for phrase in ("one", "two", "three"):
        await api.gql(add, {"p": phrase}, token=admin)
    assert await api.error_codes(add, {"p": "four"}, token=admin) == ["LIMIT_REACHED"]
    assert (await api.gql(add, {"p": "TWO"}, token=admin))["addModerationTerm"] == {"phrase": "two"}  # known
    body = await api.raw("{ moderationTerms { id } }", token=admin)
    assert len(body["data"]["moderationTerms"]) == 3
    assert body["extensions"]["cost"]["requestedQueryCost"] >= MAX_TERMS
