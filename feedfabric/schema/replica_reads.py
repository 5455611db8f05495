"""Mutations and the read replica (feedfabric.db.replica): a mutation reads the primary, and marks its member.

A mutation's result is read back after its write (the created post, the
liked post's counts), so its reads go to the primary from the start; after
it, the member's reads on every instance go to the primary until the replica
has replayed the write. Called from the operation hooks (feedfabric.schema.operation).
"""

from __future__ import annotations

from strawberry.types import ExecutionContext
from strawberry.types.graphql import OperationType

from feedfabric.resolvers.context import Context, note_write


def _mutation_context(ec: ExecutionContext) -> Context | None:
    context = ec.context
    if not isinstance(context, Context) or ec.graphql_document is None:
        return None
    reads = context.resources.reads
    if reads is None or reads.replica is None:
        return None
    try:
        is_mutation = ec.operation_type == OperationType.MUTATION
    except Exception:  # noqa: BLE001 - an unknown or ambiguous operation: validation reports it
        return None
    return context if is_mutation else None


def before_execute(ec: ExecutionContext) -> None:
    context = _mutation_context(ec)
    if context is not None:
        context.read_primary()


async def after_operation(ec: ExecutionContext) -> None:
    context = _mutation_context(ec)
    if context is not None:
        await note_write(context)
