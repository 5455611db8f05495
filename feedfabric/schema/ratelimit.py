"""GraphQL's unit of the rate limit (feedfabric.feeds.ratelimit): root fields, not HTTP requests.

One HTTP request can carry many operations: twenty aliases of a root field, or
a batch of documents. So every root field of the operation that runs (aliases
and fragment-spread fields included) counts one, and each operation of a
batch is checked on its own. Each operation that runs also spends its query
cost from the cost budget of the same window (RATE_LIMIT_COST).

A document refused before execution (it does not parse, a validation rule,
the depth or alias limit, its shape, its cost or its variables refuse it)
ran no resolver, but parsing and checking it was work all the same, and
without a charge a client could keep a process busy with refused documents
for free. So it spends its root fields (one when it does not parse) and, from
the cost budget, the work of checking it: one unit per token, as the parser
and each validation rule walk every token a bounded number of times (a token
of checking costs about what a unit of query cost does: a refused 1.3 kB
document of 270 tokens takes about 3 ms, as a feed page of cost 260 does). A
document that does not parse is charged one unit per ten characters, the
ratio the character cap assumes (feedfabric.schema.documents). Its query cost it does
not spend (a client's one query of `first: 1000` does not lock it out for the
window). A refused request (its document at parse or validation, or its
variables, feedfabric.schema.input_bounds) also spends one unit per ten bytes
of its variables, what the server read to refuse it (`variables_work`), so a
client cannot send a megabyte of list for the price of one operation, whatever
the document beside it. Over the budget, the refusal's own errors give way to RATE_LIMITED.
These checks live in the schema, so HTTP and both socket protocols spend alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from graphql import DocumentNode, get_operation_ast
from strawberry.extensions import SchemaExtension

from feedfabric.core import jsonwire
from feedfabric.feeds import ratelimit
from feedfabric.resolvers.context import Context
from feedfabric.schema.core_schema import graphql_schema
from feedfabric.schema.cost import cached_cost
from feedfabric.schema.documents import MAX_TOKENS
from feedfabric.schema.idmemo import IdMemo
from feedfabric.schema.refusal import app_context, refuse
from feedfabric.schema.selections import fragments_of, iter_fields

__all__ = ["root_field_count", "spend_refused_document"]


def root_field_count(document: DocumentNode, operation_name: str | None) -> int:
    """Root fields of the selected operation, aliases counted separately; at least 1."""
    operation = get_operation_ast(document, operation_name)
    if operation is None:
        return 1
    return max(sum(1 for _ in iter_fields(operation.selection_set, fragments_of(document))), 1)


CHARACTERS_PER_TOKEN = 10


def document_tokens(document: DocumentNode) -> int:
    """The document's tokens (its comments included): the work of parsing and validating it."""
    return _TOKENS.get(id(document), document, lambda: _count_tokens(document))


_TOKENS: IdMemo[int] = IdMemo(1024)


def _count_tokens(document: DocumentNode) -> int:
    token = document.loc.start_token if document.loc is not None else None
    count = 0
    while token is not None:
        count += 1
        token = token.next
    return max(count - 2, 1)  # the start and end-of-file markers are no tokens


def refused_work(query: str | None, document: DocumentNode | None) -> int:
    """What checking a refused document cost, in units of the cost budget."""
    if document is not None:
        return document_tokens(document)
    return min(len(query or "") // CHARACTERS_PER_TOKEN + 1, MAX_TOKENS)


MAX_SIZED_NODES = 100_000
"""Values `variables_work` sizes one by one, when they nest too deeply for the encoder; past them the
variables count as the largest body the API reads."""


def variables_work(variables: Any, settings: Any) -> int:
    """What reading a refused request's variables cost, in units of the cost budget: one per
    CHARACTERS_PER_TOKEN bytes of their JSON."""
    if not variables:
        return 0
    try:
        size = len(jsonwire.dumps_text(variables))
    except (TypeError, ValueError):  # nested past the encoder's limit, or an upload in them
        size = _sized(variables, settings.max_body_bytes)
    return size // CHARACTERS_PER_TOKEN + 1


def _sized(value: Any, most: int) -> int:
    """The JSON size of `value`, counted without recursion; `most` once it has more than MAX_SIZED_NODES
    values (such variables were built to be expensive)."""
    total, stack, seen = 0, [value], 0
    while stack:
        seen += 1
        if seen > MAX_SIZED_NODES:
            return most
        item = stack.pop()
        if isinstance(item, dict):
            total += 2 + sum(len(str(k)) + 4 for k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            total += 2 + len(item)
            stack.extend(item)
        else:
            total += len(str(item)) + 2
    return min(total, most)


def _client(context: Context) -> str:
    member = getattr(getattr(context.viewer_result, "viewer", None), "member", None)
    client = getattr(context.request, "client", None)
    return ratelimit.client_key(member.id if member else None, client.host if client else None)


async def spend_refused(ec: Any, *, with_variables: bool = False) -> ratelimit.Allowance | None:
    """Spends for a document refused before it reached the guards (it did not parse, failed validation,
    or, `with_variables`, its variables were refused: their bytes spend too); None outside the app or
    without Redis."""
    context = app_context(ec)
    if context is None:
        return None
    extra = variables_work(ec.variables, context.settings) if with_variables else 0
    return await spend_refused_document(context, ec.query, ec.graphql_document, ec.operation_name, extra)


async def spend_refused_document(
    context: Context,
    query: str | None,
    document: DocumentNode | None,
    operation_name: str | None = None,
    extra_work: int = 0,
) -> ratelimit.Allowance | None:
    """The same charge for a document a transport refuses before the schema runs it (the HTTP endpoint's
    several operations with none named)."""
    operations = root_field_count(document, operation_name) if document is not None else 1
    return await ratelimit.spend(
        context.resources.redis,
        context.settings,
        context.resources.rate_windows,
        _client(context),
        operations,
        refused_work(query, document) + extra_work,
    )


def _query_cost(ec: Any, document: DocumentNode) -> int:
    """What QueryCost computed for the operation (memoised there); 0 when it cannot be computed, which
    QueryCost refuses anyway."""
    try:
        return cached_cost(graphql_schema(ec.schema), document, ec.operation_name, ec.variables)
    except Exception:  # noqa: BLE001 - QueryCost logs it and refuses the operation
        return 0


class OperationRateLimit(SchemaExtension):
    """Counts the operation's root fields against the member's window; refuses past the limit."""

    def __init__(self) -> None:
        self.status: dict[str, int] | None = None

    async def on_execute(self) -> AsyncIterator[None]:
        ec = self.execution_context
        context = app_context(ec)
        # A document already refused (its cost, its fragments) spends from the budget as well; one whose
        # variables were refused has spent already (feedfabric.schema.operation).
        if ec.graphql_document is not None and context is not None and "rateLimit" not in ec.extensions_results:
            await self._check(context, ec.graphql_document)
        yield

    async def _check(self, context: Context, document: DocumentNode) -> None:
        ec = self.execution_context
        refused = ec.result is not None
        allowance = await ratelimit.spend(
            context.resources.redis,
            context.settings,
            context.resources.rate_windows,
            _client(context),
            root_field_count(document, ec.operation_name),
            document_tokens(document) if refused else _query_cost(ec, document),
        )
        if allowance is None:
            return
        self.status = allowance.as_extension()
        if allowance.refusal is not None:
            refuse(ec, allowance.refusal)

    def get_results(self) -> dict[str, Any]:
        return {"rateLimit": self.status} if self.status is not None else {}
