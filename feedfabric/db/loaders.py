"""Per-request DataLoaders over the batched queries, so a page costs a fixed number of statements.

A new `Loaders` is made for every request (and for every event a
subscription sends), so nothing is cached across viewers or across time.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
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


@dataclass
class Loaders:
    member: DataLoader[uuid.UUID, Member | None]
    member_stats: DataLoader[uuid.UUID, tuple[int, int]]
    visible_post: DataLoader[uuid.UUID, Post | None]
    comment: DataLoader[uuid.UUID, Comment | None]
    mentions: DataLoader[uuid.UUID, list[uuid.UUID]]
    # Everything a feed shows beside a post's row (db.post_extras), for all the posts asked for at once:
    # each key maps to the batch's whole PageExtras (it holds the originals of reposts too).
    post_extras: DataLoader[uuid.UUID, PageExtras]
    viewer_follows: DataLoader[uuid.UUID, bool]
    viewer_favourite: DataLoader[uuid.UUID, bool]
    # Playlists: the Liked one by owner ID (upserted on first use); follows keyed by playlist ID.
    liked_playlist: DataLoader[uuid.UUID, Playlist | None]
    playlist_followers: DataLoader[uuid.UUID, int]
    viewer_follows_playlist: DataLoader[uuid.UUID, bool]
    # A notification group's most recent actors (IDs), for a page of groups at once.
    group_actors: DataLoader[uuid.UUID, list[uuid.UUID]]


def make_loaders(pool: asyncpg.Pool, viewer_id: uuid.UUID | None) -> Loaders:
    async def viewer_set(fetch: Callable[[uuid.UUID], Awaitable[set[Any]]], keys: list[Any]) -> dict[Any, bool]:
        if viewer_id is None:
            return {}
        hits = await fetch(viewer_id)
        return {k: k in hits for k in keys}

    async def follows(keys: list[uuid.UUID]) -> dict[uuid.UUID, bool]:
        if viewer_id is None:
            return {}
        followed = await follows_db.followed_among(pool, viewer_id, "member", [str(k) for k in keys])
        return {k: str(k) in followed for k in keys}

    async def playlist_follows(keys: list[uuid.UUID]) -> dict[uuid.UUID, bool]:
        if viewer_id is None:
            return {}
        followed = await follows_db.followed_among(pool, viewer_id, "playlist", [str(k) for k in keys])
        return {k: str(k) in followed for k in keys}

    async def extras(ids: list[uuid.UUID]) -> dict[uuid.UUID, PageExtras]:
        loaded = await post_extras_db.page_extras(pool, ids, viewer_id)
        return dict.fromkeys(ids, loaded)

    return Loaders(
        member=_loader(lambda ids: members_db.by_ids(pool, ids)),
        member_stats=_loader(lambda ids: follows_db.member_stats(pool, ids), lambda: (0, 0)),
        visible_post=_loader(lambda ids: posts_db.visible_by_ids(pool, ids, viewer_id)),
        comment=_loader(lambda ids: comments_db.by_ids(pool, ids)),
        mentions=_loader(lambda ids: posts_db.mentioned_in(pool, ids), list),
        post_extras=_loader(extras),
        viewer_follows=_loader(follows, bool),
        viewer_favourite=_loader(lambda ids: viewer_set(lambda v: favourites_db.among(pool, v, ids), ids), bool),
        liked_playlist=_loader(lambda ids: playlists_db.liked_of(pool, ids)),
        playlist_followers=_loader(
            lambda ids: _by_uuid(follows_db.follower_counts(pool, "playlist", [str(k) for k in ids])), int
        ),
        viewer_follows_playlist=_loader(playlist_follows, bool),
        group_actors=_loader(lambda ids: notification_groups_db.sample_actors(pool, ids), list),
    )
