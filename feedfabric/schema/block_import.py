"""importBlocks (GraphQL multipart request spec) and its BlockImport answer."""

from __future__ import annotations

import strawberry
from strawberry.file_uploads import Upload

from feedfabric.resolvers import block_import as resolve
from feedfabric.schema.types import ContextInfo


@strawberry.type
class BlockImport:
    blocked: int = strawberry.field(
        description="Lines that named a member, now blocked (those already blocked included)."
    )
    unknown: list[str] = strawberry.field(description="Lines that named no member, as written (the first 100).")


@strawberry.type
class BlockImportMutation:
    @strawberry.mutation(
        description="One username or external ID a line; Mastodon's blocked_accounts.csv is read as is."
    )
    async def import_blocks(self, info: ContextInfo, file: Upload) -> BlockImport:
        done = await resolve.import_blocks(info.context, file)
        return BlockImport(blocked=done.blocked, unknown=done.unknown)
