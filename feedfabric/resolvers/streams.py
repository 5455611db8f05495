"""What a subscription yields: the replay-then-live home timeline, new notifications, changed groups.

homeTimeline(since) subscribes to the hub *before* it runs the replay query,
so a post committed meanwhile is either in the replay or queued live, never
neither; live items the replay already sent (or older than `since`, which
the client has) are dropped at the seam, and a redelivered event is dropped
by a short memory of recent IDs. The replay is bounded (REPLAY_MAX): a
cursor further back is refused before anything is sent, never cut short, so
a client misses nothing without being told. After the replay, a subscription
that can be served by a listener (feedfabric.realtime.listener) is handed to
one with the same admission rule, and the stream ends.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from feedfabric.core.errors import BadInput, RateLimited
from feedfabric.core.models import Notification, NotificationGroup, Post
from feedfabric.db import post_extras
from feedfabric.db import posts as posts_db
from feedfabric.feeds import paging, ratelimit
from feedfabric.feeds.filtering import hidden_by_words
from feedfabric.feeds.relations import relations_of
from feedfabric.realtime.hub import Channel, Hub, Subscriber, SubscriberDropped
from feedfabric.realtime.item import TimelineItem
from feedfabric.realtime.listener import Listener

if TYPE_CHECKING:
    from feedfabric.resolvers.context import Context
    from feedfabric.resources import Resources


__all__ = ["REPLAY_MAX", "home_timeline", "notification_groups", "notifications"]

REPLAY_MAX = paging.MAX_PAGE
"""The most items a `since` replays: the largest page homeFeed serves.

A reconnect after a dropped socket misses a handful of items, far below it.
Each replayed item is a message of its own, executed and sent alone, for one
subscribe message (one operation of the rate limit): unbounded, a cursor from
years back made one subscribe send a member's whole history (2,000 posts took
seconds of the server's time). A client that far behind shows the newest of
its feed anyway, and homeFeed serves that in pages it asks for and pays for.
At a homeFeed page's maximum, a replay is never more work than one page a
client could ask for, and it is read in one statement of REPLAY_MAX + 1 rows.
The timeline's length (FEED_MAX_LENGTH, 500) would allow five times that work
per subscribe, for a client that shows the newest items anyway.
"""
TOO_FAR_BACK = (
    f"`since` is too far back: more than {REPLAY_MAX} home-feed items are newer than it, more than a "
    "subscription replays. Reload the feed with `homeFeed`, then subscribe with the newest cursor it returned."
)
RECENT_IDS = 512
# Try Again Later: the client read too slowly. The close reason says so and how to resume with `since`.
SLOW_CLOSE_CODE = 1013


def hub_of(resources: Resources) -> Hub:
    """The process's hub, made in the app lifespan (one per process, never module state)."""
    return resources.hub


async def home_timeline(
    ctx: Context, since: str | None, *, item_cost: int, listener: Callable[[], Listener | None] | None = None
) -> AsyncIterator[TimelineItem]:
    """`item_cost` is what one event of the subscription costs (its operation's query cost): the
    replay spends it for each item it sends. `listener`, when it gives one, takes the live items
    after the replay, and the stream ends there."""
    member = ctx.viewer.require_member()
    after = paging.cursor(since)
    hub = hub_of(ctx.resources)
    with hub.subscribe(Channel.TIMELINE, member.id) as sub:
        backlog = [] if after is None else await _backlog(ctx, member.id, after, item_cost)
        sent = frozenset(post.id for post in backlog)
        for post in backlog:
            yield TimelineItem(post=post)
        recent = _Recent(RECENT_IDS)

        def admit(item: TimelineItem) -> bool:
            post_id = item.post.id
            return not (post_id in sent or (after is not None and post_id <= after)) and recent.first_time(post_id)

        if listener is not None and sub.dropped is None and (live := listener()) is not None:
            live.admit = admit
            hub.listen(sub, live)
            return
        while True:
            item = await _next(ctx, sub)
            if admit(item):
                yield item


async def _backlog(ctx: Context, member_id: uuid.UUID, after: uuid.UUID, item_cost: int) -> list[Post]:
    """The items newer than `after`, oldest first, or BadInput before any is sent when there are more
    than REPLAY_MAX. One row past the bound tells a longer backlog without reading the rest of it, and
    one statement reads the whole replay, so what is counted is what is sent."""
    backlog = await posts_db.home_after(ctx.pool, member_id, after, REPLAY_MAX + 1)
    if len(backlog) > REPLAY_MAX:
        raise BadInput(TOO_FAR_BACK)
    # A socket lives long, and the relation events that refresh this process's copy may still be on their
    # way: a replay reads the relations as Postgres holds them now, so a mute made just before it holds.
    relations = await relations_of(ctx.pool, member_id, None, ctx.resources.relations)
    if backlog and relations.matcher.applies("HOME"):
        # Blocks and mutes are in the statement (feed_posts); the viewer's muted words of HOME are applied here.
        extras = await post_extras.page_extras(ctx.pool, [p.id for p in backlog], member_id)
        backlog = [p for p in backlog if not hidden_by_words(relations, "HOME", p, extras)]
    await _spend_replay(ctx, member_id, len(backlog), item_cost)
    return backlog


async def _spend_replay(ctx: Context, member_id: uuid.UUID, items: int, item_cost: int) -> None:
    """Spends one event's query cost per replayed item, before any is sent, or refuses with RATE_LIMITED.
    The cost guard saw one result for the subscribe: without this, a client repeating subscribe and
    complete got up to REPLAY_MAX items per operation of the rate limit, at no cost."""
    cost = items * item_cost
    if cost <= 0:
        return
    client = ratelimit.client_key(member_id, None)
    allowance = await ratelimit.spend(ctx.resources.redis, ctx.settings, ctx.resources.rate_windows, client, 0, cost)
    if allowance is not None and allowance.refusal is not None:
        raise RateLimited(
            f"The rate limit is spent: replaying {items} items costs {cost} of the {allowance.cost_limit} query "
            f"cost per {ctx.settings.rate_limit_window_seconds} s; retry in {allowance.reset_seconds} s."
        )


async def notifications(ctx: Context) -> AsyncIterator[Notification]:
    member = ctx.viewer.require_member()
    hub = hub_of(ctx.resources)
    with hub.subscribe(Channel.NOTIFICATIONS, member.id) as sub:
        recent = _Recent(RECENT_IDS)
        while True:
            row: Notification = await _next(ctx, sub)
            if recent.first_time(row.id):
                yield row


async def notification_groups(ctx: Context) -> AsyncIterator[NotificationGroup]:
    """The viewer's groups as they change. A group is sent whole each time, so a redelivered event
    only repeats its current state and needs no memory of what was sent."""
    member = ctx.viewer.require_member()
    with hub_of(ctx.resources).subscribe(Channel.NOTIFICATION_GROUPS, member.id) as sub:
        while True:
            yield await _next(ctx, sub)


class _Recent:
    """The last `size` IDs seen. A set beside the deque: `in` on a full deque compared up to
    RECENT_IDS UUIDs for every event of every subscriber. The deque is made on the first event, so an
    idle subscription holds none (even an empty deque is a 760-byte block, an empty set 216 bytes)."""

    __slots__ = ("_order", "_seen", "_size")

    def __init__(self, size: int) -> None:
        self._order: deque[uuid.UUID] | None = None
        self._seen: set[uuid.UUID] | None = None
        self._size = size

    def first_time(self, key: uuid.UUID) -> bool:
        """True, and remembered, the first time `key` is seen."""
        if self._seen is None or self._order is None:
            self._seen, self._order = set(), deque()
        elif key in self._seen:
            return False
        self._order.append(key)
        self._seen.add(key)
        if len(self._order) > self._size:
            self._seen.discard(self._order.popleft())
        return True


async def _next(ctx: Context, sub: Subscriber) -> Any:
    try:
        return await sub.next()
    except SubscriberDropped as dropped:
        await disconnect(ctx, str(dropped))
        raise


async def disconnect(ctx: Context, reason: str) -> None:
    """Closes the subscriber's socket with the reason, then waits for the protocol handler to cancel us.

    Returning instead would make the handler send `complete` on a closed socket.
    """
    socket = ctx.response
    if socket is None or isinstance(socket, Response):
        return  # not a WebSocket (e.g. subscription over HTTP): the error ends the stream
    await socket.close(code=SLOW_CLOSE_CODE, reason=reason[:120])
    await asyncio.Event().wait()
