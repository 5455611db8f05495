"""Every analysis that runs before execution ends, and does work linear in the document.

A fragment cycle is refused by graphql-core's own rule before any walk that
follows spreads can meet it. The bound on the rest is a property: the lines
of Python each analysis executes (counted, not timed) stay under a constant
times the document's tokens, on documents generated from the served schema
and on families built to be expensive.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from feedfabric.app import schema
from feedfabric.core.settings import Settings
from feedfabric.schema import LIMIT_RULES
from feedfabric.schema.core_schema import graphql_schema
from feedfabric.schema.cost import operation_cost
from feedfabric.schema.operation import screen
from feedfabric.schema.ratelimit import root_field_count
from feedfabric.schema.selections import has_fragment_cycle
from graphql import (
    DocumentNode,
    GraphQLSchema,
    Lexer,
    Source,
    TokenKind,
    assert_valid_schema,
    parse,
    specified_rules,
    validate,
)
from hypothesis import HealthCheck, given, settings
from hypothesis_graphql import queries

from tests.linework import WorkExceeded, counting_lines
from tests.realtime_support import serve, ws_client
from tests.support import Api

SERVED: GraphQLSchema = graphql_schema(schema)
# graphql-core validates a schema once, on its first validation (about 22,000 lines for ours): that is the
# schema's work, paid once per process, not any document's, so it is done here before anything is counted.
assert_valid_schema(SERVED)

CYCLES = {
    "through a field": "fragment A on Member { favourites { ...A } } query { viewer { id } }",
    "directly": "fragment A on Member { id ...A } query { viewer { ...A } }",
    "through another fragment": (
        "fragment A on Member { followers { edges { node { ...B } } } } "
        "fragment B on Member { id ...A } query { viewer { ...A } }"
    ),
    "through an inline fragment": "fragment A on Member { ... on Member { following { edges { node { ...A } } } } } "
    "query { viewer { id } }",
    "unreached by the operation": "query { viewer { id } } fragment A on Member { ...B } fragment B on Member { ...A }",
}


def codes(body: dict[str, Any]) -> list[str]:
    return [e.get("extensions", {}).get("code") for e in body.get("errors") or []]


@pytest.mark.parametrize("document", CYCLES.values(), ids=CYCLES.keys())
def test_a_fragment_cycle_is_found(document: str) -> None:
    assert has_fragment_cycle(parse(document))


def test_fragments_that_share_without_a_cycle_are_not_a_cycle() -> None:
    ladder = " ".join(f"fragment F{i} on Query {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, 30))
    document = parse(f"query {{ ...F29 }} fragment F0 on Query {{ viewer {{ id }} }} {ladder}")
    assert not has_fragment_cycle(document)


@pytest.mark.parametrize("document", CYCLES.values(), ids=CYCLES.keys())
async def test_a_fragment_cycle_is_refused_over_http_as_graphql_core_words_it(api: Api, document: str) -> None:
    body = await asyncio.wait_for(api.raw(document), 10)
    assert codes(body) and set(codes(body)) == {"GRAPHQL_VALIDATION_FAILED"}
    assert all(e["message"].startswith("Cannot spread fragment") for e in body["errors"])
    assert body.get("data") is None


async def test_the_68_byte_cycle_leaves_the_api_answering(settings: Settings) -> None:
    async with serve(settings) as server:
        cycle = CYCLES["through a field"]
        refused = await asyncio.wait_for(server.api.raw(cycle), 10)
        assert codes(refused) == ["GRAPHQL_VALIDATION_FAILED"]
        assert (await server.api.client.get("/healthz")).status_code == 200


@pytest.mark.parametrize("protocol", ["graphql-transport-ws", "graphql-ws"])
async def test_a_fragment_cycle_is_refused_over_both_socket_protocols(settings: Settings, protocol: str) -> None:
    async with serve(settings) as server:
        token = await server.api.member("looper")
        async with ws_client(server, protocol, token) as ws:
            await ws.subscribe(
                "subscription { homeTimeline { id ...A } } fragment A on Post { author { ...B } } "
                "fragment B on Member { posts { edges { node { ...A } } } }"
            )
            message = await ws.next_message()
            assert message["type"] == "error", message
            payload = message["payload"]
            errors = payload if isinstance(payload, list) else payload.get("errors", [payload])
            assert errors and all(e["message"].startswith("Cannot spread fragment") for e in errors), message
            assert (await server.api.client.get("/healthz")).status_code == 200


# --- the work each analysis does -------------------------------------------------------

LINES_PER_TOKEN = 1_000
"""The bound's constant. The most measured is about 750 a token: validation of a fragment spread so
often that it expands to just under MAX_EXPANDED_FIELDS fields."""
FIXED_LINES = 12_000
"""What an analysis may spend whatever the document: a validation pass sets up every rule (about
6,300 lines for `{ followedTags }`)."""


def tokens(text: str) -> int:
    lexer = Lexer(Source(text))
    count = 0
    while lexer.advance().kind is not TokenKind.EOF:
        count += 1
    return count


def analyses(document: DocumentNode) -> Iterator[tuple[str, Callable[[], object]]]:
    """The analyses in the order an operation meets them, each only when the ones before it let the
    document through: the screening before validation (feedfabric.schema.operation), validation with
    the rules the screening leaves, then the cost and the rate limit's root fields."""
    yield "screening (cycles, expanded size, merge pairs)", lambda: screen(document)
    screening = screen(document)
    every_rule = (*specified_rules, *LIMIT_RULES)
    rules = screening.rules if screening.cyclic or screening.refusal else every_rule
    yield "validation", lambda: validate(SERVED, document, rules)
    if screening.cyclic or screening.refusal or validate(SERVED, document, rules):
        return
    yield "cost", lambda: operation_cost(SERVED, document, None, {})
    yield "root fields", lambda: root_field_count(document, None)


def assert_linear(text: str) -> None:
    budget = LINES_PER_TOKEN * tokens(text) + FIXED_LINES
    for name, analysis in analyses(parse(text)):
        with counting_lines(budget) as lines:
            try:
                analysis()
            except WorkExceeded:
                pytest.fail(f"{name} ran past {budget} lines on a document of {tokens(text)} tokens: {text[:200]}")
        assert lines[0] <= budget, name


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(queries(SERVED))
def test_every_analysis_is_linear_on_documents_of_the_served_schema(query: str) -> None:
    assert_linear(query)


def field_cycle(n: int) -> str:
    chain = " ".join(
        f"fragment A{i} on Member {{ id followers {{ edges {{ node {{ ...A{(i + 1) % n} }} }} }} }}" for i in range(n)
    )
    return f"query {{ viewer {{ ...A0 }} }} {chain}"


def doubling(n: int) -> str:
    ladder = " ".join(f"fragment F{i} on Query {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, n + 1))
    return f"query {{ ...F{n} }} fragment F0 on Query {{ viewer {{ id username }} }} {ladder}"


def nested_spreads(n: int) -> str:
    chain = " ".join(f"fragment N{i} on Member {{ id ...N{i + 1} }}" for i in range(n))
    return f"query {{ viewer {{ ...N0 }} }} {chain} fragment N{n} on Member {{ username }}"


def wide_fragment(n: int) -> str:
    fields = " ".join(f"f{i}: username" for i in range(n))
    spreads = " ".join("...W" for _ in range(n))
    return f"query {{ viewer {{ {spreads} }} }} fragment W on Member {{ {fields} }}"


def deep(n: int) -> str:
    levels = min(n, 30)  # graphql-core's parser refuses deeper nesting itself
    path = ["viewer"] + ["followers { edges { node" for _ in range(levels)]
    return "{ " + " { ".join(path) + " { id }" + " } } }" * levels + " }"


def inline_on_every_type(n: int) -> str:
    types = [name for name in SERVED.type_map if not name.startswith("__")]
    inline = " ".join(f"... on {t} {{ __typename }}" for t in types[:n])
    return f"query {{ viewer {{ id {inline} }} }}"


def repeated_aliases(n: int) -> str:
    return "{ " + " ".join(f"a{i % 7}: viewer {{ id }}" for i in range(n)) + " }"


FAMILIES: dict[str, Callable[[int], str]] = {
    "cycles through fields": field_cycle,
    "fragments spreading the next twice": doubling,
    "nested fragment spreads": nested_spreads,
    "wide fragments spread widely": wide_fragment,
    "deep selections": deep,
    "inline fragments on every type": inline_on_every_type,
    "repeated aliases": repeated_aliases,
}


@pytest.mark.parametrize("family", FAMILIES.values(), ids=FAMILIES.keys())
@pytest.mark.parametrize("n", [2, 16, 44, 120])
def test_every_analysis_is_linear_on_adversarial_documents(family: Callable[[int], str], n: int) -> None:
    assert_linear(family(n))
