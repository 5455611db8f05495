"""GraphQL's unit of the rate limit (feedfabric.feeds.ratelimit): root fields, not HTTP requests.

One HTTP request can carry many operations: twenty aliases of a root field, or
a batch of documents. So every root field of the operation that runs (aliases
and fragment-spread fields included) counts one, and each operation of a
batch is checked on its own. An operation refused before execution (too
costly, or fragments fanning out) spends its share all the same. Each
operation that runs also spends its query cost from the cost budget of the
same window (RATE_LIMIT_COST); one refused spends none of it, having done no
work (a client's one query of `first: 1000` does not lock it out for the
window).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from graphql import DocumentNode, get_operation_ast
from strawberry.extensions import SchemaExtension

from feedfabric.feeds import ratelimit
from feedfabric.schema.cost import cached_cost
from feedfabric.schema.refusal import app_context, refuse
from feedfabric.schema.selections import fragments_of, iter_fields
from feedfabric.schema.served import graphql_schema


def root_field_count(document: DocumentNode, operation_name: str | None) -> int:
    """Root fields of the selected operation, aliases counted separately; at least 1."""
    operation = get_operation_ast(document, operation_name)
    if operation is None:
        return 1
    return max(sum(1 for _ in iter_fields(operation.selection_set, fragments_of(document))), 1)


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
        # A document already refused (its cost, its fragments) spends from the budget as well.
        if ec.graphql_document is not None and context is not None:
            await self._check(context, ec.graphql_document)
        yield

    async def _check(self, context: Any, document: DocumentNode) -> None:
        ec = self.execution_context
        member = getattr(getattr(context.viewer_result, "viewer", None), "member", None)
        client = getattr(context.request, "client", None)
        allowance = await ratelimit.spend(
            context.resources.redis,
            context.settings,
            ratelimit.client_key(member.id if member else None, client.host if client else None),
            root_field_count(document, ec.operation_name),
            0 if ec.result is not None else _query_cost(ec, document),  # a refused operation does no work
        )
        if allowance is None:
            return
        self.status = allowance.as_extension()
        if allowance.refusal is not None and ec.result is None:
            refuse(ec, allowance.refusal)

    def get_results(self) -> dict[str, Any]:
        return {"rateLimit": self.status} if self.status is not None else {}
