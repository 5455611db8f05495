"""Blocks, mutes and muted words: thin resolvers over feeds.safety, shared by GraphQL and REST.

After a write the request's view of the viewer's relations is read again
(Context.relations_changed), so a mutation's result (viewerBlocks, viewerMutes)
already shows the change.
"""

from __future__ import annotations

from feedfabric.core.ids import parse_id
from feedfabric.core.models import Member, Page
from feedfabric.db.pool import transaction
from feedfabric.feeds import paging, safety
from feedfabric.resolvers.context import Context

__all__ = [
    "add_muted_word",
    "block",
    "blocked_members",
    "mute",
    "muted_members",
    "muted_words",
    "remove_muted_word",
    "unblock",
    "unmute",
]


async def block(ctx: Context, external_id: str) -> Member:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        result = await safety.block(conn, ctx.settings, member, external_id)
    ctx.relations_changed()
    return result


async def unblock(ctx: Context, external_id: str) -> Member:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        result = await safety.unblock(conn, ctx.settings, member, external_id)
    ctx.relations_changed()
    return result


async def mute(ctx: Context, external_id: str, notifications: bool | None, expires_in_seconds: int | None) -> Member:
    member = ctx.viewer.require_member()
    notify = True if notifications is None else notifications
    async with transaction(ctx.pool) as conn:
        result = await safety.mute(conn, ctx.settings, member, external_id, notify, expires_in_seconds)
    ctx.relations_changed()
    return result


async def unmute(ctx: Context, external_id: str) -> Member:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        result = await safety.unmute(conn, ctx.settings, member, external_id)
    ctx.relations_changed()
    return result


async def add_muted_word(
    ctx: Context, phrase: str, whole_word: bool | None, contexts: list[str] | None, expires_in_seconds: int | None
) -> safety.MutedWord:
    member = ctx.viewer.require_member()
    whole = True if whole_word is None else whole_word
    async with transaction(ctx.pool) as conn:
        row = await safety.add_muted_word(conn, ctx.settings, member, phrase, whole, contexts, expires_in_seconds)
    ctx.relations_changed()
    return safety.MutedWord(row)


async def remove_muted_word(ctx: Context, word_id: str) -> bool:
    member = ctx.viewer.require_member()
    parsed = parse_id(word_id, "id")
    async with transaction(ctx.pool) as conn:
        removed = await safety.remove_muted_word(conn, ctx.settings, member, parsed)
    ctx.relations_changed()
    return removed


async def muted_words(ctx: Context) -> list[safety.MutedWord]:
    member = ctx.viewer.require_member()
    return await safety.muted_words(ctx.pool, member)


async def blocked_members(ctx: Context, first: int | None, after: str | None) -> Page:
    member = ctx.viewer.require_member()
    return await safety.blocked_members(ctx.pool, member, after, paging.page_size(first))


async def muted_members(ctx: Context, first: int | None, after: str | None) -> Page:
    member = ctx.viewer.require_member()
    return await safety.muted_members(ctx.pool, member, after, paging.page_size(first))
