"""Feed pages come finished from the resolvers (resolvers.pages), their posts' fields loaded up front; the answers must equal the per-post path."""

from typing import Any

from tests.support import Api, feed_world

FIELDS = """id content status tags likeCount commentCount viewerHasLiked
  author { username displayName } media { id }
  repostOf { id content tags likeCount author { username } }"""

PLAIN = "{ homeFeed(first: 10) { edges { node { %s } } } }" % FIELDS
FRAGMENTS = (
    """query { homeFeed(first: 10) { edges { ... on FeedEdge { node { ...Head ... on Post { %s } } } } } }
fragment Head on Post { id author { username } }"""
    % FIELDS
)
SINGLE = "query($id: ID!) { post(id: $id) { %s } }" % FIELDS


async def test_a_feed_page_answers_as_each_post_would_alone(api: Api) -> None:
    reader = await feed_world(api)
    page = [e["node"] for e in (await api.gql(PLAIN, token=reader))["homeFeed"]["edges"]]
    assert len(page) == 3
    alone = [(await api.gql(SINGLE, {"id": p["id"]}, token=reader))["post"] for p in page]
    assert page == alone
    liked = next(p for p in page if p["content"] == "hello #news")
    assert (liked["likeCount"], liked["commentCount"], liked["viewerHasLiked"], liked["tags"]) == (1, 1, True, ["news"])
    repost = next(p for p in page if p["repostOf"] is not None)
    assert repost["repostOf"]["id"] == liked["id"] and repost["author"]["username"] == "other"


async def test_fields_selected_through_fragments_answer_as_plain_ones(api: Api) -> None:
    reader = await feed_world(api)
    plain: list[Any] = [e["node"] for e in (await api.gql(PLAIN, token=reader))["homeFeed"]["edges"]]
    through: list[Any] = [e["node"] for e in (await api.gql(FRAGMENTS, token=reader))["homeFeed"]["edges"]]
    assert through == plain
