"""Who to follow and topics worth following (GraphQL and REST), and dismissing a suggestion."""

from __future__ import annotations

from feedfabric.db.pool import transaction
from feedfabric.feeds import paging, suggestions
from feedfabric.feeds.suggestions import MemberSuggestion, TopicSuggestion
from feedfabric.resolvers.context import Context

__all__ = ["dismiss", "members", "topics"]


async def members(ctx: Context, first: int | None) -> list[MemberSuggestion]:
    member = ctx.viewer.require_member()
    limit = paging.page_size(first)
    r = ctx.resources
    relations = await ctx.relations()  # blocked either way or muted: never suggested
    return await suggestions.suggested_members(
        ctx.read_pool, r.redis, r.settings, member.id, limit, relations=relations
    )


async def topics(ctx: Context, first: int | None) -> list[TopicSuggestion]:
    member = ctx.viewer.require_member()
    limit = paging.page_size(first)
    r = ctx.resources
    return await suggestions.suggested_topics(ctx.read_pool, r.redis, r.settings, member.id, limit)


async def dismiss(ctx: Context, external_id: str) -> bool:
    member = ctx.viewer.require_member()
    async with transaction(ctx.pool) as conn:
        await suggestions.dismiss(conn, member, external_id)
    return True
