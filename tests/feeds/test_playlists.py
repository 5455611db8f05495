"""Playlists on real Postgres through the real app: ordering, one-row moves, rebalancing, the Liked
playlist, playlist follows, errors; and followed tags in the Postgres home feed."""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import asyncpg
import pytest
from feedfabric.core.auth import TokenCache
from feedfabric.feeds import playlists as playlists_svc
from feedfabric.feeds.playlist_rebalance import Rebalances

from tests.support import HOME, Api, GraphQLErrors

CREATE = "mutation($n: String!) { createPlaylist(name: $n) { id name kind owner { username } } }"
ADD = """mutation($p: ID!, $post: ID!, $a: ID, $b: ID) {
  addToPlaylist(playlistId: $p, postId: $post, afterItemId: $a, beforeItemId: $b) { id rank post { id } }
}"""
MOVE = """mutation($i: ID!, $a: ID, $b: ID) {
  movePlaylistItem(itemId: $i, afterItemId: $a, beforeItemId: $b) { id rank }
}"""
REMOVE = "mutation($i: ID!) { removePlaylistItem(itemId: $i) }"
ITEMS = """query($p: ID!, $first: Int, $after: String) { playlist(id: $p) {
  id kind followerCount viewerFollows
  items(first: $first, after: $after) {
    edges { cursor node { id rank post { id } } } pageInfo { hasNextPage endCursor }
  }
} }"""
FOLLOW = "mutation($p: ID!) { followPlaylist(playlistId: $p) { id followerCount viewerFollows } }"
UNFOLLOW = "mutation($p: ID!) { unfollowPlaylist(playlistId: $p) { id followerCount viewerFollows } }"
LIKED = """query($u: String!) { member(username: $u) { likedPlaylist {
  id name kind owner { username } items(first: 100) { edges { node { post { id } } } }
} } }"""
LIKE = "mutation($p: ID!) { likePost(postId: $p) { id } }"
UNLIKE = "mutation($p: ID!) { unlikePost(postId: $p) { id } }"


async def _playlist(api: Api, token: str, name: str = "Mix") -> str:
    return str((await api.gql(CREATE, {"n": name}, token=token))["createPlaylist"]["id"])


async def _add(
    api: Api, token: str, playlist: str, post: str, after: str | None = None, before: str | None = None
) -> dict[str, Any]:
    data = await api.gql(ADD, {"p": playlist, "post": post, "a": after, "b": before}, token=token)
    return data["addToPlaylist"]  # type: ignore[no-any-return]


async def _items(api: Api, token: str | None, playlist: str, page: int = 100) -> list[dict[str, Any]]:
    """Every item, walking the keyset pages."""
    out: list[dict[str, Any]] = []
    after = None
    while True:
        data = await api.gql(ITEMS, {"p": playlist, "first": page, "after": after}, token=token)
        conn = data["playlist"]["items"]
        out += [e["node"] for e in conn["edges"]]
        if not conn["pageInfo"]["hasNextPage"]:
            return out
        after = conn["pageInfo"]["endCursor"]


async def _ranks(pool: asyncpg.Pool, playlist: str) -> dict[uuid.UUID, str]:
    rows = await pool.fetch("SELECT id, rank FROM playlist_items WHERE playlist_id = $1", uuid.UUID(playlist))
    return {r["id"]: r["rank"] for r in rows}


async def test_random_inserts_moves_and_removals_keep_the_reference_order(api: Api) -> None:
    rng = random.Random(7)
    maya = await api.member("maya")
    posts = [await api.post(maya, f"post {i}") for i in range(6)]
    playlist = await _playlist(api, maya)
    reference: list[str] = []  # item IDs in the order the playlist must show
    for _ in range(120):
        op = rng.random()
        if not reference or op < 0.5:
            where = rng.randrange(len(reference) + 1)
            style = rng.choice(["after", "before", "both", "end"])
            after = reference[where - 1] if where > 0 else None
            before = reference[where] if where < len(reference) else None
            if style == "end":
                after, before, where = None, None, len(reference)
            elif style == "after" and after is not None:
                before = None
            elif style == "before" and before is not None:
                after = None
            item = await _add(api, maya, playlist, rng.choice(posts), after, before)
            reference.insert(where, item["id"])
        elif op < 0.85:
            moved = reference.pop(rng.randrange(len(reference)))
            where = rng.randrange(len(reference) + 1)
            after = reference[where - 1] if where > 0 else None
            before = reference[where] if where < len(reference) else None
            if after is not None and before is not None and rng.random() < 0.5:
                after = None if rng.random() < 0.5 else after
                before = None if after is not None else before
            if after is None and before is None and reference:
                after = reference[-1]
                where = len(reference)
            await api.gql(MOVE, {"i": moved, "a": after, "b": before}, token=maya)
            reference.insert(where, moved)
        else:
            removed = reference.pop(rng.randrange(len(reference)))
            assert (await api.gql(REMOVE, {"i": removed}, token=maya))["removePlaylistItem"] is True
    shown = await _items(api, maya, playlist, page=7)
    assert [i["id"] for i in shown] == reference
    ranks = [i["rank"] for i in shown]
    assert ranks == sorted(ranks, key=lambda r: r.encode()) and len(set(ranks)) == len(ranks)


async def test_a_move_rewrites_exactly_one_row(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    post = await api.post(maya, "hello")
    playlist = await _playlist(api, maya)
    ids = [(await _add(api, maya, playlist, post))["id"] for _ in range(8)]
    before = await _ranks(pool, playlist)
    await api.gql(MOVE, {"i": ids[6], "a": ids[1], "b": ids[2]}, token=maya)
    after = await _ranks(pool, playlist)
    changed = [k for k in before if before[k] != after[k]]
    assert changed == [uuid.UUID(ids[6])]
    assert [i["id"] for i in await _items(api, maya, playlist)] == [*ids[:2], ids[6], *ids[2:6], ids[7]]
    # to the front and to the end: still one row each
    await api.gql(MOVE, {"i": ids[7], "b": ids[0]}, token=maya)
    await api.gql(MOVE, {"i": ids[0]}, token=maya)
    final = await _ranks(pool, playlist)
    assert {k for k in after if after[k] != final[k]} == {uuid.UUID(ids[7]), uuid.UUID(ids[0])}
    shown = [i["id"] for i in await _items(api, maya, playlist)]
    assert shown[0] == ids[7] and shown[-1] == ids[0]


async def test_keys_past_the_bound_are_rebalanced_in_the_background_keeping_the_order(
    api: Api, pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(playlists_svc, "RANK_MAX_LENGTH", 5)
    maya = await api.member("maya")
    post = await api.post(maya, "hello")
    playlist = await _playlist(api, maya)
    first = (await _add(api, maya, playlist, post))["id"]
    last = (await _add(api, maya, playlist, post))["id"]
    order = [first, last]
    # Always inserting right before the last item narrows one gap, so keys grow.
    for _ in range(40):
        item = await _add(api, maya, playlist, post, before=last)
        order.insert(len(order) - 1, item["id"])
    await api.app.state.resources.rebalances.wait_idle()
    shown = await _items(api, maya, playlist, page=9)
    assert [i["id"] for i in shown] == order
    assert max(len(i["rank"]) for i in shown) <= 5
    # the domain call is idempotent: nothing is due now
    async with pool.acquire() as conn, conn.transaction():
        assert await playlists_svc.rebalance(conn, uuid.UUID(playlist), 5) is False


async def test_rebalance_rewrites_a_long_keyed_playlist_in_order(pool: asyncpg.Pool, api: Api) -> None:
    maya = await api.member("maya")
    post = await api.post(maya, "hello")
    playlist = await _playlist(api, maya)
    ids = [(await _add(api, maya, playlist, post))["id"] for _ in range(5)]
    # Hand-made long keys (as years of inserts into one gap would leave), still in order.
    await pool.execute(
        "UPDATE playlist_items SET rank = rank || repeat('V', 60) WHERE playlist_id = $1", uuid.UUID(playlist)
    )
    task = Rebalances().schedule(pool, uuid.UUID(playlist))
    assert await task is True
    shown = await _items(api, maya, playlist, page=2)
    assert [i["id"] for i in shown] == ids
    assert max(len(i["rank"]) for i in shown) <= 3


async def test_two_concurrent_inserts_at_the_same_place_both_succeed(api: Api) -> None:
    maya = await api.member("maya")
    post = await api.post(maya, "hello")
    playlist = await _playlist(api, maya)
    a = (await _add(api, maya, playlist, post))["id"]
    b = (await _add(api, maya, playlist, post))["id"]
    made = await asyncio.gather(*(_add(api, maya, playlist, post, after=a, before=b) for _ in range(2)))
    more = await asyncio.gather(*(_add(api, maya, playlist, post, after=a) for _ in range(3)))
    shown = await _items(api, maya, playlist)
    ids = [i["id"] for i in shown]
    assert len(ids) == 7 and ids[0] == a and ids[-1] == b
    assert {m["id"] for m in made + more} == set(ids[1:-1])
    assert len({i["rank"] for i in shown}) == 7


async def test_the_liked_playlist_follows_likes_and_unlikes(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    p1 = await api.post(theo, "one")
    p2 = await api.post(theo, "two")
    empty = (await api.gql(LIKED, {"u": "maya"}, token=theo))["member"]["likedPlaylist"]
    assert empty["kind"] == "LIKED" and empty["name"] == "Liked" and empty["owner"]["username"] == "maya"
    assert empty["items"]["edges"] == []
    await api.gql(LIKE, {"p": p1}, token=maya)
    await api.gql(LIKE, {"p": p2}, token=maya)
    await api.gql(LIKE, {"p": p1}, token=maya)  # a repeated like adds nothing
    liked = (await api.gql(LIKED, {"u": "maya"}, token=maya))["member"]["likedPlaylist"]
    assert liked["id"] == empty["id"]
    assert [e["node"]["post"]["id"] for e in liked["items"]["edges"]] == [p1, p2]
    await api.gql(UNLIKE, {"p": p1}, token=maya)
    await api.gql(UNLIKE, {"p": p1}, token=maya)
    liked = (await api.gql(LIKED, {"u": "maya"}, token=maya))["member"]["likedPlaylist"]
    assert [e["node"]["post"]["id"] for e in liked["items"]["edges"]] == [p2]
    # it is an ordinary playlist row: Query.playlist finds it, and it can be followed
    data = await api.gql(ITEMS, {"p": liked["id"], "first": 10}, token=theo)
    assert data["playlist"]["kind"] == "LIKED"
    assert (await api.gql(FOLLOW, {"p": liked["id"]}, token=theo))["followPlaylist"]["followerCount"] == 1
    # only likes change it: direct adds and removals are refused, and others may not touch it
    item = data["playlist"]["items"]["edges"][0]["node"]["id"]
    assert await api.error_codes(ADD, {"p": liked["id"], "post": p1}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(REMOVE, {"i": item}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(ADD, {"p": liked["id"], "post": p1}, token=theo) == ["FORBIDDEN"]
    assert await api.error_codes(MOVE, {"i": item}, token=theo) == ["FORBIDDEN"]


async def test_follow_playlist_counts_and_viewer_follows(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    ines = await api.member("ines")
    playlist = await _playlist(api, maya)
    followed = (await api.gql(FOLLOW, {"p": playlist}, token=theo))["followPlaylist"]
    assert followed == {"id": playlist, "followerCount": 1, "viewerFollows": True}
    await api.gql(FOLLOW, {"p": playlist}, token=theo)  # idempotent
    await api.gql(FOLLOW, {"p": playlist}, token=ines)
    seen = (await api.gql(ITEMS, {"p": playlist}, token=maya))["playlist"]
    assert seen["followerCount"] == 2 and seen["viewerFollows"] is False
    signed_out = (await api.gql(ITEMS, {"p": playlist}))["playlist"]
    assert signed_out["followerCount"] == 2 and signed_out["viewerFollows"] is False
    gone = (await api.gql(UNFOLLOW, {"p": playlist}, token=theo))["unfollowPlaylist"]
    assert gone == {"id": playlist, "followerCount": 1, "viewerFollows": False}
    assert await api.error_codes(FOLLOW, {"p": playlist}, token=maya) == ["BAD_USER_INPUT"]


async def test_playlist_errors(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    post = await api.post(maya, "hello")
    playlist = await _playlist(api, maya)
    item = (await _add(api, maya, playlist, post))["id"]
    missing = str(uuid.uuid4())
    # not the owner
    assert await api.error_codes(ADD, {"p": playlist, "post": post}, token=theo) == ["FORBIDDEN"]
    assert await api.error_codes(MOVE, {"i": item}, token=theo) == ["FORBIDDEN"]
    assert await api.error_codes(REMOVE, {"i": item}, token=theo) == ["FORBIDDEN"]
    # malformed IDs and inputs
    assert await api.error_codes(ADD, {"p": "nope", "post": post}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(MOVE, {"i": "x" * 100}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(ITEMS, {"p": "1"}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(CREATE, {"n": "  "}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(ITEMS, {"p": playlist, "first": 0}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(ITEMS, {"p": playlist, "first": 101}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(ITEMS, {"p": playlist, "after": "garbage"}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(MOVE, {"i": item, "a": item}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(ADD, {"p": playlist, "post": post, "a": missing}, token=maya) == ["BAD_USER_INPUT"]
    second = (await _add(api, maya, playlist, post))["id"]
    third = (await _add(api, maya, playlist, post))["id"]
    # anchors in the wrong order
    assert await api.error_codes(ADD, {"p": playlist, "post": post, "a": second, "b": item}, token=maya) == [
        "BAD_USER_INPUT"
    ]
    assert await api.error_codes(MOVE, {"i": second, "a": third, "b": item}, token=maya) == ["BAD_USER_INPUT"]
    # anchors no longer adjacent (someone inserted between): placed right after the first, still between
    placed = await _add(api, maya, playlist, post, item, third)
    assert [i["id"] for i in await _items(api, maya, playlist)] == [item, placed["id"], second, third]
    # missing things
    assert await api.error_codes(ADD, {"p": missing, "post": post}, token=maya) == ["NOT_FOUND"]
    assert await api.error_codes(ADD, {"p": playlist, "post": missing}, token=maya) == ["NOT_FOUND"]
    assert await api.error_codes(MOVE, {"i": missing}, token=maya) == ["NOT_FOUND"]
    assert await api.error_codes(REMOVE, {"i": missing}, token=maya) == ["NOT_FOUND"]
    assert await api.error_codes(FOLLOW, {"p": missing}, token=theo) == ["NOT_FOUND"]
    assert (await api.gql(ITEMS, {"p": missing}, token=maya))["playlist"] is None
    # signed out
    assert await api.error_codes(CREATE, {"n": "x"}) == ["UNAUTHENTICATED"]
    with pytest.raises(GraphQLErrors):
        await api.gql(REMOVE, {"i": item}, token=theo)


async def test_items_hide_posts_the_viewer_may_not_see(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    keep = await api.post(theo, "keep")
    gone = await api.post(theo, "gone")
    playlist = await _playlist(api, maya)
    await _add(api, maya, playlist, keep)
    await _add(api, maya, playlist, gone)
    await api.gql("mutation($id: ID!) { deletePost(id: $id) }", {"id": gone}, token=theo)
    assert [i["post"]["id"] for i in await _items(api, maya, playlist, page=1)] == [keep]


async def test_a_followed_tag_brings_a_stranger_post_into_the_postgres_home_feed_once(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.gql('mutation { followTag(tag: "#Running") }', token=maya)
    tagged = await api.post(theo, "long run today #running")
    await api.post(theo, "untagged, not for maya")
    data = await api.gql(HOME, {"first": 20}, token=maya)
    assert [e["node"]["id"] for e in data["homeFeed"]["edges"]] == [tagged]
    # following the author too still shows the tagged post exactly once
    await api.follow(maya, "theo")
    ids = [e["node"]["id"] for e in (await api.gql(HOME, {"first": 20}, token=maya))["homeFeed"]["edges"]]
    assert ids.count(tagged) == 1 and len(ids) == 2


PLAYLIST_PAGE = """query($p: ID!, $first: Int) { playlist(id: $p) {
  name kind followerCount viewerFollows owner { username likedPlaylist { id followerCount } }
  items(first: $first) { edges { cursor node { id rank addedAt post {
    id content likeCount viewerHasLiked author { username followerCount likedPlaylist { id kind } }
  } } } }
} }"""


async def test_a_page_of_items_costs_the_same_statements_whatever_its_size(api: Api, database_url: str) -> None:
    from feedfabric.app import schema
    from feedfabric.db.pool import create_pool
    from feedfabric.feeds.viewer import resolve_viewer
    from feedfabric.resolvers.context import build_context
    from feedfabric.resources import Resources

    count = 0

    def tick(record: object) -> None:
        nonlocal count
        count += 1

    async def attach(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(tick)

    maya = await api.member("maya")
    authors = [await api.member(f"author{i}") for i in range(4)]
    playlist = await _playlist(api, maya)
    for i in range(30):
        await _add(api, maya, playlist, await api.post(authors[i % 4], f"post {i}"))
    # One connection: a second one opened mid-run (the machine busy) would add its type introspection.
    pool = await create_pool(database_url, min_size=1, max_size=1, on_connect=attach)
    try:

        async def statements(first: int) -> int:
            ctx = build_context(
                Resources(settings=api.settings, pool=pool),
                await resolve_viewer(pool, api.settings, TokenCache(), f"Bearer {maya}"),
            )
            before = count
            result = await schema.execute(
                PLAYLIST_PAGE, variable_values={"p": playlist, "first": first}, context_value=ctx
            )
            assert result.errors is None, result.errors
            assert result.data is not None and len(result.data["playlist"]["items"]["edges"]) == first
            return count - before

        await statements(3), await statements(30)  # warm: new connections introspect their types once
        assert await statements(3) == await statements(30)
    finally:
        await pool.close()


async def _suspended_owner_with_playlists(api: Api) -> tuple[str, str, str, str]:
    """shady owns a playlist holding theo's post, likes that post, and is then suspended; returns
    (shady's playlist, shady's Liked playlist, the item in the playlist, a viewer's token)."""
    shady = await api.member("shady")
    theo = await api.member("theo")
    post = await api.post(theo, "a post shady liked")
    playlist = await _playlist(api, shady)
    item = (await _add(api, shady, playlist, post))["id"]
    await api.gql(LIKE, {"p": post}, token=shady)
    liked = (await api.gql(LIKED, {"u": "shady"}, token=theo))["member"]["likedPlaylist"]["id"]
    await api.gql(
        'mutation { suspendMember(externalUserId: "shady") { id } }', token=await api.member("mod", admin=True)
    )
    return playlist, liked, item, theo


async def test_a_suspended_members_playlists_are_not_found_by_id(api: Api) -> None:
    playlist, liked, _, viewer = await _suspended_owner_with_playlists(api)
    for token in (viewer, None):
        for pid in (playlist, liked, str(uuid.uuid4())):
            assert (await api.gql(ITEMS, {"p": pid}, token=token))["playlist"] is None


async def test_a_suspended_members_playlists_cannot_be_followed_or_unfollowed(api: Api, pool: asyncpg.Pool) -> None:
    playlist, liked, _, viewer = await _suspended_owner_with_playlists(api)
    for pid in (playlist, liked):
        assert await api.error_codes(FOLLOW, {"p": pid}, token=viewer) == ["NOT_FOUND"]
        assert await api.error_codes(UNFOLLOW, {"p": pid}, token=viewer) == ["NOT_FOUND"]
    assert await pool.fetchval("SELECT count(*) FROM follows WHERE target_type = 'playlist'") == 0


async def test_writes_to_a_suspended_members_playlist_are_not_found_rather_than_forbidden(api: Api) -> None:
    playlist, _, item, viewer = await _suspended_owner_with_playlists(api)
    post = await api.post(viewer, "mine")
    assert await api.error_codes(ADD, {"p": playlist, "post": post}, token=viewer) == ["NOT_FOUND"]
    assert await api.error_codes(MOVE, {"i": item}, token=viewer) == ["NOT_FOUND"]
    assert await api.error_codes(REMOVE, {"i": item}, token=viewer) == ["NOT_FOUND"]


async def test_a_suspended_members_liked_playlist_shows_no_items_through_their_profile(api: Api) -> None:
    *_, viewer = await _suspended_owner_with_playlists(api)
    liked = (await api.gql(LIKED, {"u": "shady"}, token=viewer))["member"]["likedPlaylist"]
    assert liked["items"]["edges"] == []
