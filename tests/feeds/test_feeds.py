"""The newest-first lists over Postgres, and the visibility rule every one of them keeps."""

from tests.support import HOME, Api


async def home_ids(api: Api, token: str, first: int = 50, after: str | None = None) -> list[str]:
    data = await api.gql(HOME, {"first": first, "after": after}, token=token)
    return [e["node"]["id"] for e in data["homeFeed"]["edges"]]


async def test_home_pages_never_repeat_or_skip_an_item(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.follow(maya, "theo")
    posted = [await api.post(theo if i % 2 else maya, f"post {i}") for i in range(11)]
    seen: list[str] = []
    after = None
    while True:
        data = (await api.gql(HOME, {"first": 3, "after": after}, token=maya))["homeFeed"]
        seen += [e["node"]["id"] for e in data["edges"]]
        # Relay: endCursor is the last edge's cursor, on the last page too.
        assert data["pageInfo"]["endCursor"] == (data["edges"][-1]["cursor"] if data["edges"] else None)
        if not data["pageInfo"]["hasNextPage"]:
            break
        after = data["pageInfo"]["endCursor"]
    assert seen == list(reversed(posted))


async def test_home_leaves_out_people_not_followed(api: Api) -> None:
    maya = await api.member("maya")
    stranger = await api.member("stranger")
    await api.post(stranger, "you can't see me")
    assert await home_ids(api, maya) == []


async def test_visibility_deleted_held_suspended_and_their_reposts(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    ava = await api.member("ava")
    admin = await api.member("admin", admin=True)
    await api.follow(maya, "theo")
    await api.follow(maya, "ava")
    deleted = await api.post(theo, "deleted")
    held = await api.post(theo, "held")
    by_ava = await api.post(ava, "ava will be suspended")
    kept = await api.post(theo, "kept")
    repost = "mutation($id: ID!) { repost(postId: $id) { id } }"
    reposts = [(await api.gql(repost, {"id": p}, token=theo))["repost"]["id"] for p in (held, by_ava)]
    await api.gql("mutation($id: ID!) { deletePost(id: $id) }", {"id": deleted}, token=theo)
    await api.gql("mutation($id: ID!) { holdPost(id: $id) { status } }", {"id": held}, token=admin)
    await api.gql('mutation { suspendMember(externalUserId: "ava") { status } }', token=admin)
    assert await home_ids(api, maya) == [kept]
    # The author still sees their own held post, and their repost of it.
    theo_sees = await home_ids(api, theo)
    assert held in theo_sees and reposts[0] in theo_sees and deleted not in theo_sees
    assert by_ava not in theo_sees and reposts[1] not in theo_sees


async def test_a_released_post_comes_back(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    admin = await api.member("admin", admin=True)
    await api.follow(maya, "theo")
    post = await api.post(theo, "held then released")
    await api.gql("mutation($id: ID!) { holdPost(id: $id) { id } }", {"id": post}, token=admin)
    assert await home_ids(api, maya) == []
    await api.gql("mutation($id: ID!) { releasePost(id: $id) { status } }", {"id": post}, token=admin)
    assert await home_ids(api, maya) == [post]


async def test_moderation_needs_an_admin_token(api: Api) -> None:
    maya = await api.member("maya")
    post = await api.post(maya, "mine")
    assert await api.error_codes("mutation($id: ID!) { holdPost(id: $id) { id } }", {"id": post}, token=maya) == [
        "FORBIDDEN"
    ]
    assert await api.error_codes('mutation { suspendMember(externalUserId: "maya") { id } }', token=maya) == [
        "FORBIDDEN"
    ]


async def test_favourites_feed_holds_only_favourites_posts(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    ava = await api.member("ava")
    await api.gql('mutation { addFavourite(externalUserId: "theo") { id } }', token=maya)
    fav_post = await api.post(theo, "from a favourite")
    await api.post(ava, "not a favourite")
    data = await api.gql("{ favouritesFeed { edges { node { id } } source } }", token=maya)
    assert [e["node"]["id"] for e in data["favouritesFeed"]["edges"]] == [fav_post]
    assert data["favouritesFeed"]["source"] == "POSTGRES"


async def test_tag_feed_lists_posts_with_the_hashtag(api: Api) -> None:
    maya = await api.member("maya")
    tagged = await api.post(maya, "morning #Running")
    await api.post(maya, "no tag")
    for tag in ("running", "#RUNNING"):
        data = await api.gql("query($t: String!) { tagFeed(tag: $t) { edges { node { id } } } }", {"t": tag})
        assert [e["node"]["id"] for e in data["tagFeed"]["edges"]] == [tagged]
    assert await api.error_codes('{ tagFeed(tag: "bad tag!") { source } }') == ["BAD_USER_INPUT"]


async def test_mentions_feed_lists_posts_and_comments(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    post = await api.post(theo, "hey @maya")
    other = await api.post(theo, "no mention")
    comment = (
        await api.gql(
            'mutation($id: ID!) { addComment(postId: $id, content: "@maya look") { id } }', {"id": other}, token=theo
        )
    )["addComment"]["id"]
    data = await api.gql(
        "{ mentionsFeed { edges { cursor node { __typename ... on Post { id } ... on Comment { id } } } } }", token=maya
    )
    nodes = [(e["node"]["__typename"], e["node"]["id"]) for e in data["mentionsFeed"]["edges"]]
    assert nodes == [("Comment", comment), ("Post", post)]


async def test_member_posts_honour_order_and_bounds(api: Api) -> None:
    maya = await api.member("maya")
    ids = [await api.post(maya, f"p{i}") for i in range(5)]
    query = """query($o: PostOrder, $gt: ID, $lte: ID, $first: Int, $after: String) {
      member(username: "maya") { posts(order: $o, gt: $gt, lte: $lte, first: $first, after: $after) {
        edges { node { id } } pageInfo { endCursor } } } }"""

    async def run(**v: object) -> list[str]:
        data = await api.gql(query, v)
        return [e["node"]["id"] for e in data["member"]["posts"]["edges"]]

    assert await run() == list(reversed(ids))
    assert await run(o="OLDEST") == ids
    assert await run(o="OLDEST", gt=ids[0], lte=ids[3]) == ids[1:4]
    assert await run(o="OLDEST", first=2, after=ids[1]) == ids[2:4]
    assert await run(first=2, after=ids[3]) == [ids[2], ids[1]]


async def test_page_size_must_be_between_1_and_100(api: Api) -> None:
    maya = await api.member("maya")
    for first in (0, -1, 101):
        assert await api.error_codes(HOME, {"first": first}, token=maya) == ["BAD_USER_INPUT"]
    for first in (1, 100):
        assert await api.error_codes(HOME, {"first": first}, token=maya) == []


async def test_a_malformed_cursor_is_bad_input(api: Api) -> None:
    maya = await api.member("maya")
    assert await api.error_codes(HOME, {"after": "'; DROP TABLE posts; --"}, token=maya) == ["BAD_USER_INPUT"]


async def test_a_cursor_of_non_ascii_digits_is_bad_input(api: Api) -> None:
    maya = await api.member("maya")
    for after in ("\u0661" * 32, "\uff10" * 32, "{" + "\u0661" * 32 + "}"):
        assert await api.error_codes(HOME, {"after": after}, token=maya) == ["BAD_USER_INPUT"], after
