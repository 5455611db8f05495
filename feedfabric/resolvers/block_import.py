"""importBlocks: the upload read to its bound, then one transaction (feeds.block_import)."""

from __future__ import annotations

from typing import Any

from feedfabric.db.pool import transaction
from feedfabric.feeds import block_import
from feedfabric.resolvers.context import Context
from feedfabric.resolvers.media import read_upload

__all__ = ["import_blocks"]


async def import_blocks(ctx: Context, file: Any) -> block_import.BlockImport:
    blocker = ctx.viewer.require_member()
    data = await read_upload(file, block_import.MAX_BYTES)
    async with transaction(ctx.pool) as conn:
        return await block_import.import_blocks(conn, ctx.settings, blocker, data)
