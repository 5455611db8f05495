from tests.support import HOME, Api


async def test_a_member_sees_own_and_followed_posts_newest_first(api: Api) -> None:
    maya = await api.member("maya")
    await api.member("theo")
    theo = api.token("theo")
    await api.follow(maya, "theo")
    first = await api.post(theo, "hello #Running")
    second = await api.post(maya, "hi @theo")
    data = await api.gql(HOME, {"first": 10}, token=maya)
    ids = [e["node"]["id"] for e in data["homeFeed"]["edges"]]
    assert ids == [second, first]
    assert data["homeFeed"]["source"] == "POSTGRES"
