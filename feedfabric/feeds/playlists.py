"""Playlists of posts ordered by fractional keys, the Liked playlist, and playlist follows.

Why fractional keys: a move or an insert computes one key strictly between its
two neighbours and writes exactly one row; nothing after it is renumbered.
Keys come from the `fractional-indexing` library (base-62, byte-comparable,
matching the COLLATE "C" rank column). Writers of one playlist lock its row
first, so two inserts at the same place run one after the other and the
second sees the first's key: both succeed with distinct keys. Keys that grow
past RANK_MAX_LENGTH are evened out by `rebalance`, run after the write
commits (see feeds/playlist_rebalance.py).

The Liked playlist is an ordinary row whose ID is derived from its owner,
so it can be created lazily by whoever needs it first without a lookup
table; likes add and remove its items through `add_item` / `remove_item`,
the same path as every playlist. Functions take the caller's connection and
never commit.
"""

from __future__ import annotations

import re
import uuid

import asyncpg
from fractional_indexing import FIError, generate_key_between, generate_n_keys_between

from feedfabric.core.errors import BadInput, Forbidden, NotFound
from feedfabric.core.ids import new_id, parse_id
from feedfabric.core.models import Member, Page, Playlist, PlaylistItem
from feedfabric.db import follows as follows_db
from feedfabric.db import members as members_db
from feedfabric.db import playlists as playlists_db
from feedfabric.db import posts as posts_db
from feedfabric.feeds import text
from feedfabric.feeds.members import lists_hidden

__all__ = [
    "RANK_MAX_LENGTH",
    "add_item",
    "create",
    "follow",
    "get",
    "item_cursor",
    "items",
    "liked_playlists",
    "move_item",
    "needs_rebalance",
    "owned",
    "parse_item_cursor",
    "rebalance",
    "remove_item",
]

USER, LIKED = "user", "liked"
# Keys longer than this make their playlist due for a background rebalance.
RANK_MAX_LENGTH = 50
# Bounds the cost of one rebalance; the Liked playlist grows only by appends, which keep keys short.
MAX_ITEMS = 10_000
NAME_MAX_LENGTH = 100
_RANK = re.compile(r"^[0-9A-Za-z]{1,512}\Z")


liked_playlist_id = playlists_db.liked_playlist_id


# -- reads -------------------------------------------------------------------------


async def _owner_hidden(
    conn: asyncpg.Connection | asyncpg.Pool, playlist: Playlist, viewer_id: uuid.UUID | None
) -> bool:
    """Whether the playlist's owner is suspended and not the viewer: the rule of `owned`
    (feeds.members.lists_hidden), applied to one playlist."""
    owner = (await members_db.by_ids(conn, [playlist.owner_id])).get(playlist.owner_id)
    return owner is None or lists_hidden(owner, viewer_id)


async def get(
    conn: asyncpg.Connection | asyncpg.Pool, playlist_id: uuid.UUID, viewer_id: uuid.UUID | None
) -> Playlist | None:
    """The playlist, or None, as for an unknown ID, when its owner is suspended: `owned` lists none of
    a suspended member's playlists, and their Liked playlist's ID is computable, so by ID too they are
    not found (by anyone but the owner)."""
    playlist = await playlists_db.get(conn, playlist_id)
    if playlist is None or await _owner_hidden(conn, playlist, viewer_id):
        return None
    return playlist


async def liked_playlists(
    conn: asyncpg.Connection | asyncpg.Pool, member_ids: list[uuid.UUID]
) -> dict[uuid.UUID, Playlist]:
    """Each member's Liked playlist by member ID, created on first use (an upsert of a fixed ID)."""
    return await playlists_db.liked_of(conn, member_ids)


async def liked_playlist(conn: asyncpg.Connection | asyncpg.Pool, member_id: uuid.UUID) -> Playlist:
    return (await liked_playlists(conn, [member_id]))[member_id]


def item_cursor(item: PlaylistItem) -> str:
    """`rank:id`: the keyset position itself, so a cursor survives the removal of its item."""
    return f"{item.rank}:{item.id}"


def parse_item_cursor(after: str | None) -> tuple[str, uuid.UUID] | None:
    if after is None or after == "":
        return None
    rank, sep, raw_id = after.partition(":") if isinstance(after, str) else ("", "", "")
    if not sep or not _RANK.match(rank):
        raise BadInput("cursor is not valid")
    return rank, parse_id(raw_id, "cursor")


async def items(
    conn: asyncpg.Connection | asyncpg.Pool,
    playlist_id: uuid.UUID,
    owner: Member,
    viewer_id: uuid.UUID | None,
    after: tuple[str, uuid.UUID] | None,
    limit: int,
) -> Page:
    """A page in playlist order; one row more than asked tells whether another page exists. A suspended
    owner's playlist is empty to everyone else (reached through Member.likedPlaylist, it would show whose
    posts they liked): their lists are hidden (`lists_hidden`)."""
    if lists_hidden(owner, viewer_id):
        return Page([], None, "postgres")
    rows = await playlists_db.page(conn, playlist_id, viewer_id, after, limit + 1)
    page = rows[:limit]
    more = len(rows) > limit and bool(page)
    return Page(page, item_cursor(page[-1]) if more else None, "postgres")


async def owned(
    conn: asyncpg.Connection | asyncpg.Pool,
    owner: Member,
    viewer_id: uuid.UUID | None,
    after: uuid.UUID | None,
    limit: int,
) -> Page:
    """A member's USER playlists, newest first, one statement a page; a suspended member's are hidden
    from everyone but themselves, as their posts are."""
    if lists_hidden(owner, viewer_id):
        return Page([], None, "postgres")
    rows = await playlists_db.owned_page(conn, owner.id, after, limit + 1)
    page = rows[:limit]
    return Page(page, str(page[-1].id) if len(rows) > limit and page else None, "postgres")


# -- writes ------------------------------------------------------------------------


async def create(conn: asyncpg.Connection, owner: Member, name: str) -> Playlist:
    name = text.clean_text(name, "name", max_length=NAME_MAX_LENGTH)
    return await playlists_db.insert(conn, new_id(), owner.id, name, USER)


async def _lock_owned(conn: asyncpg.Connection, playlist_id: uuid.UUID, owner: Member) -> Playlist:
    """Locks the playlist row: the one serialisation point of every write to its items. Another
    member's playlist is FORBIDDEN, unless its owner is suspended: then NOT_FOUND, as by ID in `get`."""
    playlist = await playlists_db.get(conn, playlist_id, for_update=True)
    if playlist is None:
        raise NotFound("playlist not found")
    if playlist.owner_id != owner.id:
        if await _owner_hidden(conn, playlist, owner.id):
            raise NotFound("playlist not found")
        raise Forbidden("only the owner may change a playlist")
    return playlist


async def _anchor(
    conn: asyncpg.Connection, playlist_id: uuid.UUID, item_id: uuid.UUID | None, what: str, moving: uuid.UUID | None
) -> PlaylistItem | None:
    if item_id is None:
        return None
    if item_id == moving:
        raise BadInput(f"{what} must name another item, not the one being moved")
    found = await playlists_db.item(conn, item_id)
    if found is None or found.playlist_id != playlist_id:
        raise BadInput(f"{what} is not an item of this playlist")
    return found


async def _bounds(
    conn: asyncpg.Connection,
    playlist_id: uuid.UUID,
    after: PlaylistItem | None,
    before: PlaylistItem | None,
    moving: uuid.UUID | None,
) -> tuple[str | None, str | None]:
    """The keys of the two neighbours of the gap asked for (None: that end of the playlist)."""
    if after is not None and before is not None and (after.rank, after.id) >= (before.rank, before.id):
        raise BadInput("afterItemId must come before beforeItemId")
    if after is not None:
        # With both anchors, a concurrent insert may have landed between them since the client looked:
        # go right after `after`, which is still between the two, rather than fail.
        following = await playlists_db.next_after(conn, playlist_id, after.rank, after.id, moving)
        return after.rank, following[0] if following else None
    if before is not None:
        preceding = await playlists_db.prev_before(conn, playlist_id, before.rank, before.id, moving)
        return preceding[0] if preceding else None, before.rank
    return await playlists_db.last_rank(conn, playlist_id, moving), None


async def _place(
    conn: asyncpg.Connection,
    playlist_id: uuid.UUID,
    after_id: uuid.UUID | None,
    before_id: uuid.UUID | None,
    moving: uuid.UUID | None,
) -> str:
    """A key strictly between the neighbours; the caller holds the playlist lock."""
    for attempt in range(2):
        after = await _anchor(conn, playlist_id, after_id, "afterItemId", moving)
        before = await _anchor(conn, playlist_id, before_id, "beforeItemId", moving)
        low, high = await _bounds(conn, playlist_id, after, before, moving)
        try:
            return str(generate_key_between(low, high))
        except FIError:
            # Equal or malformed neighbour keys (never written by this code): even the playlist out and retry.
            if attempt:
                raise
            await rewrite_evenly(conn, playlist_id)
    raise AssertionError("unreachable")


async def add_item(
    conn: asyncpg.Connection,
    owner: Member,
    playlist_id: uuid.UUID,
    post_id: uuid.UUID,
    after_id: uuid.UUID | None = None,
    before_id: uuid.UUID | None = None,
    *,
    from_like: bool = False,
) -> PlaylistItem:
    """Inserts one row between the given neighbours (both None: at the end)."""
    playlist = await _lock_owned(conn, playlist_id, owner)
    if playlist.kind == LIKED and not from_like:
        raise BadInput("the Liked playlist follows your likes: like the post instead")
    if not await posts_db.is_visible(conn, post_id, owner.id):
        raise NotFound("post not found")
    if playlist.kind == USER and await playlists_db.count_items(conn, playlist.id) >= MAX_ITEMS:
        raise BadInput(f"a playlist holds at most {MAX_ITEMS} items")
    rank = await _place(conn, playlist.id, after_id, before_id, None)
    return await playlists_db.insert_item(conn, new_id(), playlist.id, post_id, rank)


async def move_item(
    conn: asyncpg.Connection,
    owner: Member,
    item_id: uuid.UUID,
    after_id: uuid.UUID | None = None,
    before_id: uuid.UUID | None = None,
) -> PlaylistItem:
    """Gives the item a new key between its new neighbours: exactly one row is written."""
    found = await playlists_db.item(conn, item_id)
    if found is None:
        raise NotFound("playlist item not found")
    await _lock_owned(conn, found.playlist_id, owner)
    if await playlists_db.item(conn, item_id) is None:  # removed while we waited for the lock
        raise NotFound("playlist item not found")
    rank = await _place(conn, found.playlist_id, after_id, before_id, item_id)
    return await playlists_db.set_rank(conn, item_id, rank)


async def remove_item(conn: asyncpg.Connection, owner: Member, item_id: uuid.UUID, *, from_like: bool = False) -> bool:
    found = await playlists_db.item(conn, item_id)
    if found is None:
        raise NotFound("playlist item not found")
    playlist = await _lock_owned(conn, found.playlist_id, owner)
    if playlist.kind == LIKED and not from_like:
        raise BadInput("the Liked playlist follows your likes: unlike the post instead")
    return await playlists_db.delete_item(conn, item_id)


async def on_liked(conn: asyncpg.Connection, member: Member, post_id: uuid.UUID) -> PlaylistItem:
    """Called in the like's transaction: the post joins the end of the member's Liked playlist.

    add_item's checks hold by construction here: the Liked playlist's ID is fixed by its owner, and the like
    has just found the post visible and locked it for share in this transaction. So the common case costs
    the lock, the end's rank and the insert (issue 50); the playlist is made on the member's first like.
    """
    liked_id = liked_playlist_id(member.id)
    liked = await playlists_db.get(conn, liked_id, for_update=True)
    if liked is None:
        await liked_playlist(conn, member.id)
        liked = await playlists_db.get(conn, liked_id, for_update=True)
    assert liked is not None
    rank = await _place(conn, liked.id, None, None, None)
    return await playlists_db.insert_item(conn, new_id(), liked.id, post_id, rank)


async def on_unliked(conn: asyncpg.Connection, member: Member, post_id: uuid.UUID) -> bool:
    """Called in the unlike's transaction: the post leaves the member's Liked playlist."""
    item = await playlists_db.item_for_post(conn, liked_playlist_id(member.id), post_id)
    if item is None:
        return False
    return await remove_item(conn, member, item.id, from_like=True)


async def follow(conn: asyncpg.Connection, member: Member, playlist_id: uuid.UUID, *, on: bool) -> Playlist:
    """Playlist follows live in the one follows table (target_type 'playlist'); idempotent both ways.
    A suspended member's playlist is NOT_FOUND both ways, as by ID in `get`; an existing follow of it
    stays, unseen, and counts again if the owner is unsuspended (as a follow of the member does)."""
    playlist = await get(conn, playlist_id, member.id)
    if playlist is None:
        raise NotFound("playlist not found")
    if on:
        if playlist.owner_id == member.id:
            raise BadInput("you cannot follow your own playlist")
        await follows_db.add(conn, member.id, "playlist", str(playlist.id))
    else:
        await follows_db.remove(conn, member.id, "playlist", str(playlist.id))
    return playlist


# -- rebalancing -----------------------------------------------------------------------


def needs_rebalance(item: PlaylistItem, bound: int | None = None) -> bool:
    return len(item.rank) > (RANK_MAX_LENGTH if bound is None else bound)


async def rewrite_evenly(conn: asyncpg.Connection, playlist_id: uuid.UUID) -> int:
    """New, evenly spaced keys in the current order; the caller holds the playlist lock."""
    ids = await playlists_db.ordered_item_ids(conn, playlist_id)
    if ids:
        await playlists_db.rewrite_ranks(conn, ids, generate_n_keys_between(None, None, len(ids)))
    return len(ids)


async def rebalance(conn: asyncpg.Connection, playlist_id: uuid.UUID, bound: int | None = None) -> bool:
    """Rewrites one playlist's keys when any is longer than the bound; the visible order is unchanged.

    Takes the same row lock as every writer, so it never interleaves with an insert or a move.
    """
    limit = RANK_MAX_LENGTH if bound is None else bound
    if await playlists_db.get(conn, playlist_id, for_update=True) is None:
        return False
    if await playlists_db.max_rank_length(conn, playlist_id) <= limit:
        return False
    await rewrite_evenly(conn, playlist_id)
    return True
