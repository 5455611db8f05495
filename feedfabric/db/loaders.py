"""Per-request DataLoaders over the batched queries, so a page costs a fixed number of statements.

A new `Loaders` is made for every request (and for every event a
subscription sends), so nothing is cached across viewers or across time.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from functools import cached_property
from typing import Any, TypeVar

import asyncpg
from strawberry.dataloader import DataLoader

from feedfabric.core.models import Comment, Member, PageExtras, Playlist, Post
from feedfabric.db import comments as comments_db
from feedfabric.db import favourites as favourites_db
from feedfabric.db import follows as follows_db
from feedfabric.db import members as members_db
from feedfabric.db import notification_groups as notification_groups_db
from feedfabric.db import playlists as playlists_db
from feedfabric.db import post_extras as post_extras_db
from feedfabric.db import posts as posts_db

__all__ = ["Loaders"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _loader(
    fetch: Callable[[list[K]], Awaitable[Mapping[K, V]]], default: Callable[[], Any] = lambda: None
) -> DataLoader[K, Any]:
    async def load(keys: Sequence[K]) -> list[Any]:
        found = await fetch(list(keys))
        return [found.get(k, default()) for k in keys]

    return DataLoader(load_fn=load)


async def _by_uuid(found: Awaitable[Mapping[str, V]]) -> dict[uuid.UUID, V]:
    """follows.target_id is text; the loaders key playlists by UUID."""
    return {uuid.UUID(k): v for k, v in (await found).items()}


class Loaders:
    """One request's loaders, each made on first use: a page reads a few of them, and a live item's
    rendering (a fresh set per event) one or two."""

    def __init__(self, pool: asyncpg.Pool, viewer_id: uuid.UUID | None) -> None:
        self.pool = pool
        self.viewer_id = viewer_id

    @cached_property
    def member(self) -> DataLoader[uuid.UUID, Member | None]:
        return _loader(lambda ids: members_db.by_ids(self.pool, ids))

    @cached_property
    def member_stats(self) -> DataLoader[uuid.UUID, tuple[int, int]]:
        return _loader(lambda ids: follows_db.member_stats(self.pool, ids), lambda: (0, 0))

    @cached_property
    def visible_post(self) -> DataLoader[uuid.UUID, Post | None]:
        return _loader(lambda ids: posts_db.visible_by_ids(self.pool, ids, self.viewer_id))

    @cached_property
    def comment(self) -> DataLoader[uuid.UUID, Comment | None]:
        return _loader(lambda ids: comments_db.by_ids(self.pool, ids))

    @cached_property
    def mentions(self) -> DataLoader[uuid.UUID, list[uuid.UUID]]:
        return _loader(lambda ids: posts_db.mentioned_in(self.pool, ids), list)

    @cached_property
    def post_extras(self) -> DataLoader[uuid.UUID, PageExtras]:
        """Everything a feed shows beside a post's row (db.post_extras), for all the posts asked for at once:
        each key maps to the batch's whole PageExtras (it holds the originals of reposts too)."""

        async def extras(ids: list[uuid.UUID]) -> dict[uuid.UUID, PageExtras]:
            loaded = await post_extras_db.page_extras(self.pool, ids, self.viewer_id)
            return dict.fromkeys(ids, loaded)

        return _loader(extras)

    @cached_property
    def viewer_follows(self) -> DataLoader[uuid.UUID, bool]:
        return _loader(lambda ids: self._followed(ids, "member"), bool)

    @cached_property
    def viewer_favourite(self) -> DataLoader[uuid.UUID, bool]:
        async def favourites(ids: list[uuid.UUID]) -> dict[uuid.UUID, bool]:
            if self.viewer_id is None:
                return {}
            hits = await favourites_db.among(self.pool, self.viewer_id, ids)
            return {k: k in hits for k in ids}

        return _loader(favourites, bool)

    @cached_property
    def liked_playlist(self) -> DataLoader[uuid.UUID, Playlist | None]:
        """The Liked playlist by owner ID (upserted on first use)."""
        return _loader(lambda ids: playlists_db.liked_of(self.pool, ids))

    @cached_property
    def playlist_followers(self) -> DataLoader[uuid.UUID, int]:
        return _loader(
            lambda ids: _by_uuid(follows_db.follower_counts(self.pool, "playlist", [str(k) for k in ids])), int
        )

    @cached_property
    def viewer_follows_playlist(self) -> DataLoader[uuid.UUID, bool]:
        return _loader(lambda ids: self._followed(ids, "playlist"), bool)

    @cached_property
    def group_actors(self) -> DataLoader[uuid.UUID, list[uuid.UUID]]:
        """A notification group's most recent actors (IDs), for a page of groups at once."""
        return _loader(lambda ids: notification_groups_db.sample_actors(self.pool, ids, self.viewer_id), list)

    async def _followed(self, keys: list[uuid.UUID], target_type: str) -> dict[uuid.UUID, bool]:
        if self.viewer_id is None:
            return {}
        followed = await follows_db.followed_among(self.pool, self.viewer_id, target_type, [str(k) for k in keys])
        return {k: str(k) in followed for k in keys}
