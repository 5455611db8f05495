"""Member.followers, Member.following, Member.playlists and Query.followedTags: keyset pages, Relay
PageInfo, suspended members hidden, a fixed number of statements per page."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.support import Api, GraphQLErrors

FOLLOWERS = """query($u: String!, $first: Int, $after: String) { member(username: $u) {
  followers(first: $first, after: $after) {
    edges { cursor node { username followerCount viewerFollows } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } }"""
FOLLOWING = FOLLOWERS.replace("followers(", "following(")
PLAYLISTS = """query($u: String!, $first: Int, $after: String) { member(username: $u) {
  playlists(first: $first, after: $after) {
    edges { cursor node { name owner { username } followerCount } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } }"""


async def all_pages(api: Api, query: str, field: str, username: str, token: str, first: int) -> list[dict[str, Any]]:
    """Every page of the list, checking Relay's PageInfo on each."""
    pages: list[dict[str, Any]] = []
    after = None
    while True:
        data = await api.gql(query, {"u": username, "first": first, "after": after}, token=token)
        page = data["member"][field]
        info, edges = page["pageInfo"], page["edges"]
        assert info["hasPreviousPage"] is (after is not None)
        assert info["startCursor"] == (edges[0]["cursor"] if edges else None)
        assert info["endCursor"] == (edges[-1]["cursor"] if edges else None)  # the last page's too
        pages.append(page)
        if not info["hasNextPage"]:
            return pages
        after = info["endCursor"]


def names(pages: list[dict[str, Any]], key: str = "username") -> list[str]:
    return [edge["node"][key] for page in pages for edge in page["edges"]]


async def test_followers_and_following_most_recent_first_in_keyset_pages(api: Api) -> None:
    star = await api.member("star")
    fans = [await api.member(f"fan{i}") for i in range(5)]
    for fan in fans:
        await api.follow(fan, "star")
        await api.follow(star, f"fan{fans.index(fan)}")
    pages = await all_pages(api, FOLLOWERS, "followers", "star", fans[0], first=2)
    assert [len(p["edges"]) for p in pages] == [2, 2, 1]
    assert names(pages) == ["fan4", "fan3", "fan2", "fan1", "fan0"]
    following = await all_pages(api, FOLLOWING, "following", "star", fans[0], first=3)
    assert names(following) == ["fan4", "fan3", "fan2", "fan1", "fan0"]
    # The cursor is a position, not a row: it stays valid when the follow it names is gone.
    await api.gql('mutation { unfollow(externalUserId: "star") { id } }', token=fans[3])
    rest = await api.gql(FOLLOWERS, {"u": "star", "first": 5, "after": pages[0]["pageInfo"]["endCursor"]}, token=star)
    assert [e["node"]["username"] for e in rest["member"]["followers"]["edges"]] == ["fan2", "fan1", "fan0"]


async def test_suspended_members_are_left_out_and_their_lists_hidden(api: Api) -> None:
    admin = await api.member("boss", admin=True)
    host = await api.member("host")
    for name in ("good", "gone"):
        token = await api.member(name)
        await api.follow(token, "host")
        await api.follow(host, name)
    gone = api.token("gone")
    await api.gql('mutation { createPlaylist(name: "mine") { id } }', token=gone)
    await api.gql('mutation { suspendMember(externalUserId: "gone") { id } }', token=admin)
    viewer = await api.member("onlooker")
    followers = await all_pages(api, FOLLOWERS, "followers", "host", viewer, first=10)
    following = await all_pages(api, FOLLOWING, "following", "host", viewer, first=10)
    assert names(followers) == names(following) == ["good"]
    for query, field in ((FOLLOWERS, "followers"), (FOLLOWING, "following"), (PLAYLISTS, "playlists")):
        assert [page["edges"] for page in await all_pages(api, query, field, "gone", viewer, first=10)] == [[]]


async def test_playlists_newest_first(api: Api) -> None:
    owner = await api.member("curator")
    for i in range(3):
        await api.gql("mutation($n: String!) { createPlaylist(name: $n) { id } }", {"n": f"list{i}"}, token=owner)
    await api.gql("{ viewer { likedPlaylist { id } } }", token=owner)  # the LIKED kind is not listed
    pages = await all_pages(api, PLAYLISTS, "playlists", "curator", owner, first=2)
    assert names(pages, "name") == ["list2", "list1", "list0"]


async def test_followed_tags_alphabetical(api: Api) -> None:
    token = await api.member("tagger")
    for tag in ("zebra", "#Apple", "mango"):
        await api.gql("mutation($t: String!) { followTag(tag: $t) }", {"t": tag}, token=token)
    await api.gql('mutation { unfollowTag(tag: "mango") }', token=token)
    assert (await api.gql("{ followedTags }", token=token))["followedTags"] == ["apple", "zebra"]
    with pytest.raises(GraphQLErrors) as signed_out:
        await api.gql("{ followedTags }")
    assert signed_out.value.codes == ["UNAUTHENTICATED"]


async def test_a_bad_cursor_is_bad_input(api: Api) -> None:
    token = await api.member("prober")
    for cursor in ("nope", "12.not-a-uuid", "１２.x", "12." + "\u0661" * 32, "12.0\n"):
        codes = await api.error_codes(FOLLOWERS, {"u": "prober", "after": cursor}, token=token)
        assert codes == ["BAD_USER_INPUT"]


async def pages_of(api: Api, query: str, path: list[str], token: str, variables: dict[str, Any]) -> list[list[str]]:
    """Cursors of every page of a connection, each page's PageInfo checked against its edges."""
    pages: list[list[str]] = []
    after = None
    while True:
        connection = await api.gql(query, {**variables, "after": after}, token=token)
        for key in path:
            connection = connection[key]
        cursors = [edge["cursor"] for edge in connection["edges"]]
        info = connection["pageInfo"]
        assert info["hasPreviousPage"] is (after is not None)
        assert (info["startCursor"], info["endCursor"]) == ((cursors[0], cursors[-1]) if cursors else (None, None))
        pages.append(cursors)
        if not info["hasNextPage"]:
            return pages
        after = info["endCursor"]


PAGE_INFO = "pageInfo { hasNextPage hasPreviousPage startCursor endCursor }"


async def test_every_connection_gives_relay_page_info(api: Api) -> None:
    token = await api.member("relay")
    author = await api.member("penned")
    await api.follow(token, "penned")
    await api.gql('mutation { addFavourite(externalUserId: "penned") { id } }', token=token)
    playlist = (await api.gql('mutation { createPlaylist(name: "p") { id } }', token=token))["createPlaylist"]["id"]
    posts = [await api.post(author, f"post {i} #paged @relay") for i in range(3)]
    for post in posts:
        await api.gql(
            'mutation($id: ID!) { addComment(postId: $id, content: "c") { id } }', {"id": posts[0]}, token=token
        )
        await api.gql(
            "mutation($p: ID!, $i: ID!) { addToPlaylist(playlistId: $p, postId: $i) { id } }",
            {"p": playlist, "i": post},
            token=token,
        )
    edges = f"edges {{ cursor }} {PAGE_INFO}"
    connections = [
        (f"query($after: String) {{ homeFeed(first: 2, after: $after) {{ {edges} }} }}", ["homeFeed"], {}),
        (f"query($after: String) {{ favouritesFeed(first: 2, after: $after) {{ {edges} }} }}", ["favouritesFeed"], {}),
        (f'query($after: String) {{ tagFeed(tag: "paged", first: 2, after: $after) {{ {edges} }} }}', ["tagFeed"], {}),
        (f"query($after: String) {{ mentionsFeed(first: 2, after: $after) {{ {edges} }} }}", ["mentionsFeed"], {}),
        (
            f'query($after: String) {{ member(username: "penned") {{ posts(first: 2, after: $after) {{ {edges} }} }} }}',
            ["member", "posts"],
            {},
        ),
        (
            f"query($id: ID!, $after: String) {{ post(id: $id) {{ comments(first: 2, after: $after) {{ {edges} }} }} }}",
            ["post", "comments"],
            {"id": posts[0]},
        ),
        (
            f"query($id: ID!, $after: String) {{ playlist(id: $id) {{ items(first: 2, after: $after) {{ {edges} }} }} }}",
            ["playlist", "items"],
            {"id": playlist},
        ),
    ]
    for query, path, variables in connections:
        pages = await pages_of(api, query, path, token, variables)
        assert [len(page) for page in pages] == [2, 1], path
    empty = await pages_of(
        api,
        f"query($after: String) {{ notifications(first: 2, after: $after) {{ {edges} }} }}",
        ["notifications"],
        token,
        {},
    )
    assert empty == [[]]


async def test_follow_list_pages_are_index_range_scans_without_a_sort(api: Api, pool: asyncpg.Pool) -> None:
    """The keyset pages read the follow indexes in their order: no Sort node, whatever the list's length."""
    from datetime import UTC, datetime

    from feedfabric.core.ids import new_id
    from feedfabric.db import follows as follows_db
    from feedfabric.db import playlists as playlists_db

    member, position = new_id(), (datetime.now(UTC), str(new_id()))
    async with pool.acquire() as conn:
        captured: list[tuple[str, tuple[Any, ...]]] = []

        def capture(record: asyncpg.connection.LoggedQuery) -> None:
            captured.append((record.query, record.args))

        conn.add_query_logger(capture)
        await follows_db.followers_page(conn, member, position, 21)
        await follows_db.following_page(conn, member, position, 21)
        await playlists_db.owned_page(conn, member, new_id(), 21)
        await asyncio.sleep(0.01)  # asyncpg calls query loggers soon after, not during, the query
        conn.remove_query_logger(capture)
        assert len(captured) == 3
        async with conn.transaction():
            await conn.execute("SET LOCAL enable_seqscan = off")
            for query, args in captured:
                plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + query, *args))
                assert "Index" in plan and "Sort" not in plan, plan
