"""Every public-API limit accepts just under its bound and refuses just past it."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
import strawberry
from feedfabric.app import create_app
from feedfabric.core.settings import Settings
from feedfabric.ops.devstack import free_port
from feedfabric.schema import MAX_ALIASES, MAX_DEPTH, MAX_TOKENS
from feedfabric.schema.core_schema import graphql_schema
from feedfabric.schema.cost import operation_cost
from feedfabric.schema.documents import MAX_DOCUMENT_CHARS
from graphql import get_introspection_query

from tests.support import Api


@asynccontextmanager
async def api_with(settings: Settings, **overrides: Any) -> AsyncIterator[Api]:
    """The `api` fixture's app, with some settings changed."""
    changed = settings.model_copy(update=overrides)
    app = create_app(changed)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            api = Api(client, changed)
            api.app = app  # type: ignore[attr-defined]
            yield api


def codes(body: dict[str, Any]) -> list[str]:
    return [e.get("extensions", {}).get("code") for e in body.get("errors") or []]


# --- depth, aliases, tokens, body size -------------------------------------------------

_CYCLE = ["posts(first: 1)", "edges", "node", "author"]


def nested(levels: int) -> str:
    """A valid query `levels` fields deep (root field first, `__typename` last)."""
    fields = ['member(username: "nobody")'] + [_CYCLE[i % 4] for i in range(levels - 2)]
    return "{ " + "".join(f"{f} {{ " for f in fields) + "__typename" + " }" * len(fields) + " }"


async def test_depth_limit(api: Api) -> None:
    # Root fields are depth 0, so MAX_DEPTH allows MAX_DEPTH + 1 levels of fields.
    assert codes(await api.raw(nested(MAX_DEPTH + 1))) == []
    refused = await api.raw(nested(MAX_DEPTH + 2))
    assert codes(refused) == ["BAD_USER_INPUT"]
    assert "depth" in refused["errors"][0]["message"]


async def test_alias_limit(api: Api) -> None:
    def aliased(n: int) -> str:
        return "{ " + " ".join(f"a{i}: viewer {{ id }}" for i in range(n)) + " }"

    assert codes(await api.raw(aliased(MAX_ALIASES))) == []
    refused = await api.raw(aliased(MAX_ALIASES + 1))
    assert codes(refused) == ["BAD_USER_INPUT"]
    assert "aliases" in refused["errors"][0]["message"]


def _lexer_tokens(query: str) -> int:
    from graphql.language import Lexer, Source, TokenKind

    lexer, count = Lexer(Source(query)), 0
    while lexer.advance().kind != TokenKind.EOF:
        count += 1
    return count


async def test_token_limit(api: Api) -> None:
    def padded(list_items: int) -> str:
        # A list default is cheap padding: repeated fields would trip the overlap check first.
        return (
            "mutation($m: [ID!] = [" + " 1" * list_items + " ]) "
            '{ createPost(input: {content: "x", mediaIds: $m}) { id } }'
        )

    frame = _lexer_tokens(padded(0))
    at_limit, past_limit = padded(MAX_TOKENS - frame), padded(MAX_TOKENS - frame + 1)
    assert _lexer_tokens(at_limit) == MAX_TOKENS
    # Signed out, the mutation runs and is refused for that reason, not for its size.
    assert codes(await api.raw(at_limit)) == ["UNAUTHENTICATED"]
    refused = await api.raw(past_limit)
    assert codes(refused) == ["BAD_USER_INPUT"]
    assert "tokens" in refused["errors"][0]["message"]


async def test_a_document_past_the_character_cap_is_refused_before_it_is_parsed(api: Api) -> None:
    query = "{ viewer { id } }"
    at_limit = "#" * (MAX_DOCUMENT_CHARS - len(query) - 1) + "\n" + query
    assert (await api.raw(at_limit))["data"] == {"viewer": None}
    past_limit = "#" + at_limit
    response = await api.client.post("/graphql", json={"query": past_limit})
    assert (response.status_code, codes(response.json())) == (400, ["BAD_USER_INPUT"])
    assert "characters" in response.json()["errors"][0]["message"]
    get = await api.client.get("/graphql", params={"query": past_limit}, headers={"Accept": "application/json"})
    assert (get.status_code, codes(get.json())) == (400, ["BAD_USER_INPUT"])


async def test_body_size_limit(api: Api) -> None:
    limit = api.settings.max_body_bytes

    def body(size: int) -> bytes:
        frame = json.dumps({"query": "{ __typename }", "variables": {"pad": ""}}).encode()
        padded = json.dumps({"query": "{ __typename }", "variables": {"pad": "x" * (size - len(frame))}}).encode()
        assert len(padded) == size
        return padded

    headers = {"content-type": "application/json"}
    ok = await api.client.post("/graphql", content=body(limit), headers=headers)
    assert ok.status_code == 200
    too_big = await api.client.post("/graphql", content=body(limit + 1), headers=headers)
    assert too_big.status_code == 413


# --- cost ------------------------------------------------------------------------------

HOME_COST = "query($n: Int) { homeFeed(first: $n) { edges { node { author { username } } } } }"


def test_cost_model() -> None:
    from feedfabric.app import schema
    from graphql import parse

    def cost(query: str, variables: dict[str, Any] | None = None) -> int:
        return operation_cost(graphql_schema(schema), parse(query), None, variables)

    # 1 (homeFeed) + n edges + n nodes + n authors
    assert cost(HOME_COST, {"n": 20}) == 61
    assert cost(HOME_COST, {}) == 61  # the schema's default `first`
    # pageInfo is one object per connection: only the lists beneath a connection take its `first`.
    assert cost("{ homeFeed(first: 5) { edges { node { id } } pageInfo { hasNextPage } } }") == 1 + 5 + 5 + 1
    # Nested connections multiply.
    nested_query = """{ member(username: "x") { posts(first: 10) { edges { node {
        comments(first: 10) { edges { node { id } } } } } } } }"""
    assert cost(nested_query) == 1 + 1 + 10 + 10 + 10 + 100 + 100
    # Fragments count like the fields they hold; scalars and __typename are free.
    assert cost("query { ...F } fragment F on Query { homeFeed(first: 2) { edges { node { id } } } }") == 5
    assert cost("{ __typename viewer { id username } }") == 1


async def test_cost_limit_exact_bound(api: Api, settings: Settings) -> None:
    async with api_with(settings, graphql_max_cost=61) as limited:
        token = await limited.member("costly")
        ok = await limited.raw(HOME_COST, {"n": 20}, token=token)
        assert codes(ok) == []
        assert ok["extensions"]["cost"] == {"requestedQueryCost": 61, "maximumAvailable": 61}
        refused = await limited.raw(HOME_COST, {"n": 21}, token=token)
        assert codes(refused) == ["QUERY_TOO_COMPLEX"]
        assert refused["data"] is None
        assert refused["extensions"]["cost"]["requestedQueryCost"] == 64


async def test_cost_limit_default(api: Api) -> None:
    token = await api.member("deep")

    def two_levels(a: int, b: int) -> str:
        return (
            f'{{ member(username: "deep") {{ posts(first: {a}) {{ edges {{ node {{ author {{ '
            f"posts(first: {b}) {{ edges {{ node {{ id }} }} }} }} }} }} }} }} }}"
        )

    # 2 + 4a + 2ab: a=50, b=97 costs 9,902; b=99 costs 10,102 (the default maximum is 10,000).
    ok = await api.raw(two_levels(50, 97), token=token)
    assert codes(ok) == [] and ok["extensions"]["cost"]["requestedQueryCost"] == 9902
    refused = await api.raw(two_levels(50, 99), token=token)
    assert codes(refused) == ["QUERY_TOO_COMPLEX"]


async def test_every_response_reports_cost(api: Api) -> None:
    ok = await api.raw("{ viewer { id } }")
    assert ok["extensions"]["cost"]["requestedQueryCost"] == 1
    invalid = await api.raw("{ nope }")
    assert codes(invalid) == ["BAD_USER_INPUT"]
    assert "cost" in invalid["extensions"]
    token = await api.member("mutator")
    created = await api.raw('mutation { createPost(input: {content: "hi"}) { id author { id } } }', token=token)
    assert codes(created) == [] and created["extensions"]["cost"]["requestedQueryCost"] == 2


def test_list_fields_multiply_what_is_under_them() -> None:
    from feedfabric.app import schema
    from feedfabric.schema.core_schema import graphql_schema
    from graphql import parse

    # A list with its own `first` multiplies everything under it, connections included.
    query = '{ similarPosts(postId: "1", first: 100) { author { posts(first: 100) { edges { node { id } } } } } }'
    assert operation_cost(graphql_schema(schema), parse(query), None, None) == 100 + 100 + 100 + 10_000 + 10_000
    # A list without `first` takes its declared maximum (4 media, 50 mentions a post), else the page
    # maximum (100).
    feed = "{ homeFeed(first: 2) { edges { node { media { id } mentions { id } } } } favourites { id } }"
    assert operation_cost(graphql_schema(schema), parse(feed), None, None) == 1 + 2 + 2 + 2 * 4 + 2 * 50 + 100


async def test_a_post_mentions_at_most_the_bound_the_cost_assumes(api: Api) -> None:
    from feedfabric.feeds.posts import MAX_MENTIONS_PER_POST

    token = await api.member("chatty")
    names = " ".join(f"@name{i}" for i in range(MAX_MENTIONS_PER_POST + 1))
    assert await api.error_codes(
        "mutation($c: String!) { createPost(input: {content: $c}) { id } }", {"c": names}, token=token
    ) == ["BAD_USER_INPUT"]
    within = " ".join(f"@name{i}" for i in range(MAX_MENTIONS_PER_POST))
    assert (
        await api.error_codes(
            "mutation($c: String!) { createPost(input: {content: $c}) { id } }", {"c": within}, token=token
        )
        == []
    )


async def test_list_fan_out_is_refused(api: Api) -> None:
    token = await api.member("fanout")
    query = '{ similarPosts(postId: "1", first: 100) { author { posts(first: 100) { edges { node { id } } } } } }'
    refused = await api.raw(query, token=token)
    assert codes(refused) == ["QUERY_TOO_COMPLEX"]
    assert refused["extensions"]["cost"]["requestedQueryCost"] >= 10_000


async def test_huge_first_is_bad_input_with_a_figure_json_can_carry(api: Api) -> None:
    token = await api.member("huge")
    headers = {"Authorization": f"Bearer {token}"}
    beyond_int = await api.client.post(
        "/graphql", json={"query": HOME_COST, "variables": {"n": 2**63}}, headers=headers
    )
    assert codes(beyond_int.json()) == ["BAD_USER_INPUT"]
    nested = '{ similarPosts(postId: "1", first: 2147483647) { author { posts(first: 2147483647) { edges { node { id } } } } } }'
    response = await api.client.post("/graphql", json={"query": nested}, headers=headers)
    body = response.json()
    assert codes(body) == ["BAD_USER_INPUT"]
    assert isinstance(body["extensions"]["cost"]["requestedQueryCost"], int)


def test_a_field_refused_for_its_page_size_costs_only_the_refusal() -> None:
    from feedfabric.app import schema
    from graphql import parse

    def cost(query: str) -> int:
        return operation_cost(graphql_schema(schema), parse(query), None, None)

    # Its resolver refuses a `first` outside 1..100 before returning anything, so nothing under it runs.
    for first in (2147483647, 101, 0, -1):
        assert cost(f"{{ homeFeed(first: {first}) {{ edges {{ node {{ author {{ username }} }} }} }} }}") == 1
    # The work of the rest of the operation still counts.
    fan_out = '{ similarPosts(postId: "1", first: 100) { author { posts(first: 100) { edges { node { id } } } } } }'
    refused_beside_it = fan_out[:-1] + "homeFeed(first: 2147483647) { edges { node { id } } } }"
    assert cost(refused_beside_it) == cost(fan_out) + 1 == 20_301


# Every field that takes `first`, asked for objects under it (so the size would count in the cost);
# $p is a post of the member `pager`, who is an admin and has a liked playlist.
PAGED_FIELDS = {
    "Query.blockedMembers": "blockedMembers(first: $n) { edges { cursor } }",
    "Query.mutedMembers": "mutedMembers(first: $n) { edges { cursor } }",
    "Query.homeFeed": "homeFeed(first: $n) { edges { cursor } }",
    "Query.favouritesFeed": "favouritesFeed(first: $n) { edges { cursor } }",
    "Query.tagFeed": 'tagFeed(tag: "news", first: $n) { edges { cursor } }',
    "Query.mentionsFeed": "mentionsFeed(first: $n) { edges { cursor } }",
    "Query.notifications": "notifications(first: $n) { edges { cursor } }",
    "Query.notificationGroups": "notificationGroups(first: $n) { edges { cursor } }",
    "Query.forYouFeed": "forYouFeed(first: $n) { edges { cursor } }",
    "Query.rankerModels": "rankerModels(first: $n) { id }",
    "Query.similarPosts": "similarPosts(postId: $p, first: $n) { id }",
    "Query.suggestedMembers": "suggestedMembers(first: $n) { reason }",
    "Query.suggestedTopics": "suggestedTopics(first: $n) { tag }",
    "Member.posts": 'member(username: "pager") { posts(first: $n) { edges { cursor } } }',
    "Member.followers": 'member(username: "pager") { followers(first: $n) { edges { cursor } } }',
    "Member.following": 'member(username: "pager") { following(first: $n) { edges { cursor } } }',
    "Member.playlists": 'member(username: "pager") { playlists(first: $n) { edges { cursor } } }',
    "Playlist.items": 'member(username: "pager") { likedPlaylist { items(first: $n) { edges { cursor } } } }',
    "Post.comments": "post(id: $p) { comments(first: $n) { edges { cursor } } }",
    "Query.myReports": "myReports(first: $n) { edges { cursor } }",
    "Query.reports": "reports(first: $n) { edges { cursor } }",
}


def test_paged_fields_lists_every_field_that_takes_first() -> None:
    from feedfabric.app import schema
    from graphql import GraphQLInterfaceType, GraphQLObjectType

    served = graphql_schema(schema)
    taking_first = {
        f"{type_name}.{field_name}"
        for type_name, named in served.type_map.items()
        if isinstance(named, GraphQLObjectType | GraphQLInterfaceType) and not type_name.startswith("__")
        for field_name, field in named.fields.items()
        if "first" in field.args
    }
    assert taking_first == set(PAGED_FIELDS)


async def test_any_first_past_the_page_maximum_is_bad_input(api: Api) -> None:
    token = await api.member("pager", admin=True)
    post = await api.post(token, "a post to page under")
    for field, selection in PAGED_FIELDS.items():
        uses_post = "$p" in selection
        query = f"query($n: Int{', $p: ID!' if uses_post else ''}) {{ {selection} }}"
        for first in (100_000, 2147483647):
            body = await api.raw(query, {"n": first, "p": post} if uses_post else {"n": first}, token=token)
            assert [(e["extensions"]["code"], e["message"]) for e in body["errors"]] == [
                ("BAD_USER_INPUT", "page size must be between 1 and 100")
            ], (field, first)


class _ExplodingBound(int):
    """A declared bound that breaks when the cost analysis reads it."""

    def __gt__(self, other: object) -> bool:
        raise RuntimeError("cost metadata broke")


_RAN: list[bool] = []


@strawberry.type
class _Item:
    name: str


@strawberry.type
class _ExplodingQuery:
    @strawberry.field(metadata={"max_items": _ExplodingBound(5)})
    def items(self) -> list[_Item]:
        _RAN.append(True)
        return [_Item(name="a")]


def test_cost_fails_closed() -> None:
    """An error inside the cost analysis refuses the operation; it never runs at cost 0."""
    from feedfabric.schema.cost import QueryCost

    guarded = strawberry.Schema(query=_ExplodingQuery, extensions=[QueryCost])
    result = guarded.execute_sync("{ items { name } }")
    assert result.data is None and not _RAN
    assert [e.extensions["code"] for e in result.errors or []] == ["QUERY_TOO_COMPLEX"]


# --- fragment fan-out ------------------------------------------------------------------


def doubling_fragments(levels: int) -> str:
    """`query { ...F<levels> }` where each fragment spreads the one below it twice: under 1 KB for 20
    levels, 2**levels fields for a walker that follows every spread."""
    ladder = " ".join(f"fragment F{i} on Query {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, levels + 1))
    return f"query {{ ...F{levels} }} fragment F0 on Query {{ viewer {{ id }} }} {ladder}"


def test_expanded_size_is_what_a_naive_walker_meets() -> None:
    from feedfabric.schema.selections import expanded_size, iter_fields
    from graphql import parse

    # `viewer { id }` is 2 fields: the operation expands to 2 * 2**n, each fragment F_i to 2 * 2**i.
    for levels in (1, 5, 20):
        expected = 2 * 2**levels + sum(2 * 2**i for i in range(levels + 1))
        assert expanded_size(parse(doubling_fragments(levels))) == expected
    # The walk collects like GraphQL: a fragment spread twice in one selection set merges into one.
    document = parse(doubling_fragments(20))
    operation = document.definitions[0]
    fragments = {d.name.value: d for d in document.definitions[1:]}  # type: ignore[attr-defined]
    assert [node.name.value for node, _ in iter_fields(operation.selection_set, fragments)] == ["viewer"]  # type: ignore[attr-defined]


async def test_fragment_fan_out_is_refused_before_validation_and_the_loop_stays_responsive(
    api: Api, settings: Settings
) -> None:
    async with rate_limited(settings, 2) as limited:
        token = await limited.member("fanner")
        bomb = asyncio.create_task(limited.raw(doubling_fragments(20), token=token))
        other = asyncio.create_task(api.raw("{ __typename }"))
        refused, answered = await asyncio.gather(bomb, other)
        assert codes(refused) == ["QUERY_TOO_COMPLEX"]
        assert "fragments" in refused["errors"][0]["message"]
        assert answered["data"] == {"__typename": "Query"}
        # The refusal spent from the budget: one more operation fits, the next does not.
        assert codes(await limited.raw("{ viewer { id } }", token=token)) == []
        assert codes(await limited.raw("{ viewer { id } }", token=token)) == ["RATE_LIMITED"]


async def test_repeated_fields_that_would_make_validation_quadratic_are_refused(api: Api) -> None:
    from feedfabric.schema.selections import MAX_MERGED_PAIRS, merged_pairs
    from graphql import parse

    # Under the token limit; validation compared the 450 `viewer` fields pairwise for seconds.
    repeated = "{" + " viewer { id }" * 450 + "}"
    assert merged_pairs(parse(repeated)) > MAX_MERGED_PAIRS
    refused = await api.raw(repeated)
    assert codes(refused) == ["QUERY_TOO_COMPLEX"]
    # A field a few fragments share is fine.
    shared = "{ viewer { id ...A ...B } } fragment A on Member { id username } fragment B on Member { id }"
    assert codes(await api.raw(shared)) == []


async def test_fragments_within_the_bound_are_served(api: Api) -> None:
    from feedfabric.schema.selections import MAX_EXPANDED_FIELDS, expanded_size
    from graphql import parse

    # 1,534 fields when every spread is followed (the operation's 512 and the fragments' own): under
    # the bound, and one `viewer` once collected.
    assert expanded_size(parse(doubling_fragments(8))) == 1534 < MAX_EXPANDED_FIELDS
    body = await api.raw(doubling_fragments(8))
    assert codes(body) == [] and body["data"] == {"viewer": None}


# --- persisted queries -----------------------------------------------------------------

PQ_QUERY = "query Me { viewer { id username } }"
PQ_HASH = hashlib.sha256(PQ_QUERY.encode()).hexdigest()


def pq(sha: str = PQ_HASH) -> dict[str, Any]:
    return {"persistedQuery": {"version": 1, "sha256Hash": sha}}


async def _post(api: Api, payload: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = await api.client.post("/graphql", json=payload, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_persisted_query_flow(api: Api) -> None:
    token = await api.member("apq")
    # Unknown hash: the client is told to send the text.
    missing = await _post(api, {"extensions": pq(), "operationName": "Me"}, token)
    assert codes(missing) == ["PERSISTED_QUERY_NOT_FOUND"]
    assert missing["errors"][0]["message"] == "PersistedQueryNotFound"
    # Text with its hash registers it and runs.
    registered = await _post(api, {"query": PQ_QUERY, "extensions": pq()}, token)
    assert registered["data"]["viewer"]["username"] == "apq"
    # Hash alone now runs the stored text, over POST and over GET.
    by_hash = await _post(api, {"extensions": pq(), "operationName": "Me"}, token)
    assert by_hash["data"]["viewer"]["username"] == "apq"
    # As Apollo Client sends a hashed GET: with `Accept: */*`, which alone would ask for GraphiQL.
    got = await api.client.get(
        "/graphql",
        params={"extensions": json.dumps(pq())},
        headers={"Authorization": f"Bearer {token}", "accept": "*/*"},
    )
    assert got.json()["data"]["viewer"]["username"] == "apq"
    unknown = await api.client.get(
        "/graphql", params={"extensions": json.dumps(pq("0" * 64))}, headers={"accept": "*/*"}
    )
    assert codes(unknown.json()) == ["PERSISTED_QUERY_NOT_FOUND"]


async def test_persisted_query_hash_mismatch(api: Api) -> None:
    wrong = hashlib.sha256(b"something else").hexdigest()
    body = await _post(api, {"query": PQ_QUERY, "extensions": pq(wrong)})
    assert codes(body) == ["BAD_USER_INPUT"]
    assert body["data"] is None
    malformed = await _post(api, {"query": PQ_QUERY, "extensions": pq("not-a-hash")})
    assert codes(malformed) == ["BAD_USER_INPUT"]
    # A mismatch never registers the hash.
    after = await _post(api, {"extensions": pq(wrong)})
    assert codes(after) == ["PERSISTED_QUERY_NOT_FOUND"]


async def test_persisted_query_shared_through_redis(api: Api, settings: Settings) -> None:
    await _post(api, {"query": PQ_QUERY, "extensions": pq()})
    async with api_with(settings) as other_replica:
        body = await _post(other_replica, {"extensions": pq()})
        assert codes(body) == [] and body["data"] == {"viewer": None}


async def test_persisted_query_without_redis(api: Api, settings: Settings) -> None:
    dead_redis = f"redis://127.0.0.1:{free_port()}/0"
    async with api_with(settings, redis_url=dead_redis) as no_redis:
        assert codes(await _post(no_redis, {"extensions": pq()})) == ["PERSISTED_QUERY_NOT_FOUND"]
        assert codes(await _post(no_redis, {"query": PQ_QUERY, "extensions": pq()})) == []
        assert codes(await _post(no_redis, {"extensions": pq()})) == []


# --- production switches ---------------------------------------------------------------

INTROSPECTION = "{ __schema { queryType { name } } }"


async def test_development_keeps_introspection_graphiql_and_suggestions(api: Api) -> None:
    assert codes(await api.raw(INTROSPECTION)) == []
    ide = await api.client.get("/graphql", headers={"accept": "text/html"})
    assert ide.status_code == 200 and "graphiql" in ide.text.lower()
    typo = await api.raw("{ viewr { id } }")
    assert "Did you mean" in typo["errors"][0]["message"]


async def test_an_ides_schema_query_runs_in_development_at_no_cost(api: Api) -> None:
    """GraphiQL's docs and completion come from this query; counted like data it cost 11.5 million."""
    answer = await api.raw(get_introspection_query(descriptions=True, input_value_deprecation=True))
    assert codes(answer) == []
    assert answer["data"]["__schema"]["queryType"]["name"] == "Query"
    assert answer["extensions"]["cost"]["requestedQueryCost"] == 0


async def test_introspection_nested_deeper_than_an_ide_asks_is_refused(api: Api) -> None:
    deep = "{ __schema { types { fields { type { fields { type { fields { type { fields { name } } } } } } } } } }"
    refused = await api.raw(deep)
    assert codes(refused) == ["BAD_USER_INPUT"] and "introspection" in refused["errors"][0]["message"].lower()


async def test_production_turns_them_off(api: Api, settings: Settings) -> None:
    async with api_with(settings, feedfabric_production=True) as prod:
        refused = await prod.raw(INTROSPECTION)
        assert set(codes(refused)) == {"BAD_USER_INPUT"} and "introspection" in refused["errors"][0]["message"]
        assert codes(await prod.raw("{ __typename }")) == []
        ide = await prod.client.get("/graphql", headers={"accept": "text/html"})
        assert ide.status_code == 404
        typo = await prod.raw("{ viewr { id } }")
        assert codes(typo) == ["BAD_USER_INPUT"]
        assert "Did you mean" not in typo["errors"][0]["message"]
        enum_typo = await prod.raw('{ member(username: "x") { posts(order: NEWES) { source } } }')
        assert codes(enum_typo) and "Did you mean" not in json.dumps(enum_typo)


# --- rate limits -----------------------------------------------------------------------

# Windows are fixed (epoch // window): a test crossing a boundary would see its count reset,
# so rate-limit tests use one window far longer than any run.
STEADY_WINDOW = 1_000_000_000


def rate_limited(settings: Settings, operations: int) -> AbstractAsyncContextManager[Api]:
    """The app with a small limit counted in one steady window.

    The limiter fails open when Redis takes longer than REDIS_TIMEOUT_MS, and a
    full collection in this long test process has outlasted the 250 ms default:
    these tests are about counting, so Redis gets all the time it needs.
    """
    return api_with(
        settings, rate_limit_operations=operations, rate_limit_window_seconds=STEADY_WINDOW, redis_timeout_ms=10_000
    )


def aliases(n: int) -> str:
    return "{ " + " ".join(f"v{i}: viewer {{ id }}" for i in range(n)) + " }"


async def test_rate_limit_counts_root_fields(api: Api, settings: Settings) -> None:
    async with rate_limited(settings, 5) as limited:
        token = await limited.member("busy")  # counted against the client address: no member yet
        ok = await limited.raw(aliases(5), token=token)  # 5 of 5
        assert codes(ok) == []
        assert ok["extensions"]["rateLimit"]["remaining"] == 0
        refused = await limited.raw("{ viewer { id } }", token=token)  # the 6th
        assert codes(refused) == ["RATE_LIMITED"]
        assert refused["data"] is None
        # Another member has a budget of their own.
        other = await limited.member("quiet")
        assert codes(await limited.raw(aliases(5), token=other)) == []


async def test_rate_limit_refuses_one_request_with_too_many_aliases(api: Api, settings: Settings) -> None:
    async with rate_limited(settings, 5) as limited:
        token = limited.token("greedy")
        refused = await limited.raw(aliases(6), token=token)
        assert codes(refused) == ["RATE_LIMITED"]


async def test_rate_limit_fragments_count_their_fields(api: Api, settings: Settings) -> None:
    async with rate_limited(settings, 3) as limited:
        query = "query { ...F a: viewer { id } } fragment F on Query { b: viewer { id } c: viewer { id } }"
        token = limited.token("fragmented")
        assert codes(await limited.raw(query, token=token)) == []  # 3 of 3
        assert codes(await limited.raw("{ __typename }", token=token)) == ["RATE_LIMITED"]


async def test_rate_limit_signed_out_by_client_address(api: Api, settings: Settings) -> None:
    async with rate_limited(settings, 2) as limited:
        assert codes(await limited.raw(aliases(2))) == []
        assert codes(await limited.raw(aliases(1))) == ["RATE_LIMITED"]


async def test_rest_requests_spend_the_same_budget_as_graphql_operations(api: Api, settings: Settings) -> None:
    async with rate_limited(settings, 3) as limited:
        token = await limited.member("both")  # by client address; the member's own window starts now
        first = await limited.rest("GET", "/userfeed/home", token=token)
        assert first.status_code == 200
        assert (first.headers["RateLimit-Limit"], first.headers["RateLimit-Remaining"]) == ("3", "2")
        assert codes(await limited.raw("{ viewer { id } }", token=token)) == []  # 2 of 3
        assert (await limited.rest("GET", "/userfeed/mentions", token=token)).status_code == 200  # 3 of 3
        refused = await limited.rest("GET", "/userfeed/home", token=token)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate.limited"
        assert int(refused.headers["Retry-After"]) >= 1
        assert codes(await limited.raw("{ viewer { id } }", token=token)) == ["RATE_LIMITED"]


FOLLOWING_PAGES = "{ viewer { following(first: 50) { edges { node { posts(first: 4) { edges { node { id } } } } } } } }"


async def test_rate_limit_spends_each_operations_query_cost_from_a_budget_of_its_own(
    api: Api, settings: Settings
) -> None:
    async with api_with(
        settings, rate_limit_cost=1_000, rate_limit_window_seconds=STEADY_WINDOW, redis_timeout_ms=10_000
    ) as limited:
        token = await limited.member("costly")
        first = await limited.raw(FOLLOWING_PAGES, token=token)
        cost = first["extensions"]["cost"]["requestedQueryCost"]
        assert codes(first) == [] and 500 < cost < 1_000
        assert first["extensions"]["rateLimit"]["costRemaining"] == 1_000 - cost
        refused = await limited.raw(FOLLOWING_PAGES, token=token)  # past 1,000 with operations to spare
        assert codes(refused) == ["RATE_LIMITED"]
        assert "query cost" in refused["errors"][0]["message"]
        assert refused["extensions"]["rateLimit"]["remaining"] > 0
        # Another member has a cost budget of their own.
        other = await limited.member("frugal")
        assert codes(await limited.raw(FOLLOWING_PAGES, token=other)) == []


async def test_an_operation_refused_as_too_costly_spends_no_query_cost(api: Api, settings: Settings) -> None:
    async with api_with(
        settings, rate_limit_cost=1_000, rate_limit_window_seconds=STEADY_WINDOW, redis_timeout_ms=10_000
    ) as limited:
        token = await limited.member("hasty")
        too_costly = (
            "{ viewer { following(first: 100) { edges { node { posts(first: 100) { edges { node { id } } } } } } } }"
        )
        refused = await limited.raw(too_costly, token=token)
        assert codes(refused) == ["QUERY_TOO_COMPLEX"]
        # Checking it was work: its tokens are spent, its query cost is not.
        assert refused["extensions"]["rateLimit"]["costRemaining"] == 1_000 - _lexer_tokens(too_costly)
        assert codes(await limited.raw(FOLLOWING_PAGES, token=token)) == []


INVALID = "{ viewer { id } nope }"  # two root fields, one unknown


async def test_documents_refused_by_validation_spend_their_root_fields_until_rate_limited(
    api: Api, settings: Settings
) -> None:
    async with rate_limited(settings, 5) as limited:
        first = await limited.raw(INVALID)
        assert codes(first) == ["BAD_USER_INPUT"]
        assert first["extensions"]["rateLimit"]["remaining"] == 3
        assert first["extensions"]["rateLimit"]["costRemaining"] == settings.rate_limit_cost - _lexer_tokens(INVALID)
        assert codes(await limited.raw(INVALID)) == ["BAD_USER_INPUT"]  # 4 of 5
        response = await limited.client.post(
            "/graphql", json={"query": INVALID}, headers={"Accept": "application/graphql-response+json"}
        )
        assert response.status_code == 429
        assert codes(response.json()) == ["RATE_LIMITED"]
        assert codes(await limited.raw("{ __typename }")) == ["RATE_LIMITED"]


async def test_documents_that_do_not_parse_spend_a_cost_unit_per_ten_characters(api: Api, settings: Settings) -> None:
    async with api_with(
        settings, rate_limit_cost=1_000, rate_limit_window_seconds=STEADY_WINDOW, redis_timeout_ms=10_000
    ) as limited:
        unparsable = "{ viewer { id " + " " * 2_985  # 2,999 characters: 300 units
        for spent in (1, 2, 3):
            refused = await limited.raw(unparsable)
            assert codes(refused) == ["BAD_USER_INPUT"]
            assert refused["extensions"]["rateLimit"]["remaining"] == settings.rate_limit_operations - spent
            assert refused["extensions"]["rateLimit"]["costRemaining"] == 1_000 - 300 * spent
        assert codes(await limited.raw(unparsable)) == ["RATE_LIMITED"]


async def test_refused_documents_of_one_client_leave_anothers_budget_alone(api: Api, settings: Settings) -> None:
    async with rate_limited(settings, 6) as limited:
        elsewhere = httpx.ASGITransport(app=limited.app, client=("203.0.113.8", 4321))  # type: ignore[attr-defined]
        async with httpx.AsyncClient(transport=elsewhere, base_url="http://test") as client:
            other = Api(client, limited.settings)
            answers = [codes(await limited.raw(INVALID)) for _ in range(4)]  # 2 root fields each
            assert answers[-1] == ["RATE_LIMITED"]
            ok = await other.raw("{ viewer { id } }")
            assert codes(ok) == []
            assert ok["extensions"]["rateLimit"]["remaining"] == 5


async def test_rate_limit_holds_in_process_without_redis(api: Api, settings: Settings) -> None:
    """Redis out of reach takes nothing down, and switches no limit off: the process counts its share."""
    dead_redis = f"redis://127.0.0.1:{free_port()}/0"
    async with api_with(
        settings, redis_url=dead_redis, rate_limit_operations=3, rate_limit_window_seconds=STEADY_WINDOW
    ) as no_redis:
        served = await no_redis.raw(aliases(3))
        assert codes(served) == [] and served["data"]
        assert codes(await no_redis.raw(aliases(3))) == ["RATE_LIMITED"]


# --- WebSocket origin and subscriptions per connection -------------------------------------


def _graphql_sockets(app: Any) -> Any:
    from starlette.routing import WebSocketRoute

    return next(r.app for r in app.routes if isinstance(r, WebSocketRoute) and r.path == "/graphql")


def test_websocket_settings_reach_the_sockets(settings: Settings) -> None:
    app = create_app(
        settings.model_copy(
            update={
                "ws_allowed_origins": "https://app.example, https://m.example",
                "max_subscriptions_per_connection": 3,
            }
        )
    )
    sockets = _graphql_sockets(app)
    assert sockets.max_operations == 3
    assert sockets.origins.allowed == {"https://app.example", "https://m.example"}


@pytest.mark.parametrize(
    ("origin", "accepted"),
    [
        (None, True),
        ("https://app.example", True),
        ("https://evil.example", False),
    ],
)
def test_websocket_origin_check(settings: Settings, origin: str | None, accepted: bool) -> None:
    from starlette.testclient import TestClient
    from starlette.websockets import WebSocketDisconnect

    app = create_app(settings.model_copy(update={"ws_allowed_origins": "https://app.example"}))
    headers = {"origin": origin} if origin else {}
    token = _token(settings, "origin_tester")
    with TestClient(app, base_url="http://api.internal") as client:
        _upsert(client, token, "origin_tester")
        if accepted:
            with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"], headers=headers) as ws:
                ws.send_json({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
                assert ws.receive_json()["type"] == "connection_ack"
        else:
            with pytest.raises(WebSocketDisconnect):
                with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"], headers=headers):
                    pass


def test_subscriptions_per_connection(settings: Settings) -> None:
    from starlette.testclient import TestClient

    limit = 2
    app = create_app(settings.model_copy(update={"max_subscriptions_per_connection": limit}))
    token = _token(settings, "subscriber")
    with TestClient(app) as client:
        _upsert(client, token, "subscriber")
        with client.websocket_connect("/graphql", subprotocols=["graphql-transport-ws"]) as ws:
            ws.send_json({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
            assert ws.receive_json()["type"] == "connection_ack"
            for i in range(limit):
                ws.send_json(
                    {
                        "id": str(i),
                        "type": "subscribe",
                        "payload": {"query": "subscription { notificationAdded { id } }"},
                    }
                )
            ws.send_json({"type": "ping"})
            assert ws.receive_json()["type"] == "pong"  # both subscriptions are running
            ws.send_json(
                {"id": "over", "type": "subscribe", "payload": {"query": "subscription { notificationAdded { id } }"}}
            )
            refused = ws.receive_json()
            assert refused["id"] == "over" and refused["type"] == "error"
            assert "limit" in refused["payload"][0]["message"]


def _upsert(client: Any, token: str, name: str) -> None:
    response = client.post(
        "/graphql",
        json={"query": f'mutation {{ upsertProfile(username: "{name}", displayName: "{name}") {{ id }} }}'},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert not response.json().get("errors"), response.text


def _token(settings: Settings, external_id: str) -> str:
    from feedfabric.core.auth import issue_token

    return issue_token(settings.jwt_secret, external_id)
