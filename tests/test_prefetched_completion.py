"""Feed-page posts completed from their prefetched values answer exactly as graphql-core's execution does."""

from typing import Any

import pytest
from feedfabric.schema import prefetched

from tests.support import Api, feed_world

BENCH = """query Home($first: Int) { homeFeed(first: $first) { source pageInfo { hasNextPage endCursor }
  edges { cursor node { id content status createdAt updatedAt tags likeCount commentCount viewerHasLiked
    author { id username displayName avatarUrl } media { id contentType width height url score status rejectReason }
    repostOf { id content author { username displayName avatarUrl } } } } } }"""
SHAPES = [
    BENCH,
    # aliases, __typename, @include/@skip, fragments on the node and inside it, a field selected twice
    """query($yes: Boolean!) { homeFeed(first: 10) { edges { node { __typename ...P
      a: id b: content @include(if: $yes) c: tags @skip(if: $yes) author { __typename u: username }
      author { displayName } ... on Post { likeCount repostOf { ...P author { id } } } } } } }
      fragment P on Post { id status viewerHasLiked }""",
    # fields the prefetch does not cover: those posts take the normal path
    """{ homeFeed(first: 10) { edges { node { id mentions { username } author { followerCount viewerFollows } } } } }""",
    """{ homeFeed(first: 10) { edges { node { id comments(first: 2) { edges { node { content } } } } } } }""",
    """{ homeFeed(first: 10) { edges { node { id repostOf { id repostOf { id } } } } } }""",
    """{ tagFeed(tag: "news", first: 10) { edges { node { id tags author { username } likeCount } } } }""",
]


@pytest.mark.parametrize("query", SHAPES)
async def test_direct_completion_answers_as_graphql_core(api: Api, monkeypatch: pytest.MonkeyPatch, query: str) -> None:
    reader = await feed_world(api, "hello #news @reader")
    direct: list[bool] = []
    render = prefetched.PrefetchedCompletion.render_prefetched

    def counted(self: Any, parent: Any, source: Any, grouped: Any) -> dict[str, Any]:
        out = render(self, parent, source, grouped)
        direct.append(True)
        return out

    monkeypatch.setattr(prefetched.PrefetchedCompletion, "render_prefetched", counted)
    variables = {"first": 10, "yes": True}
    fast = [await api.raw(query, {**variables, "yes": yes}, token=reader) for yes in (True, False)]

    def never(self: Any, parent: Any, source: Any, grouped: Any) -> dict[str, Any]:
        raise prefetched.Fallback

    monkeypatch.setattr(prefetched.PrefetchedCompletion, "render_prefetched", never)
    slow = [await api.raw(query, {**variables, "yes": yes}, token=reader) for yes in (True, False)]
    answers = [[{k: r.get(k) for k in ("data", "errors")} for r in rs] for rs in (fast, slow)]
    assert answers[0] == answers[1]
    assert fast[0]["data"] and not fast[0].get("errors")
    if query in (BENCH, SHAPES[1], SHAPES[5]):
        assert direct, "the prefetched posts should have been completed directly"
