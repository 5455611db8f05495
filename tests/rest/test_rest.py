"""The REST routes: same services, same semantics, the seed's JSON shapes and error form."""

import json

from tests.support import Api


async def test_home_route_pages_with_next_cursor(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    assert (await api.rest("PUT", "/follows/theo", token=maya)).status_code == 200
    ids = [await api.post(theo, f"#run {i}") for i in range(3)]
    first = (await api.rest("GET", "/userfeed/home?limit=2", token=maya)).json()
    assert [p["id"] for p in first["posts"]] == [ids[2], ids[1]]
    assert first["source"] == "postgres"
    assert first["posts"][0]["authorUsername"] == "theo" and first["posts"][0]["tags"] == ["run"]
    second = (await api.rest("GET", f"/userfeed/home?limit=2&cursor={first['nextCursor']}", token=maya)).json()
    assert [p["id"] for p in second["posts"]] == [ids[0]]
    assert second["nextCursor"] is None


async def test_the_31st_favourite_is_a_409(api: Api) -> None:
    maya = await api.member("maya")
    for i in range(31):
        await api.member(f"m{i}")
    for i in range(30):
        assert (await api.rest("PUT", f"/favourites/m{i}", token=maya)).status_code == 200
    response = await api.rest("PUT", "/favourites/m30", token=maya)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "favourite.limit_reached"
    listed = (await api.rest("GET", "/favourites", token=maya)).json()["favourites"]
    assert [m["username"] for m in listed][:2] == ["m29", "m28"]
    assert set(listed[0]) >= {"username", "displayName", "avatarUrl"}


async def test_own_posts_are_bare_and_ordered(api: Api) -> None:
    maya = await api.member("maya")
    ids = [await api.post(maya, f"p{i}") for i in range(4)]
    body = (await api.rest("GET", f"/userfeed?order=oldest&gt={ids[0]}", token=maya)).json()
    assert [p["id"] for p in body["posts"]] == ids[1:]
    assert "authorUsername" not in body["posts"][0] and "tags" not in body["posts"][0]


async def test_rest_errors_have_codes_and_statuses(api: Api) -> None:
    maya = await api.member("maya")
    assert (await api.rest("GET", "/userfeed/home")).status_code == 401
    bad_limit = await api.rest("GET", "/userfeed/home?limit=500", token=maya)
    assert bad_limit.status_code == 400 and bad_limit.json()["error"]["code"] == "request.invalid"
    assert (await api.rest("GET", "/userfeed/home?cursor=zzz", token=maya)).status_code == 400
    assert (await api.rest("PUT", "/follows/nobody", token=maya)).status_code == 404
    assert (await api.rest("PUT", "/follows/maya", token=maya)).status_code == 400


async def test_tag_and_mentions_routes(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    post = await api.post(theo, "#Trail with @maya")
    tagged = (await api.rest("GET", "/userfeed/tags/trail/posts")).json()
    assert [p["id"] for p in tagged["posts"]] == [post]
    mentions = (await api.rest("GET", "/userfeed/mentions", token=maya)).json()
    assert [(p["type"], p["id"]) for p in mentions["posts"]] == [("post", post)]


async def test_a_refused_body_spends_the_cost_budget_by_its_bytes_as_graphql_does(api: Api) -> None:
    """REST and GraphQL agree: `PUT /feed-profile` with 20,000 sources is refused as its GraphQL twin is,
    and spends a unit of the cost budget per 10 bytes read, not one operation."""
    maya = await api.member("maya")
    budget = "{ __typename }"
    before = (await api.raw(budget, token=maya))["extensions"]["rateLimit"]["costRemaining"]
    body = {"sources": ["TAGS"] * 20_000}
    sent = len(json.dumps(body, separators=(",", ":")))  # as the client sends it
    refused = await api.rest("PUT", "/feed-profile", token=maya, json=body)
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "request.invalid")
    after = (await api.raw(budget, token=maya))["extensions"]["rateLimit"]["costRemaining"]
    assert before - after >= sent // 10 - 10, (before, after, sent)
    twin = await api.raw(
        "mutation($i: FeedProfileInput!){ updateFeedProfile(input: $i){ preset } }", {"i": body}, token=maya
    )
    assert [e["extensions"]["code"] for e in twin["errors"]] == ["BAD_USER_INPUT"]
