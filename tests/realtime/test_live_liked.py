"""A live selection whose only per-viewer field is the item's `viewerHasLiked` renders once per value of it
(feedfabric.adapter.execution.live.LikedRenderer), and every subscriber still gets exactly what an execution
of the same selection for them alone answers.

The differential test draws selections (shared fields, `viewerHasLiked` under aliases and fragments, and
fields that keep a selection per viewer), has random subscribers like the post and a repost of it, then
hands the items to the real delivery (db.realtime.likers, the listeners, the sockets) and compares each
frame's post, byte for byte in JSON, with `post(id:)` executed for that subscriber with fresh loaders.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from feedfabric.core.events import Event
from feedfabric.core.settings import Settings
from feedfabric.realtime.delivery import deliver
from feedfabric.realtime.item import TimelineItem
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.pipeline_support import relay, running
from tests.realtime_support import TRANSPORT_WS, Server, WsClient, serve, wait_subscribed, ws_client

VIEWERS = ("ann", "bob", "cat", "dan")
SHARED = (
    "id",
    "content",
    "status",
    "createdAt",
    "updatedAt",
    "tags",
    "likeCount",
    "commentCount",
    "__typename",
    "author { username displayName }",
    "media { id url }",
    "mentions { username }",
)
LIKED = ("viewerHasLiked", "liked: viewerHasLiked", "... on Post { viewerHasLiked }", "...Liked")
PER_VIEWER = ("repostOf { id viewerHasLiked }", "author { viewerFollows }", "author { viewerBlocks }")
FRAGMENT = " fragment Liked on Post { viewerHasLiked }"
LIKE = "mutation($p: ID!) { likePost(postId: $p) { id } }"
REPOST = "mutation($p: ID!) { repost(postId: $p) { id } }"


def documents(fields: list[str]) -> tuple[str, str]:
    """The live selection and its reference, `post(id:)` with the same post selection."""
    selection = " ".join(fields)
    fragment = FRAGMENT if "...Liked" in fields else ""
    return (
        f"subscription {{ homeTimeline {{ cursor post {{ {selection} }} }} }}{fragment}",
        f"query($id: ID!) {{ post(id: $id) {{ {selection} }} }}{fragment}",
    )


def kind(fields: list[str]) -> str:
    if any(f in PER_VIEWER for f in fields):
        return "per viewer"
    return "by like" if any(f in LIKED for f in fields) else "shared"


Example = tuple[list[str], list[str], list[str]]


def examples(count: int) -> list[Example]:
    """Hypothesis draws the examples (a selection, who likes the post, who likes its repost); the app's
    event loop then runs them."""
    drawn: list[Example] = []
    subsets = st.lists(st.sampled_from(VIEWERS), unique=True)

    @given(
        shared=st.lists(st.sampled_from(SHARED), min_size=1, max_size=5, unique=True),
        liked=st.lists(st.sampled_from(LIKED), max_size=2, unique=True),
        per_viewer=st.lists(st.sampled_from(PER_VIEWER), max_size=1),
        order=st.randoms(use_true_random=False),
        post_likers=subsets,
        repost_likers=subsets,
    )
    @hypothesis_settings(max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def draw(
        shared: list[str],
        liked: list[str],
        per_viewer: list[str],
        order: Any,
        post_likers: list[str],
        repost_likers: list[str],
    ) -> None:
        fields = shared + liked + per_viewer
        order.shuffle(fields)
        drawn.append((fields, post_likers, repost_likers))

    draw()
    # The three kinds of selection, whatever hypothesis drew.
    drawn += [
        (["id", "viewerHasLiked", "author { username }"], ["ann", "bob"], ["cat"]),
        (["id", "content"], ["ann"], []),
        (["id", "viewerHasLiked", "author { viewerFollows }"], ["dan"], ["ann", "dan"]),
    ]
    return drawn


@pytest.fixture
def executions(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Executions of each item (its loaders made and primed), by post ID."""
    seen: Counter[str] = Counter()
    prime = TimelineItem.prime

    def counting(self: TimelineItem, loaders: Any) -> None:
        seen[str(self.post.id)] += 1
        prime(self, loaders)

    monkeypatch.setattr(TimelineItem, "prime", counting)
    return seen


@pytest.fixture
async def server(settings: Settings) -> AsyncIterator[Server]:
    async with serve(settings.model_copy(update={"rate_limit_operations": 10**6, "rate_limit_cost": 10**12})) as s:
        yield s


async def deliver_by_hand(server: Server, post_ids: list[str]) -> None:
    """The realtime consumer's delivery of these PostCreated events (no relay runs: nothing else arrives)."""
    resources = server.app.state.resources
    events = [Event(0, "PostCreated", p, 1, {"postId": p}) for p in post_ids]
    assert await deliver(resources.pool, server.hub, events, resources.relations) > 0


async def test_a_selection_by_like_equals_each_viewers_own_execution(server: Server, executions: Counter[str]) -> None:
    api = server.api
    author, echo = await api.member("author"), await api.member("echo")
    tokens = {name: await api.member(name) for name in VIEWERS}
    for token in tokens.values():
        await api.follow(token, "author")
        await api.follow(token, "echo")
    kinds: Counter[str] = Counter()
    for fields, post_likers, repost_likers in examples(12):
        live, reference = documents(fields)
        post = await api.post(author, f"liked by {' '.join(post_likers) or 'nobody'} @ann #t{len(fields)}")
        repost = (await api.gql(REPOST, {"p": post}, token=echo))["repost"]["id"]
        fresh = await api.post(author, "nobody likes this yet")
        for name in post_likers:
            await api.gql(LIKE, {"p": post}, token=tokens[name])
        for name in repost_likers:
            await api.gql(LIKE, {"p": repost}, token=tokens[name])
        executions.clear()
        async with AsyncExitStack() as sockets:
            clients: dict[str, WsClient] = {}
            for name, token in tokens.items():
                clients[name] = await sockets.enter_async_context(ws_client(server, TRANSPORT_WS, token))
                await clients[name].subscribe(live)
            await wait_subscribed(server, len(VIEWERS))
            await deliver_by_hand(server, [post, repost, fresh])
            for name, client in clients.items():
                for item in (post, repost, fresh):
                    got = (await client.next_data())["homeTimeline"]
                    assert got["cursor"] == item
                    expected = (await api.gql(reference, {"id": item}, token=tokens[name]))["post"]
                    assert json.dumps(got["post"]) == json.dumps(expected), (fields, name, item)
        kinds[kind(fields)] += 1
        values = {post: {n in post_likers for n in VIEWERS}, repost: {n in repost_likers for n in VIEWERS}}
        values[fresh] = {False}
        for item, seen in values.items():
            rendered = executions[item]
            if kind(fields) == "per viewer":
                assert rendered == len(VIEWERS)
            elif kind(fields) == "by like":
                assert rendered == len(seen), (fields, item)  # one rendering per value of viewerHasLiked
            else:
                assert rendered == 1
    assert all(kinds[k] for k in ("per viewer", "by like", "shared")), kinds


async def test_a_new_post_with_viewer_has_liked_renders_once_through_the_pipeline(
    settings: Settings, executions: Counter[str]
) -> None:
    """Through the relay and the realtime consumer: a post nobody liked yet is rendered once for all."""
    async with serve(settings) as server, running(relay(settings).run):
        api = server.api
        author = await api.member("author")
        readers = [await api.member(name) for name in VIEWERS]
        for token in readers:
            await api.follow(token, "author")
        async with AsyncExitStack() as sockets:
            clients = [await sockets.enter_async_context(ws_client(server, TRANSPORT_WS, t)) for t in readers]
            for client in clients:
                await client.subscribe("subscription { homeTimeline { post { id viewerHasLiked } } }")
            await wait_subscribed(server, len(readers))
            post = await api.post(author, "fresh")
            got = [(await c.next_data())["homeTimeline"]["post"] for c in clients]
    assert got == [{"id": post, "viewerHasLiked": False}] * len(readers)
    assert executions[post] == 1
