"""The realtime consumer's delivery: who gets a new post, and the rows its subscribers render it from."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
from feedfabric.core.events import Event
from feedfabric.core.settings import Settings
from feedfabric.db.loaders import Loaders
from feedfabric.feeds.relations import RelationsCache
from feedfabric.realtime.delivery import deliver
from feedfabric.realtime.hub import Channel, Hub

from tests.support import feed_world, make_api


class _NoDatabase:
    """A pool that must not be used: primed loaders answer without a statement."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the primed loaders queried the database ({name})")


def _created(post_id: uuid.UUID) -> Event:
    return Event(event_id=1, type="PostCreated", key=str(post_id), version=1, data={"postId": str(post_id)})


async def _member(pool: asyncpg.Pool, username: str) -> uuid.UUID:
    return await pool.fetchval("SELECT id FROM members WHERE username = $1", username)  # type: ignore[no-any-return]


async def _loaded(loaders: Any, post_id: uuid.UUID) -> dict[str, Any]:
    """What a subscriber's render reads through its loaders of a repost's original: its row (reached
    through visibility) and its author."""
    post = await loaders.visible_post.load(post_id)
    return {"post": post, "author": await loaders.member.load(post.author_id)}


async def test_a_live_repost_is_rendered_from_primed_rows_equal_to_a_fresh_load(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with make_api(settings) as api:
        await feed_world(api)  # "other" reposts author's liked, commented, tagged first post; reader follows other
    repost_id = await pool.fetchval("SELECT id FROM posts WHERE repost_of IS NOT NULL")
    original_id = await pool.fetchval("SELECT repost_of FROM posts WHERE id = $1", repost_id)
    hub = Hub()
    reader = hub.add(Channel.TIMELINE, await _member(pool, "reader"))
    stranger = hub.add(Channel.TIMELINE, await _member(pool, "author"))  # follows nobody; not the reposter

    assert await deliver(pool, hub, [_created(repost_id)], RelationsCache()) == 1
    assert len(stranger.queue) == 0
    item = await reader.next()
    assert item.post.id == repost_id and item.original is not None and item.original.id == original_id

    primed = Loaders(_NoDatabase(), None)  # type: ignore[arg-type]
    item.prime(primed)
    fresh = Loaders(pool, None)
    assert await _loaded(primed, original_id) == await _loaded(fresh, original_id)
    assert await primed.member.load(item.post.author_id) == await fresh.member.load(item.post.author_id)
    assert await primed.visible_post.load(original_id) == item.original
    assert item.extras is not None
    original = item.extras.extras[original_id]
    assert original.tags == ["news"] and original.like_count == 1 and original.comment_count == 1


async def test_a_mute_whose_event_is_still_on_its_way_holds_for_the_next_live_post(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """The process's copy of a recipient's relations is used only at the version Postgres holds: the
    MemberMuted event that would refresh it need not have arrived before the muted author's next post."""
    async with make_api(settings) as api:
        alice, bob = await api.member("alice"), await api.member("bob")
        await api.follow(bob, "alice")
        before = uuid.UUID(await api.post(alice, "before the mute"))
        hub, cache = Hub(), RelationsCache()
        listener = hub.add(Channel.TIMELINE, await _member(pool, "bob"))
        assert await deliver(pool, hub, [_created(before)], cache) == 1
        assert (await listener.next()).post.id == before

        await api.gql("mutation($e: String!) { mute(externalUserId: $e) { id } }", {"e": "alice"}, token=bob)
        after = uuid.UUID(await api.post(alice, "after the mute"))

    assert await deliver(pool, hub, [_created(after)], cache) == 0
    assert len(listener.queue) == 0
