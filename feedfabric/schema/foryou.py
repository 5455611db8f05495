"""For You types and their root fields (mixed into Query and Mutation)."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING

import strawberry

from feedfabric.resolvers import foryou as resolve
from feedfabric.schema.cost import MAX_ITEMS
from feedfabric.schema.types import ContextInfo, PageInfo, Post

if TYPE_CHECKING:
    from feedfabric.resolvers.foryou import DayStats, Model, Profile


@strawberry.enum(description="How For You ranks its candidates. NEWEST_FIRST is plain recency with no favourite boost.")
class FeedPreset(Enum):
    NEWEST_FIRST = "newest_first"
    BALANCED = "balanced"
    CLOSE_CIRCLE = "close_circle"
    DISCOVER = "discover"
    LEARNED = "learned"


@strawberry.enum(description="Where a For You candidate came from.")
class ForYouSource(Enum):
    FOLLOWING = "following"
    FAVOURITES = "favourites"
    TAGS = "tags"
    SIMILAR = "similar"
    POPULAR = "popular"


@strawberry.type
class FeedProfile:
    preset: FeedPreset
    sources: list[ForYouSource] = strawberry.field(
        description="Candidate sources For You draws from; favourites' recent posts are candidates whatever this says."
    )
    lookback_hours: int = strawberry.field(
        description="How far back For You looks, 1..720 hours (default 48); favourites always get at least 48."
    )

    @classmethod
    def of(cls, profile: Profile) -> FeedProfile:
        return cls(
            preset=FeedPreset(profile.preset),
            sources=[ForYouSource(s) for s in profile.sources],
            lookback_hours=profile.lookback_hours,
        )


@strawberry.input
class FeedProfileInput:
    preset: FeedPreset | None = None
    # Bounded before coercion (feedfabric.schema.input_bounds): each source at most once.
    sources: list[ForYouSource] | None = strawberry.field(default=None, metadata={MAX_ITEMS: len(ForYouSource)})
    lookback_hours: int | None = None


@strawberry.type
class ForYouEdge:
    cursor: str
    node: Post
    reason: ForYouSource = strawberry.field(
        description="The candidate source that brought this post in (the strongest, when several did)."
    )
    score: float = strawberry.field(description="The ranking score it was placed by.")


@strawberry.type(
    description="A ranked page. The ranking is fixed when the first page is served: later pages of the\n"
    "same cursor chain continue that order, with no post twice and none skipped."
)
class ForYouConnection:
    edges: list[ForYouEdge]
    page_info: PageInfo
    preset: FeedPreset
    ranked_at: datetime = strawberry.field(description="When the ranking this chain of pages follows was made.")


@strawberry.type(description="Admin: what each feed served and how readers engaged with it, per day.")
class FeedStats:
    feed: str = strawberry.field(description="following, favourites or for_you")
    preset: FeedPreset | None = strawberry.field(description="Set for for_you rows.")
    day: datetime
    pages_served: int
    posts_served: int
    posts_engaged: int = strawberry.field(
        description="Served posts the reader then liked, commented on or reposted within 24 hours."
    )
    engagement_rate: float

    @classmethod
    def of(cls, row: DayStats) -> FeedStats:
        return cls(
            feed=row.feed,
            preset=FeedPreset(row.preset) if row.preset else None,
            day=row.day,
            pages_served=row.pages_served,
            posts_served=row.posts_served,
            posts_engaged=row.posts_engaged,
            engagement_rate=row.engagement_rate,
        )


@strawberry.type
class RankerWeight:
    signal: str
    weight: float


@strawberry.type(description="Admin: a ranker trained from the feed log.")
class RankerModel:
    id: strawberry.ID
    trained_at: datetime
    training_rows: int
    auc: float = strawberry.field(description="ROC AUC on the held-out later part of the log.")
    baseline_auc: float = strawberry.field(description="The BALANCED preset's AUC on the same held-out rows.")
    weights: list[RankerWeight]
    active: bool

    @classmethod
    def of(cls, model: Model) -> RankerModel:
        return cls(
            id=strawberry.ID(str(model.id)),
            trained_at=model.trained_at,
            training_rows=model.training_rows,
            auc=model.auc,
            baseline_auc=model.baseline_auc,
            weights=[RankerWeight(signal=s, weight=w) for s, w in zip(model.signals, model.weights, strict=True)],
            active=model.active,
        )


@strawberry.type
class ForYouQuery:
    @strawberry.field(description="For You: a ranked feed from the viewer's profile (GET /userfeed/foryou).")
    async def for_you_feed(
        self, info: ContextInfo, first: int | None = 20, after: str | None = None
    ) -> ForYouConnection:
        result = await resolve.for_you(info.context, first, after)
        edges = [
            ForYouEdge(cursor=cursor, node=Post.of(post), reason=ForYouSource(reason), score=score)
            for post, reason, score, cursor in zip(
                result.page.posts, result.reasons, result.scores, result.cursors, strict=True
            )
        ]
        return ForYouConnection(
            edges=edges,
            page_info=PageInfo.of(result.page, edges, after),
            preset=FeedPreset(result.preset),
            ranked_at=result.ranked_at,
        )

    @strawberry.field(description="The viewer's For You settings; null when signed out.")
    async def feed_profile(self, info: ContextInfo) -> FeedProfile | None:
        profile = await resolve.feed_profile(info.context)
        return FeedProfile.of(profile) if profile is not None else None

    # Rows a day (a feed and preset each) for up to MAX_STATS_DAYS: the query cost counts that many (its
    # default, a page, was less than a year of them).
    @strawberry.field(
        description="Admin only.", metadata={MAX_ITEMS: resolve.MAX_STATS_DAYS * resolve.STATS_ROWS_PER_DAY}
    )
    async def feed_stats(self, info: ContextInfo, days: int | None = 14) -> list[FeedStats]:
        return [FeedStats.of(row) for row in await resolve.stats(info.context, days)]

    @strawberry.field(description="Admin only; newest first.")
    async def ranker_models(self, info: ContextInfo, first: int | None = 10) -> list[RankerModel]:
        return [RankerModel.of(m) for m in await resolve.ranker_models(info.context, first)]


@strawberry.type
class ForYouMutation:
    @strawberry.mutation
    async def update_feed_profile(self, info: ContextInfo, input: FeedProfileInput) -> FeedProfile:
        profile = await resolve.update_feed_profile(
            info.context,
            input.preset.value if input.preset is not None else None,
            [s.value for s in input.sources] if input.sources is not None else None,
            input.lookback_hours,
        )
        return FeedProfile.of(profile)
