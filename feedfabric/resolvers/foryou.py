"""For You, the feed profile, and the admin's feed statistics and ranker models."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from feedfabric.core.errors import BadInput
from feedfabric.core.models import PageExtras, RankedPage
from feedfabric.db import feed_stats, post_extras
from feedfabric.db import foryou as foryou_db
from feedfabric.db.feed_stats import DayStats
from feedfabric.db.foryou import Model, Profile
from feedfabric.feeds import foryou, paging, ranking
from feedfabric.feeds.filtering import posts_hidden_by_words
from feedfabric.resolvers import pages
from feedfabric.resolvers.context import Context

# The rows these functions return (storage's types), named here so the edges need not import storage.
__all__ = [
    "MAX_STATS_DAYS",
    "STATS_ROWS_PER_DAY",
    "DayStats",
    "Model",
    "Profile",
    "feed_profile",
    "for_you",
    "ranker_models",
    "stats",
    "update_feed_profile",
]

MAX_STATS_DAYS = 366
STATS_ROWS_PER_DAY = 2 + len(ranking.PRESETS)
"""feedStats rows a day can have: following, favourites, and for_you once per preset."""


async def for_you(ctx: Context, first: int | None, after: str | None) -> RankedPage:
    member = ctx.viewer.require_member()
    limit = paging.page_size(first)
    r = ctx.resources
    relations = await ctx.relations()

    async def extras_of(ids: Sequence[uuid.UUID]) -> PageExtras:
        return await post_extras.page_extras(ctx.read_pool, ids, member.id)

    hides = posts_hidden_by_words(extras_of, relations, "FOR_YOU")
    service = foryou.ForYouService(r.settings, r.pool, r.redis, hides=hides)
    result = await service.next_page(member.id, after, limit) if after else await service.first_page(member.id, limit)
    page = await pages.finished(ctx, result.page)
    if r.feed_log is not None:
        r.feed_log.record(
            member.id,
            "for_you",
            page,
            preset=result.preset,
            reasons=result.reasons,
            similarities=result.similarities,
        )
    return RankedPage(page, result.reasons, result.scores, result.cursors, result.preset, result.ranked_at)


async def feed_profile(ctx: Context) -> Profile | None:
    member = ctx.viewer.member
    return await foryou.profile_of(ctx.pool, member.id) if member is not None else None


async def update_feed_profile(
    ctx: Context, preset: str | None, sources: list[str] | None, lookback_hours: int | None
) -> Profile:
    member = ctx.viewer.require_member()
    current = await foryou.profile_of(ctx.pool, member.id)
    profile = foryou.validate_profile(preset, sources, lookback_hours, current)
    await foryou_db.save_profile(ctx.pool, member.id, profile)
    return profile


async def stats(ctx: Context, days: int | None) -> list[DayStats]:
    ctx.viewer.require_admin()
    days = 14 if days is None else days
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_STATS_DAYS:
        raise BadInput(f"days must be a whole number from 1 to {MAX_STATS_DAYS}")
    return await feed_stats.by_day(ctx.pool, days)


async def ranker_models(ctx: Context, first: int | None) -> list[Model]:
    ctx.viewer.require_admin()
    return await foryou_db.models(ctx.pool, paging.page_size(first, default=10))
