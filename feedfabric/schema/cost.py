"""Query cost in the style of GitHub's GraphQL API, refused above GRAPHQL_MAX_COST with QUERY_TOO_COMPLEX.

Depth, alias and token limits bound the size of the *text*; they do not bound
the work, because `first: 100` nested three times asks for a million nodes in
a few dozen tokens. The cost models the work before any resolver runs: every
field that returns an object or a list of objects costs the number of objects
it can return, times the number of parents it is asked for.

- A list field returns as many items as its own `first` (a list with an
  argument, such as `similarPosts(first: 100)`), or the `first` of the
  connection it sits directly under (`edges`), or else its fixed maximum: the
  field's `max_items` metadata, MAX_PAGE when it declares none.
- A connection (an object field with a `first` argument) is one object; its
  `first` is the schema's default when omitted or null. Its single objects
  such as `pageInfo` are not multiplied.
- A field whose `first` is not a page size (1..MAX_PAGE) costs 1: its resolver
  refuses it with BAD_USER_INPUT before returning anything, so nothing under
  it runs. Counting the size asked for instead made `first: 2147483647` a
  QUERY_TOO_COMPLEX, hiding the error the client has to fix.
- Scalar and enum fields, `__typename`, and introspection (`__schema`,
  `__type`) cost nothing. Introspection reads the schema in memory, and how
  deep it may nest is bounded by graphql-core's MaxIntrospectionDepthRule (one
  of the specified validation rules); production refuses it altogether.
  Counted like data (every list at its maximum), an IDE's schema query cost
  11.5 million and was refused, which left GraphiQL without docs or completion.

So `homeFeed(first: 20) { edges { node { id author { username } } } }` costs
1 + 20 + 20 + 20 = 61, and `similarPosts(first: 100) { author { posts(first:
100) { edges { node { id } } } } }` costs 100 + 100 + 100 + 10,000 + 10,000.
Every response reports the figure in `extensions.cost`, as Shopify's API does,
so clients can see what they spend. Figures saturate at COST_CEILING, so any
nesting still gives a figure JSON can carry.

The cost fails closed: if it cannot be computed the operation is refused (and
the failure logged), never run at cost 0.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLField,
    GraphQLInterfaceType,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    VariableNode,
    get_named_type,
    get_nullable_type,
    get_operation_ast,
    is_composite_type,
    is_list_type,
)
from strawberry import Info
from strawberry.extensions import SchemaExtension

from feedfabric.core import metrics
from feedfabric.core.errors import QueryTooComplex
from feedfabric.feeds.paging import MAX_PAGE, is_page_size
from feedfabric.schema.core_schema import graphql_schema, metadata_of
from feedfabric.schema.documents import parse_document
from feedfabric.schema.idmemo import IdMemo
from feedfabric.schema.refusal import app_context, refuse
from feedfabric.schema.selections import fragments_of, iter_fields

__all__ = ["MAX_ITEMS", "QueryCost", "cached_cost", "operation_cost"]

log = logging.getLogger("feedfabric.graphql")

DEFAULT_MAX_COST = 10_000
DEFAULT_PAGE = 20
COST_CEILING = 1_000_000_000
REFUSED_FIELD_COST = 1
"""The cost of a field refused for its page size: the refusal, with nothing under it."""
MAX_ITEMS = "max_items"
"""Field metadata key: the most items a list field without `first` returns."""


class _Walk:
    """Costs selection sets per object asked for; each (selection set, type, page) once, so a
    fragment spread in many places is costed once and the walk stays linear in the document."""

    def __init__(
        self,
        schema: GraphQLSchema,
        document: DocumentNode,
        operation: OperationDefinitionNode,
        variables: Mapping[str, Any] | None,
    ) -> None:
        self.schema = schema
        self.fragments = fragments_of(document)
        self.memo: dict[tuple[int, str | None, int | None], int] = {}
        self.variables = dict(variables) if isinstance(variables, Mapping) else {}
        for definition in operation.variable_definitions or ():
            name = definition.variable.name.value
            if name not in self.variables and isinstance(definition.default_value, IntValueNode):
                self.variables[name] = int(definition.default_value.value)

    def cost(self, parent: GraphQLNamedType | None, selections: SelectionSetNode, page: int | None = None) -> int:
        """The cost of these selections on one object; `page` is the `first` of the connection they are on."""
        key = (id(selections), parent.name if parent is not None else None, page)
        known = self.memo.get(key)
        if known is not None:
            return known
        self.memo[key] = COST_CEILING  # a cycle (refused by validation) costs the most
        total = 0
        for node, node_parent in iter_fields(selections, self.fragments, parent, self.schema):
            field = self._field(node_parent, node.name.value)
            if field is None or not is_composite_type(get_named_type(field.type)):
                continue
            total = min(total + self._field_cost(node, field, page), COST_CEILING)
        self.memo[key] = total
        return total

    def _field_cost(self, node: FieldNode, field: GraphQLField, page: int | None) -> int:
        first = self._first(node, field) if "first" in field.args else None
        if first is not None and not is_page_size(first):
            return REFUSED_FIELD_COST
        if is_list_type(get_nullable_type(field.type)):
            items = first if first is not None else page if page is not None else _max_items(field)
            inner_page = None
        else:
            items = 1
            inner_page = first
        under = self.cost(get_named_type(field.type), node.selection_set, inner_page) if node.selection_set else 0
        return min(items * (1 + under), COST_CEILING)

    @staticmethod
    def _field(parent: GraphQLNamedType | None, name: str) -> GraphQLField | None:
        """The field as the schema defines it; None for introspection's meta fields, which cost nothing."""
        if isinstance(parent, (GraphQLObjectType, GraphQLInterfaceType)):
            found: GraphQLField | None = parent.fields.get(name)
            return found
        return None

    def _first(self, node: FieldNode, field: GraphQLField) -> int:
        """The `first` this field is asked for, as sent (in range or not); the default when absent."""
        value: Any = None
        for argument in node.arguments or ():
            if argument.name.value != "first":
                continue
            if isinstance(argument.value, IntValueNode):
                value = int(argument.value.value)
            elif isinstance(argument.value, VariableNode):
                value = self.variables.get(argument.value.name.value)
        if value is None:
            value = field.args["first"].default_value
        if isinstance(value, bool) or not isinstance(value, int):
            return DEFAULT_PAGE
        return value


def _max_items(field: GraphQLField) -> int:
    declared = metadata_of(field).get(MAX_ITEMS)
    return declared if isinstance(declared, int) and declared > 0 else MAX_PAGE


def operation_cost(
    schema: GraphQLSchema, document: DocumentNode, operation_name: str | None, variables: Mapping[str, Any] | None
) -> int:
    """The cost of the operation that would run; 0 when there is none to pick."""
    operation = get_operation_ast(document, operation_name)
    if operation is None:
        return 0
    walk = _Walk(schema, document, operation, variables)
    return walk.cost(schema.get_root_type(operation.operation), operation.selection_set)


class QueryCost(SchemaExtension):
    """Computes the cost after validation, refuses it above the limit and reports it in every response."""

    def __init__(self) -> None:
        self.cost: int | None = None

    def _limit(self) -> int:
        context = app_context(self.execution_context)
        return context.settings.graphql_max_cost if context is not None else DEFAULT_MAX_COST

    def _compute(self) -> int | None:
        """None when the cost cannot be computed (logged): the operation is then refused."""
        ec = self.execution_context
        if ec.graphql_document is None:
            return 0
        try:
            return cached_cost(graphql_schema(ec.schema), ec.graphql_document, ec.operation_name, ec.variables)
        except Exception:
            log.exception("query cost failed; the operation is refused")
            return None

    def on_execute(self) -> Iterator[None]:
        ec = self.execution_context
        if ec.result is None:
            cost = self._compute()
            if cost is None:
                self.cost = 0
                refuse(ec, QueryTooComplex("The query's cost could not be computed, so it is not run."))
                yield
                return
            self.cost = cost
            metrics.GRAPHQL_COST.observe(self.cost)
            limit = self._limit()
            if self.cost > limit:
                refuse(
                    ec,
                    QueryTooComplex(
                        f"Query cost {self.cost} exceeds the maximum of {limit}; ask for fewer items per "
                        "connection (`first`) or nest fewer connections."
                    ),
                )
        yield

    def get_results(self) -> dict[str, Any]:
        if self.cost is None:
            computed = self._compute() if not self.execution_context.pre_execution_errors else 0
            self.cost = computed or 0
        return {"cost": {"requestedQueryCost": self.cost, "maximumAvailable": self._limit()}}


# Costs by (schema, document, operation, the variables the cost reads): the parser cache hands out one
# document per query text, so a client repeating its query with the same page sizes is not walked again.
_COSTS: IdMemo[int] = IdMemo(1024)
_MISSING = object()
_NOT_A_SIZE = "other"


def cached_cost(schema: GraphQLSchema, document: DocumentNode, operation_name: str | None, variables: Any) -> int:
    """operation_cost, walked once per document and page sizes: QueryCost, the rate limit's cost budget
    (feedfabric.schema.ratelimit) and tracing all ask. Variables that are not an object (refused by
    feedfabric.schema.variables) count as none."""
    if not isinstance(variables, Mapping):
        variables = None
    key = (id(schema), id(document), operation_name, _sizes(document, operation_name, variables))
    return _COSTS.get(key, (schema, document), lambda: operation_cost(schema, document, operation_name, variables))


def _sizes(document: DocumentNode, operation_name: str | None, variables: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """What the cost can read of the variables: each declared variable's value when it is an int (a page
    size), else whether it is missing, null or something else. Undeclared variables and the insides of
    lists and objects are never looked at, so the key costs a step per declared variable."""
    operation = get_operation_ast(document, operation_name)
    if operation is None or not variables:
        return ()
    sizes = []
    for definition in operation.variable_definitions or ():
        value = variables.get(definition.variable.name.value, _MISSING)
        if not (value is None or value is _MISSING or type(value) is int):
            value = _NOT_A_SIZE
        sizes.append(value)
    return tuple(sizes)


def event_cost(info: Info) -> int:
    """What one result of the running operation costs: its query cost, as QueryCost computed it (the
    document comes from the shared parse cache, so the figure is usually memoised). A subscription is
    costed for one event; one that sends many for a single subscribe (homeTimeline's replay) spends
    this for each. At least 1, so no item is free."""
    query = info.query
    if query is None:
        return 1
    operation = info.operation
    name = operation.name.value if operation.name is not None else None
    return max(cached_cost(graphql_schema(info.schema), parse_document(query), name, info.variable_values), 1)
