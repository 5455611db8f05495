"""Variables bounded by the schema before anything coerces them.

graphql-core's `coerce_input_value` walks every item of a list and every key
of an object, and answers each bad one with an error (and, outside
production, with suggestions). A 960 kB body of 120,000 `sources` held the
event loop for a second before any authentication, and a 60,000-key object
half a second. The document's walks were bounded long ago
(feedfabric.schema.selections); this bounds the variables, by what the
schema declares, before `get_variable_values` or execution sees them:

- the variables object holds at most as many keys as the operation declares
  variables, plus MAX_UNDECLARED (a developer's GraphiQL keeps the variables
  of the query before; names the operation does not declare are never read);
- a list holds at most the `max_items` (feedfabric.schema.cost.MAX_ITEMS)
  declared with the argument or input field it is passed to (FeedProfileInput.
  sources: the number of sources; CreatePostInput.mediaIds: a post's media
  limit), and any other list at most what a page holds (MAX_PAGE);
- an input object holds at most as many keys as its type has fields (a key
  the type lacks is left to coercion, which names it without reading it);
- nothing is nested deeper than its type: where the type wants one value (a
  scalar, an enum or an input object), a list (or, for a scalar, an object)
  is refused as nested too deeply, so a 900-deep list is refused at its
  second level;
- a string where an enum is wanted is at most as long as the enum's longest
  value, and a key an input object's type lacks at most as long as its
  longest field name: coercion measures an unknown name against every known
  one for its "did you mean" (graphql-core's LexicalDistance allocates rows
  of the name's length) and echoes it in the error, so a 900 kB enum string
  held the loop for 55-240 ms and came back whole in the answer. Past the
  bound it is refused here, by its length alone.

The walk follows the declared type, so it visits at most the bounded value
and stops at the first violation: its work is a small constant times the
input's size, and capped whatever the input (tests/schema/test_input_bounds).
Each violation is one BAD_USER_INPUT error (feedfabric.schema.operation), on
HTTP and both socket protocols alike. Where a variable is used (its position's
bound) is read from the document once, with graphql-core's TypeInfo, and
memoised per operation node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graphql import (
    ArgumentNode,
    DocumentNode,
    GraphQLEnumType,
    GraphQLError,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLSchema,
    ObjectFieldNode,
    OperationDefinitionNode,
    TypeInfo,
    TypeInfoVisitor,
    VariableNode,
    Visitor,
    get_named_type,
    type_from_ast,
    visit,
)

from feedfabric.feeds.paging import MAX_PAGE
from feedfabric.schema.core_schema import metadata_of
from feedfabric.schema.cost import MAX_ITEMS
from feedfabric.schema.idmemo import IdMemo

MAX_INPUT_DEPTH = 8
"""How deep any variable may nest (lists and input objects), whatever its type: the served input types
nest at most three levels; the cap only matters for an input type that contains itself."""
MAX_UNDECLARED = 16
"""Variables the operation does not declare that a request may still carry (they are ignored)."""
NESTED_TOO_DEEPLY = "is nested too deeply"


class _Refused(Exception):
    """The first violation found; the walk stops there."""


@dataclass(frozen=True, slots=True)
class _Variable:
    name: str
    type: GraphQLInputType | None
    list_bound: int | None
    """The bound of the positions a list-typed variable is passed to (the smallest), when they declare one."""


def _bound(metadata: Mapping[str, Any]) -> int | None:
    declared = metadata.get(MAX_ITEMS)
    return declared if isinstance(declared, int) and declared > 0 else None


class _Positions(Visitor):
    """The declared bound of every position a variable is passed to directly (an argument or an input
    object's field), keeping the smallest per variable."""

    def __init__(self, type_info: TypeInfo) -> None:
        super().__init__()
        self.type_info = type_info
        self.bounds: dict[str, int] = {}

    def _note(self, value: Any, bound: int | None) -> None:
        if isinstance(value, VariableNode) and bound is not None:
            name = value.name.value
            self.bounds[name] = min(bound, self.bounds.get(name, bound))

    def enter_argument(self, node: ArgumentNode, *_: Any) -> None:
        argument = self.type_info.get_argument()
        if argument is not None:
            self._note(node.value, _bound(metadata_of(argument)))

    def enter_object_field(self, node: ObjectFieldNode, *_: Any) -> None:
        parent = get_named_type(self.type_info.get_parent_input_type())
        if isinstance(parent, GraphQLInputObjectType):
            field = parent.fields.get(node.name.value)
            if field is not None:
                self._note(node.value, _bound(metadata_of(field)))


def _plan(schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode) -> tuple[_Variable, ...]:
    definitions = operation.variable_definitions or ()
    if not definitions:
        return ()
    type_info = TypeInfo(schema)
    positions = _Positions(type_info)
    visit(document, TypeInfoVisitor(type_info, positions))
    return tuple(
        _Variable(
            d.variable.name.value,
            type_from_ast(schema, d.type),  # type: ignore[arg-type]
            positions.bounds.get(d.variable.name.value),
        )
        for d in definitions
    )


_PLANS: IdMemo[tuple[_Variable, ...]] = IdMemo(1024)


class _Walk:
    """Checks one variable's value against its type."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def refuse(self, path: str, why: str) -> _Refused:
        return _Refused(f'Variable "${self.name}" at "{path}" {why}.')

    def check(self, value: Any, type_: GraphQLInputType, bound: int | None, path: str, depth: int) -> None:
        if depth > MAX_INPUT_DEPTH:
            raise self.refuse(path, NESTED_TOO_DEEPLY)
        if isinstance(type_, GraphQLNonNull):
            type_ = type_.of_type
        if value is None:
            return
        if isinstance(type_, GraphQLList):
            self._list(value, type_.of_type, bound, path, depth)
        elif isinstance(type_, GraphQLInputObjectType):
            self._object(value, type_, path, depth)
        elif isinstance(value, list | dict):  # a scalar or an enum: one value
            raise self.refuse(path, NESTED_TOO_DEEPLY)
        elif isinstance(type_, GraphQLEnumType) and isinstance(value, str) and len(value) > _longest(type_.values):
            raise self.refuse(path, f"is {len(value):,} characters long; no value of {type_.name} is that long")

    def _list(self, value: Any, item: GraphQLInputType, bound: int | None, path: str, depth: int) -> None:
        if not isinstance(value, list):  # one value where a list is wanted: a list of one
            self.check(value, item, None, path, depth + 1)
            return
        most = bound if bound is not None else MAX_PAGE
        if len(value) > most:
            raise self.refuse(path, f"holds {len(value)} items; at most {most} are allowed")
        for index, each in enumerate(value):
            self.check(each, item, None, f"{path}[{index}]", depth + 1)

    def _object(self, value: Any, type_: GraphQLInputObjectType, path: str, depth: int) -> None:
        if isinstance(value, list):  # one object wanted: a list is a level more than the type has
            raise self.refuse(path, NESTED_TOO_DEEPLY)
        if not isinstance(value, dict):
            return  # not an object: coercion refuses it without walking it
        fields = type_.fields
        if len(value) > len(fields):
            raise self.refuse(path, f"has {len(value)} fields; {type_.name} has {len(fields)}")
        longest = _longest(fields)
        for key, each in value.items():
            field = fields.get(key)
            if field is not None:
                self.check(each, field.type, _bound(metadata_of(field)), f"{path}.{key}", depth + 1)
            elif len(key) > longest:  # a short one coercion names (with suggestions); its value is unread
                raise self.refuse(path, f"has a key of {len(key):,} characters; no field of {type_.name} is that long")


def _longest(names: Mapping[str, Any]) -> int:
    """The length of the longest of these names (an enum's values, an input type's fields)."""
    return max(map(len, names), default=0)


def bound_errors(
    schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode, variables: Mapping[str, Any]
) -> list[GraphQLError]:
    """The first way the variables exceed what the schema declares, as one error; empty when within.
    `schema` is the served schema with its metadata (feedfabric.schema.core_schema.graphql_schema)."""
    declared = len(operation.variable_definitions or ())
    if len(variables) > declared + MAX_UNDECLARED:
        return [
            GraphQLError(
                f"The request sends {len(variables)} variables; the operation declares {declared}. "
                "Send the variables the operation declares."
            )
        ]
    plan = _PLANS.get(
        (id(schema), id(operation)), (schema, document, operation), lambda: _plan(schema, document, operation)
    )
    try:
        for variable in plan:
            if variable.type is None or variable.name not in variables:
                continue  # an unknown type is refused by validation; a missing value by coercion
            _Walk(variable.name).check(variables[variable.name], variable.type, variable.list_bound, variable.name, 0)
    except _Refused as refused:
        return [GraphQLError(str(refused))]
    return []
