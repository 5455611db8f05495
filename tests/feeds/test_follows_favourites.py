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
    # The unfollow is an event (worker-events takes the tag's posts out of the timeline); a second is not.
    await api.gql('mutation { unfollowTag(tag: "RUNNING") }', token=maya)
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE event_type = 'TagUnfollowed'") == 1


SUSPEND = "mutation($e: String!) { suspendMember(externalUserId: $e) { id } }"
UNSUSPEND = "mutation($e: String!) { unsuspendMember(externalUserId: $e) { id } }"


async def test_a_suspended_member_cannot_be_made_a_favourite_as_they_cannot_be_followed(
    api: Api, pool: asyncpg.Pool
) -> None:
    maya = await api.member("maya")
    await api.member("gone")
    await api.gql(SUSPEND, {"e": "gone"}, token=await api.member("mod", admin=True))
    assert await api.error_codes(ADD_FAV, {"e": "gone"}, token=maya) == ["NOT_FOUND"]
    for path in ("/favourites/gone", "/follows/gone"):
        response = await api.rest("PUT", path, token=maya)
        assert (response.status_code, response.json()["error"]["code"]) == (404, "resource.not_found"), path
    assert await pool.fetchval("SELECT count(*) FROM favourites") == 0


async def test_a_favourite_suspended_later_is_left_out_of_the_lists_until_unsuspended(api: Api) -> None:
    maya = await api.member("maya")
    admin = await api.member("mod", admin=True)
    for name in ("kept", "gone"):
        await api.member(name)
        await api.gql(ADD_FAV, {"e": name}, token=maya)
    await api.gql(SUSPEND, {"e": "gone"}, token=admin)
    assert (await api.gql("{ favourites { username } }", token=maya))["favourites"] == [{"username": "kept"}]
    listed = (await api.rest("GET", "/favourites", token=maya)).json()["favourites"]
    assert [m["username"] for m in listed] == ["kept"]
    await api.gql(UNSUSPEND, {"e": "gone"}, token=admin)
    assert [m["username"] for m in (await api.gql("{ favourites { username } }", token=maya))["favourites"]] == [
        "gone",
        "kept",
    ]


async def test_a_favourite_suspended_later_frees_the_slot_it_held(api: Api) -> None:
    maya = await api.member("maya")
    for i in range(31):
        await api.member(f"m{i}")
    for i in range(30):
        await api.gql(ADD_FAV, {"e": f"m{i}"}, token=maya)
    await api.gql(SUSPEND, {"e": "m0"}, token=await api.member("mod", admin=True))
    assert (await api.gql(ADD_FAV, {"e": "m30"}, token=maya))["addFavourite"]["isFavourite"] is True
    assert len((await api.gql("{ favourites { username } }", token=maya))["favourites"]) == 30
    assert await api.error_codes(ADD_FAV, {"e": "m0"}, token=maya) == ["NOT_FOUND"]
