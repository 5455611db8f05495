"""Query cost in the style of GitHub's GraphQL API, refused above GRAPHQL_MAX_COST with QUERY_TOO_COMPLEX.

Depth, alias and token limits bound the size of the *text*; they do not bound
the work, because `first: 100` nested three times asks for a million nodes in
a few dozen tokens. The cost models the work before any resolver runs:

- every field that returns an object (or a list of objects) costs 1, times
  the product of the `first` of every connection above it;
- a connection (a field with a `first` argument) multiplies the lists
  directly beneath it (`edges`), and so everything under those, by its
  `first` (the schema's default when omitted or null, at least 1); its
  single objects such as `pageInfo` are not multiplied;
- scalar and enum fields, and `__typename`, cost nothing.

So `homeFeed(first: 20) { edges { node { id author { username } } } }` costs
1 + 20 + 20 + 20 = 61. Every response reports the figure in
`extensions.cost`, as Shopify's API does, so clients can see what they spend.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLField,
    GraphQLInterfaceType,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SchemaMetaFieldDef,
    SelectionSetNode,
    TypeMetaFieldDef,
    VariableNode,
    get_named_type,
    get_nullable_type,
    get_operation_ast,
    is_composite_type,
    is_list_type,
)
from strawberry.extensions import SchemaExtension

from feedfabric import metrics
from feedfabric.errors import QueryTooComplex
from feedfabric.schema.idmemo import IdMemo
from feedfabric.schema.refusal import app_context, refuse
from feedfabric.schema.served import graphql_schema

DEFAULT_MAX_COST = 10_000
DEFAULT_PAGE = 20
_META_FIELDS: dict[str, GraphQLField] = {"__schema": SchemaMetaFieldDef, "__type": TypeMetaFieldDef}


class _Walk:
    def __init__(
        self,
        schema: GraphQLSchema,
        document: DocumentNode,
        operation: OperationDefinitionNode,
        variables: Mapping[str, Any] | None,
    ) -> None:
        self.schema = schema
        self.fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
        self.variables = dict(variables or {})
        for definition in operation.variable_definitions or ():
            name = definition.variable.name.value
            if name not in self.variables and isinstance(definition.default_value, IntValueNode):
                self.variables[name] = int(definition.default_value.value)

    def cost(
        self,
        parent: GraphQLNamedType | None,
        selections: SelectionSetNode,
        multiplier: int,
        page: int | None = None,
        seen: frozenset[str] = frozenset(),
    ) -> int:
        """`page` is the `first` of the connection whose fields these are, if any."""
        total = 0
        for node, node_parent in self._fields(parent, selections, seen):
            field = self._field(node_parent, node.name.value)
            if field is None:
                continue
            named = get_named_type(field.type)
            if not is_composite_type(named):
                continue
            own = multiplier * page if page is not None and is_list_type(get_nullable_type(field.type)) else multiplier
            total += own
            if node.selection_set is not None:
                inner_page = self._first(node, field) if "first" in field.args else None
                total += self.cost(named, node.selection_set, own, inner_page, seen)
        return total

    def _fields(
        self, parent: GraphQLNamedType | None, selections: SelectionSetNode, seen: frozenset[str]
    ) -> Iterator[tuple[FieldNode, GraphQLNamedType | None]]:
        """The field nodes of a selection set, with fragments expanded in place (cycles cut)."""
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                yield selection, parent
            elif isinstance(selection, InlineFragmentNode):
                on = self.schema.get_type(selection.type_condition.name.value) if selection.type_condition else parent
                for field_node, _ in self._fields(on, selection.selection_set, seen):
                    yield field_node, on
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = self.fragments.get(name)
                if fragment is None or name in seen:
                    continue
                on = self.schema.get_type(fragment.type_condition.name.value)
                for field_node, _ in self._fields(on, fragment.selection_set, seen | {name}):
                    yield field_node, on

    @staticmethod
    def _field(parent: GraphQLNamedType | None, name: str) -> GraphQLField | None:
        if name in _META_FIELDS:
            return _META_FIELDS[name]
        if isinstance(parent, (GraphQLObjectType, GraphQLInterfaceType)):
            return parent.fields.get(name)
        return None

    def _first(self, node: FieldNode, field: GraphQLField) -> int:
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
            value = DEFAULT_PAGE
        return max(value, 1)


def operation_cost(
    schema: GraphQLSchema, document: DocumentNode, operation_name: str | None, variables: Mapping[str, Any] | None
) -> int:
    """The cost of the operation that would run; 0 when there is none to pick."""
    operation = get_operation_ast(document, operation_name)
    if operation is None:
        return 0
    walk = _Walk(schema, document, operation, variables)
    return walk.cost(schema.get_root_type(operation.operation), operation.selection_set, 1)


class QueryCost(SchemaExtension):
    """Computes the cost after validation, refuses it above the limit and reports it in every response."""

    def __init__(self) -> None:
        self.cost: int | None = None

    def _limit(self) -> int:
        context = app_context(self.execution_context)
        return context.settings.graphql_max_cost if context is not None else DEFAULT_MAX_COST

    def _compute(self) -> int:
        ec = self.execution_context
        if ec.graphql_document is None:
            return 0
        try:
            return _cached_cost(graphql_schema(ec.schema), ec.graphql_document, ec.operation_name, ec.variables)
        except Exception:  # noqa: BLE001 - an unpickable or odd document simply has no cost to report
            return 0

    def on_execute(self) -> Iterator[None]:
        ec = self.execution_context
        if ec.result is None:
            self.cost = self._compute()
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
            self.cost = self._compute() if not self.execution_context.pre_execution_errors else 0
        return {"cost": {"requestedQueryCost": self.cost, "maximumAvailable": self._limit()}}


# Costs by (schema, document, operation, variables): the parser cache hands out one document per query
# text, so a client repeating its query with the same variables is not walked again.
_COSTS: IdMemo[int] = IdMemo(1024)


def _cached_cost(
    schema: GraphQLSchema, document: DocumentNode, operation_name: str | None, variables: Mapping[str, Any] | None
) -> int:
    try:
        key = (id(schema), id(document), operation_name, _frozen(variables))
        hash(key)
    except TypeError:
        return operation_cost(schema, document, operation_name, variables)
    return _COSTS.get(key, (schema, document), lambda: operation_cost(schema, document, operation_name, variables))


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return (type(value), value)
