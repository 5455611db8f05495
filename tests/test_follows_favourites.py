"""Follows and favourites: idempotence, counts, the favourite limit."""

import asyncpg

from tests.support import Api

FOLLOW = "mutation($e: String!) { follow(externalUserId: $e) { followerCount viewerFollows } }"
UNFOLLOW = "mutation($e: String!) { unfollow(externalUserId: $e) { followerCount viewerFollows } }"
ADD_FAV = "mutation($e: String!) { addFavourite(externalUserId: $e) { username isFavourite } }"


async def test_follow_is_idempotent_and_counted(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    await api.member("theo")
    assert (await api.gql(FOLLOW, {"e": "theo"}, token=maya))["follow"] == {"followerCount": 1, "viewerFollows": True}
    assert (await api.gql(FOLLOW, {"e": "theo"}, token=maya))["follow"]["followerCount"] == 1
    me = await api.gql("{ viewer { followingCount } }", token=maya)
    assert me["viewer"]["followingCount"] == 1
    assert (await api.gql(UNFOLLOW, {"e": "theo"}, token=maya))["unfollow"] == {
        "followerCount": 0,
        "viewerFollows": False,
    }
    assert (await api.gql(UNFOLLOW, {"e": "theo"}, token=maya))["unfollow"]["followerCount"] == 0
    events = [r["event_type"] for r in await pool.fetch("SELECT event_type FROM outbox ORDER BY id")]
    assert events == ["MemberFollowed", "MemberUnfollowed"]


async def test_following_yourself_is_bad_input(api: Api) -> None:
    maya = await api.member("maya")
    assert await api.error_codes(FOLLOW, {"e": "maya"}, token=maya) == ["BAD_USER_INPUT"]


async def test_following_a_stranger_that_does_not_exist_is_not_found(api: Api) -> None:
    maya = await api.member("maya")
    assert await api.error_codes(FOLLOW, {"e": "nobody"}, token=maya) == ["NOT_FOUND"]


async def test_the_31st_favourite_is_refused_and_changes_nothing(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    for i in range(31):
        await api.member(f"m{i}")
    for i in range(30):
        await api.gql(ADD_FAV, {"e": f"m{i}"}, token=maya)
    assert await api.error_codes(ADD_FAV, {"e": "m30"}, token=maya) == ["FAVOURITE_LIMIT_REACHED"]
    assert await pool.fetchval("SELECT count(*) FROM favourites") == 30
    # Re-adding an existing favourite at the limit is fine.
    assert (await api.gql(ADD_FAV, {"e": "m3"}, token=maya))["addFavourite"]["isFavourite"] is True


async def test_favourites_are_listed_most_recent_first(api: Api) -> None:
    maya = await api.member("maya")
    for name in ("a", "b", "c"):
        await api.member(name)
        await api.gql(ADD_FAV, {"e": name}, token=maya)
    await api.gql('mutation { removeFavourite(externalUserId: "b") { id } }', token=maya)
    data = await api.gql("{ favourites { username isFavourite } }", token=maya)
    assert data["favourites"] == [{"username": "c", "isFavourite": True}, {"username": "a", "isFavourite": True}]


async def test_follow_tag_normalises_and_is_idempotent(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    for tag in ("#Running", "running"):
        assert (await api.gql("mutation($t: String!) { followTag(tag: $t) }", {"t": tag}, token=maya))["followTag"]
    assert await pool.fetchval("SELECT count(*) FROM follows WHERE target_type = 'tag'") == 1
    await api.gql('mutation { unfollowTag(tag: "RUNNING") }', token=maya)
    assert await pool.fetchval("SELECT count(*) FROM follows WHERE target_type = 'tag'") == 0
