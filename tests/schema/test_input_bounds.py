"""Every variable is bounded by the schema before anything coerces it, and the work stays linear.

The property: for every argument of the served schema, an operation passing
it a variable, and values generated at each bound and past it (lists one item
and a hundred thousand items too long, objects with keys their type lacks,
values nested up to 900 deep where the type wants one value), the lines of
Python that bounding, coercing and costing the variables execute (counted,
not timed) stay under a small constant times the input's size, and under a
cap that no input moves. Past a bound the operation is refused; at it, it is
not. Names longer than any the type knows (an enum string, a key its input
type lacks), whose cost is C work the line count cannot see, are refused
before coercion is called at all. Then the same over the wire: HTTP and both
socket protocols answer BAD_USER_INPUT, and a refused request spends from the
rate limit by the bytes it sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from feedfabric.app import schema
from feedfabric.core.settings import Settings
from feedfabric.feeds.paging import MAX_PAGE
from feedfabric.schema.core_schema import graphql_schema, metadata_of
from feedfabric.schema.cost import MAX_ITEMS, cached_cost
from feedfabric.schema.variables import variable_errors
from graphql import (
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    Undefined,
    get_named_type,
    is_composite_type,
    parse,
    print_type,
    validate,
)
from graphql.execution import values as graphql_values
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.linework import WorkExceeded, counting_lines
from tests.realtime_support import WsClient, serve, ws_client

SERVED: GraphQLSchema = graphql_schema(schema)
PROFILE = "mutation($i: FeedProfileInput!){ updateFeedProfile(input: $i){ preset } }"

LINES_PER_BYTE = 3
"""The bound's constant: lines per byte of the variables' JSON."""
FIXED_LINES = 30_000
"""What any request may cost whatever its variables: the first look at a new document (the positions of
its variables, its cost) and coercing values within the bounds."""
CAP_LINES = 60_000
"""The cap no input moves: the most a request of any size may make these checks do."""

# --- the arguments of the served schema, each as an operation passing it a variable ---------------------


@dataclass(frozen=True)
class Target:
    """One argument, reached from a root field, as an operation whose variable `$v` is passed to it."""

    where: str
    document: str
    type: GraphQLInputType
    bound: int | None


def _literal(type_: GraphQLInputType) -> str:
    """A literal of the type, for the required arguments beside the one under test."""
    if isinstance(type_, GraphQLNonNull):
        return _literal(type_.of_type)
    if isinstance(type_, GraphQLList):
        return "[]"
    if isinstance(type_, GraphQLEnumType):
        return next(iter(type_.values))
    if isinstance(type_, GraphQLInputObjectType):
        required = [f"{n}: {_literal(f.type)}" for n, f in type_.fields.items() if isinstance(f.type, GraphQLNonNull)]
        return "{" + ", ".join(required) + "}"
    return {"Int": "1", "Float": "1.5", "Boolean": "true"}.get(type_.name, '"x"')


def _call(name: str, field: GraphQLField, under_test: str | None = None) -> str:
    args = [
        f"{a}: $v" if a == under_test else f"{a}: {_literal(arg.type)}"
        for a, arg in field.args.items()
        if a == under_test or (isinstance(arg.type, GraphQLNonNull) and arg.default_value is Undefined)
    ]
    return name + (f"({', '.join(args)})" if args else "")


def _paths() -> dict[str, tuple[str, str]]:
    """For each object type reachable from Query, the shortest selection that reaches it: (opening, closing)."""
    query = SERVED.query_type
    assert query is not None
    found: dict[str, tuple[str, str]] = {query.name: ("", "")}
    frontier = [query]
    while frontier:
        nxt = []
        for parent in frontier:
            opening, closing = found[parent.name]
            for name, field in parent.fields.items():
                child = get_named_type(field.type)
                if isinstance(child, GraphQLObjectType) and child.name not in found:
                    found[child.name] = (f"{opening}{_call(name, field)} {{ ", f" }}{closing}")
                    nxt.append(child)
        frontier = nxt
    return found


def targets() -> Iterator[Target]:
    paths = _paths()
    roots = {SERVED.query_type: "query", SERVED.mutation_type: "mutation", SERVED.subscription_type: "subscription"}
    for type_ in SERVED.type_map.values():
        if not isinstance(type_, GraphQLObjectType) or type_.name.startswith("__"):
            continue
        kind = roots.get(type_, "query")
        if type_ not in roots and type_.name not in paths:
            continue
        opening, closing = ("", "") if type_ in roots else paths[type_.name]
        for name, field in type_.fields.items():
            selection = " { __typename }" if is_composite_type(get_named_type(field.type)) else ""
            for argument_name, argument in field.args.items():
                declared = metadata_of(argument).get(MAX_ITEMS)
                yield Target(
                    f"{type_.name}.{name}({argument_name})",
                    f"{kind}($v: {argument.type}) {{ {opening}{_call(name, field, argument_name)}{selection}{closing} }}",
                    argument.type,
                    declared if isinstance(declared, int) else None,
                )


TARGETS = list(targets())


def test_every_argument_of_the_served_schema_is_a_target() -> None:
    arguments = sum(
        len(f.args)
        for t in SERVED.type_map.values()
        if isinstance(t, GraphQLObjectType) and not t.name.startswith("__")
        for f in t.fields.values()
    )
    assert len(TARGETS) == arguments
    for target in TARGETS:
        assert not validate(SERVED, parse(target.document)), target.document


# --- values at and past each bound -------------------------------------------------------------------


def _leaf(type_: GraphQLInputType) -> Any:
    if isinstance(type_, GraphQLEnumType):
        return next(iter(type_.values))
    assert isinstance(type_, GraphQLScalarType), print_type(type_)  # type: ignore[arg-type]
    return {"Int": 1, "Float": 1.5, "Boolean": True}.get(type_.name, "x")


def _list_bound(bound: int | None) -> int:
    return bound if bound is not None else MAX_PAGE


@st.composite
def values(draw: st.DrawFn, type_: GraphQLInputType, bound: int | None, *, past: bool) -> tuple[Any, bool]:
    """A value of the type, and whether it goes past a bound. Within: every list at its bound, every field
    present. Past: one place goes past (a list too long, keys the type lacks, nesting too deep), when the
    type has such a place."""
    if isinstance(type_, GraphQLNonNull):
        return draw(values(type_.of_type, bound, past=past))
    if isinstance(type_, GraphQLList):
        most = _list_bound(bound)
        if past and draw(st.booleans()):
            extra = draw(st.sampled_from([1, 2, 100, 10_000, 120_000]))
            item, _ = draw(values(type_.of_type, None, past=False))
            return [item] * (most + extra), True
        items = [draw(values(type_.of_type, None, past=past and i == 0)) for i in range(most)]
        return [v for v, _ in items], any(p for _, p in items)
    if isinstance(type_, GraphQLInputObjectType):
        fields = {}
        went_past = False
        for name, field in type_.fields.items():
            declared = metadata_of(field).get(MAX_ITEMS)
            value, p = draw(values(field.type, declared if isinstance(declared, int) else None, past=past))
            fields[name] = value
            went_past = went_past or p
        if past and not went_past:
            extra = draw(st.sampled_from([1, 10, 60_000]))
            fields.update({f"unknown{i}": 1 for i in range(extra)})
            went_past = True
        return fields, went_past
    leaf = _leaf(type_)
    if past:
        depth = draw(st.sampled_from([1, 2, 50, 900]))
        for _ in range(depth):
            leaf = [leaf]
        return leaf, True
    return leaf, False


def _has_list(type_: GraphQLInputType) -> bool:
    if isinstance(type_, GraphQLNonNull | GraphQLList):
        return isinstance(type_, GraphQLList) or _has_list(type_.of_type)
    if isinstance(type_, GraphQLInputObjectType):
        return any(_has_list(f.type) for f in type_.fields.values())
    return False


def size(value: Any) -> int:
    """The bytes of the value's JSON, counted without recursion (a 900-deep list is too deep for the
    encoders)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            total += 2 + sum(len(json.dumps(k)) + 2 for k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            total += 2 + len(item)
            stack.extend(item)
        else:
            total += len(json.dumps(item))
    return total


def checked(document: str, variables: dict[str, Any]) -> tuple[list[str], int]:
    """The variables' errors as the operation meets them (bounds, then coercion), the cost's look at
    them, and the lines all of it executed."""
    context = SimpleNamespace(schema=schema, graphql_document=parse(document), operation_name=None, variables=variables)
    budget = min(FIXED_LINES + LINES_PER_BYTE * size(variables), CAP_LINES)
    with counting_lines(budget) as lines:
        try:
            errors = variable_errors(context, hide_suggestions=False)  # type: ignore[arg-type]
            cached_cost(SERVED, context.graphql_document, None, variables)
        except WorkExceeded:
            pytest.fail(f"more than {budget} lines for {size(variables)} bytes of variables: {document}")
    return [e.message for e in errors], lines[0]


# Warm the schema copies the checks build once per process, so they are not counted as a request's work.
variable_errors(  # type: ignore[arg-type]
    SimpleNamespace(schema=schema, graphql_document=parse(PROFILE), operation_name=None, variables={"i": 1}),
    hide_suggestions=False,
)


STRUCTURED = [t for t in TARGETS if isinstance(get_named_type(t.type), GraphQLInputObjectType) or _has_list(t.type)]
"""The arguments with lists or objects in them, where most bounds are: drawn as often as all the rest."""


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_bounding_and_coercing_variables_is_linear_and_capped(data: st.DataObject) -> None:
    target = data.draw(st.one_of(st.sampled_from(STRUCTURED), st.sampled_from(TARGETS)))
    past = data.draw(st.booleans())
    value, went_past = data.draw(values(target.type, target.bound, past=past))
    errors, _ = checked(target.document, {"v": value})
    if went_past:
        assert errors, f"{target.where}: {str(value)[:200]} went past a bound and was accepted"
        assert not any("recursion" in e for e in errors), errors
    else:
        assert not errors, f"{target.where}: {errors}"


@pytest.mark.parametrize("target", TARGETS, ids=[t.where for t in TARGETS])
def test_each_argument_takes_its_bound_and_refuses_past_it(target: Target) -> None:
    """The bounded places of each argument, exhaustively: a list at its bound passes and one past it is
    refused; a value nested 900 deep is refused as nested too deeply."""
    within, _ = checked(target.document, {"v": _at(target.type, target.bound, 0)})
    assert not within, within
    deep: Any = _at(target.type, target.bound, 0)
    for _ in range(900):
        deep = [deep]
    nested, _ = checked(target.document, {"v": deep})
    assert nested and "nested too deeply" in nested[0], nested
    if _has_list(target.type):
        longer, _ = checked(target.document, {"v": _at(target.type, target.bound, 1)})
        assert longer and "items; at most" in longer[0], longer


def _at(type_: GraphQLInputType, bound: int | None, over: int) -> Any:
    if isinstance(type_, GraphQLNonNull):
        return _at(type_.of_type, bound, over)
    if isinstance(type_, GraphQLList):
        return [_at(type_.of_type, None, 0)] * (_list_bound(bound) + over)
    if isinstance(type_, GraphQLInputObjectType):
        return {n: _at(f.type, metadata_of(f).get(MAX_ITEMS), over) for n, f in type_.fields.items()}
    return _leaf(type_)


LONG_NAME = 900_000
"""A name's length far past any the schema knows: the issue's 960 kB body, as one enum string or one key."""


def _long_names(type_: GraphQLInputType) -> Iterator[tuple[Any, str]]:
    """Values of the type with one name longer than any it knows: an enum string, or a key its input type
    lacks (in place of its last field); with the words the refusal says."""
    if isinstance(type_, GraphQLNonNull):
        yield from _long_names(type_.of_type)
    elif isinstance(type_, GraphQLList):
        for inner, why in _long_names(type_.of_type):
            yield [inner], why
    elif isinstance(type_, GraphQLEnumType):
        yield "Q" * LONG_NAME, "no value of"
    elif isinstance(type_, GraphQLInputObjectType):
        within = _at(type_, None, 0)
        for name, field in type_.fields.items():
            for inner, why in _long_names(field.type):
                yield {**within, name: inner}, why
        keys = list(within)[:-1]
        yield {**{k: within[k] for k in keys}, "Q" * LONG_NAME: 1}, "no field of"


NAMED = [t for t in TARGETS if any(True for _ in _long_names(t.type))]


def test_the_enum_and_input_object_arguments_are_all_there() -> None:
    named = {t.where for t in NAMED}
    assert {"Mutation.updateFeedProfile(input)", "Query.reports(status)", "Mutation.createPost(input)"} <= named


@pytest.mark.parametrize("target", NAMED, ids=[t.where for t in NAMED])
def test_a_name_longer_than_any_the_type_knows_is_refused_before_coercion(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 900 kB string where an enum is wanted, or a 900 kB key an input type lacks: graphql-core's
    coercion measured it against every known name for its suggestions (55-240 ms, work in C that the
    line count above does not see) and echoed it whole in the error. The bounds refuse it by its length:
    coercion never sees it, and the answer does not repeat it."""
    coerced: list[object] = []
    real = graphql_values.coerce_input_value  # what graphql-core's get_variable_values coerces each value with
    monkeypatch.setattr(graphql_values, "coerce_input_value", lambda *a, **k: coerced.append(a) or real(*a, **k))
    for value, why in _long_names(target.type):
        errors, _ = checked(target.document, {"v": value})
        assert len(errors) == 1 and why in errors[0], errors
        assert len(errors[0]) < 300, errors[0][:300]
    assert coerced == []


def test_variables_the_operation_does_not_declare_are_bounded_in_number_and_never_read() -> None:
    deep: Any = 1
    for _ in range(900):
        deep = [deep]
    ignored, _ = checked("{ __typename }", {"leftover": deep})
    assert not ignored
    many, _ = checked("{ __typename }", {f"x{i}": 1 for i in range(60_000)})
    assert many and "declares 0" in many[0]


# --- over the wire -----------------------------------------------------------------------------------


def codes(body: dict[str, Any]) -> list[str]:
    return [e.get("extensions", {}).get("code") for e in body.get("errors") or []]


async def test_a_list_past_its_bound_is_refused_over_http_before_authentication(settings: Settings) -> None:
    settings = settings.model_copy(update={"rate_limit_cost": 1_000_000})  # these bytes are more than a window's
    async with serve(settings) as server:
        sources = {"i": {"sources": ["TAGS"] * 10_000}}
        body = await asyncio.wait_for(server.api.raw(PROFILE, sources), 10)
        assert codes(body) == ["BAD_USER_INPUT"], body
        assert "at most 5" in body["errors"][0]["message"]
        media = await server.api.raw(
            'mutation($m: [ID!]){ createPost(input: {content: "x", mediaIds: $m}){ id } }', {"m": ["x"] * 5}
        )
        assert codes(media) == ["BAD_USER_INPUT"] and "at most 4" in media["errors"][0]["message"]
        status = "query($s: ReportStatus){ reports(status: $s){ __typename } }"
        response = await server.api.client.post("/graphql", json={"query": status, "variables": {"s": "Q" * 900_000}})
        assert codes(response.json()) == ["BAD_USER_INPUT"], response.text[:300]
        assert len(response.content) < 2_000  # the 900 kB value is not echoed back


async def test_a_refused_request_spends_the_rate_limit_by_its_bytes(settings: Settings) -> None:
    async with serve(settings) as server:
        variables = {"i": {"sources": ["TAGS"] * 20_000}}  # 160 kB
        sent = len(json.dumps(variables, separators=(",", ":")))
        body = await server.api.raw(PROFILE, variables)
        assert codes(body) == ["BAD_USER_INPUT"]
        spent = settings.rate_limit_cost - body["extensions"]["rateLimit"]["costRemaining"]
        assert spent >= sent // 10, (spent, sent)
        # A document refused at parse or validation spends for the variables beside it all the same.
        for document in ("{", "{ noSuchField }"):
            before = body["extensions"]["rateLimit"]["costRemaining"]
            body = await server.api.raw(document, variables)
            assert codes(body) in (["BAD_USER_INPUT"], ["GRAPHQL_VALIDATION_FAILED"]), body
            assert before - body["extensions"]["rateLimit"]["costRemaining"] >= sent // 10, document
        # The issue's 960 kB request costs more than a window's budget: the next refusal is the rate limit's.
        huge = {"i": {"sources": ["TAGS"] * 120_000}}
        first = await server.api.raw(PROFILE, huge)
        assert codes(first) == ["RATE_LIMITED"], first
        assert codes(await server.api.raw("{ __typename }")) == ["RATE_LIMITED"]


async def test_a_900_deep_list_is_nested_too_deeply_not_a_recursion_error(settings: Settings) -> None:
    async with serve(settings) as server:
        deep = '["TAGS"]'
        for _ in range(899):
            deep = f"[{deep}]"
        text = '{"query": "' + PROFILE + '", "variables": {"i": {"sources": ' + deep + "}}}"
        response = await server.api.client.post("/graphql", content=text, headers={"content-type": "application/json"})
        body = response.json()
        assert codes(body) == ["BAD_USER_INPUT"], body
        assert "nested too deeply" in body["errors"][0]["message"]
        assert "recursion" not in response.text
        leftover = '{"query": "{ __typename }", "variables": {"x": ' + deep + "}}"
        ignored = await server.api.client.post(
            "/graphql", content=leftover, headers={"content-type": "application/json"}
        )
        assert ignored.json().get("data") == {"__typename": "Query"}, ignored.text


@pytest.mark.parametrize("protocol", ["graphql-transport-ws", "graphql-ws"])
async def test_a_list_past_its_bound_is_refused_over_both_socket_protocols(settings: Settings, protocol: str) -> None:
    settings = settings.model_copy(update={"rate_limit_cost": 1_000_000})  # these bytes are more than a window's
    async with serve(settings) as server:
        token = await server.api.member("lister")
        async with ws_client(server, protocol, token) as ws:
            await ws.subscribe(PROFILE, {"i": {"sources": ["TAGS"] * 10_000}})
            errors = await errors_of(ws)
            assert [e.get("extensions", {}).get("code") for e in errors] == ["BAD_USER_INPUT"], errors
            await ws.subscribe("subscription($s: String) { homeTimeline(since: $s) { cursor } }", {"s": [["x"]]})
            errors = await errors_of(ws)
            assert [e.get("extensions", {}).get("code") for e in errors] == ["BAD_USER_INPUT"], errors
            assert "nested too deeply" in errors[0]["message"], errors
            # An object of 60,000 keys (a 700 kB frame) and a 900 kB enum string, within the frame limit.
            await ws.subscribe(PROFILE, {"i": {f"k{n}": 1 for n in range(60_000)}})
            errors = await errors_of(ws)
            assert [e.get("extensions", {}).get("code") for e in errors] == ["BAD_USER_INPUT"], errors
            assert "has 60000 fields" in errors[0]["message"], errors
            await ws.subscribe(PROFILE, {"i": {"preset": "Q" * 900_000}})
            errors = await errors_of(ws)
            assert [e.get("extensions", {}).get("code") for e in errors] == ["BAD_USER_INPUT"], errors
            assert "no value of" in errors[0]["message"] and len(errors[0]["message"]) < 300, errors


async def errors_of(ws: WsClient) -> list[dict[str, Any]]:
    """The errors of the socket's next result or error message (a `complete` before it is skipped)."""
    while True:
        message = await ws.next_message()
        if message["type"] == "complete":
            continue
        payload = message["payload"]
        errors: list[dict[str, Any]] = payload if isinstance(payload, list) else payload.get("errors", [payload])
        return errors
