"""Every example operation in graphql-playground/operations/ runs against the API without errors.

The files are what developers paste into GraphiQL and what the playground
sends; this test keeps them valid, complete (every root field of the served
schema has one) and working: queries and mutations over HTTP in a scenario
that gives each one sensible variables, subscriptions over a real WebSocket.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.app import schema
from feedfabric.core.settings import Settings
from feedfabric.schema.core_schema import graphql_schema
from feedfabric.workers import notifications
from feedfabric.workers.base import WorkerContext
from graphql import OperationDefinitionNode, OperationType, parse, print_ast, validate
from PIL import Image

from tests.pipeline_support import InlineGroup, group_runner, relay, running
from tests.realtime_support import TRANSPORT_WS, serve, wait_subscribed, ws_client
from tests.support import Api

OPERATIONS = Path(__file__).resolve().parents[2] / "graphql-playground" / "operations"


def documents() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted(OPERATIONS.glob("*.graphql"))}


def operation_of(text: str) -> OperationDefinitionNode:
    ops = [d for d in parse(text).definitions if isinstance(d, OperationDefinitionNode)]
    assert len(ops) == 1, "one operation per file"
    return ops[0]


# ------------------------------------------------------------------ static checks


def test_every_file_is_one_named_valid_operation_with_documented_variables() -> None:
    docs = documents()
    assert len(docs) >= 30
    for name, text in docs.items():
        op = operation_of(text)
        assert op.name is not None and op.name.value == name, f"{name}.graphql must define operation {name}"
        assert not validate(graphql_schema(schema), parse(text)), name
        header = [line for line in text.splitlines() if line.startswith("#")]
        assert header and header[0].startswith(f"# {name}"), f"{name}: comment header first"
        assert any("Variables:" in line for line in header), f"{name}: document its variables"
        for variable in op.variable_definitions or ():
            assert re.search(rf"#\s+{variable.variable.name.value}:", text) or "Variables: none" in text, (
                f"{name}: variable ${variable.variable.name.value} undocumented"
            )


def test_every_root_field_of_the_served_schema_has_an_operation() -> None:
    served = graphql_schema(schema)
    roots = {
        OperationType.QUERY: served.query_type,
        OperationType.MUTATION: served.mutation_type,
        OperationType.SUBSCRIPTION: served.subscription_type,
    }
    covered: set[tuple[str, str]] = set()
    for text in documents().values():
        op = operation_of(text)
        for selection in op.selection_set.selections:
            covered.add((op.operation.value, selection.name.value))  # type: ignore[attr-defined]
    wanted = {(kind.value, field) for kind, root in roots.items() if root for field in root.fields}
    assert wanted - covered == set(), "root fields without an example operation"


def test_a_fragment_means_the_same_in_every_file() -> None:
    seen: dict[str, str] = {}
    for name, text in documents().items():
        for definition in parse(text).definitions:
            if definition.kind == "fragment_definition":
                printed = print_ast(definition)
                frag = definition.name.value  # type: ignore[attr-defined]
                assert seen.setdefault(frag, printed) == printed, f"fragment {frag} differs in {name}.graphql"


# ------------------------------------------------------------------ over HTTP

Vars = Callable[[dict[str, Any]], dict[str, Any]]
Save = Callable[[dict[str, Any], dict[str, Any]], None]


def step(
    name: str, who: str, variables: Vars | dict[str, Any] | None = None, save: Save | None = None
) -> tuple[str, str, Vars, Save | None]:
    fn = variables if callable(variables) else (lambda _g, v=variables or {}: v)
    return name, who, fn, save


def saving(key: str, path: Callable[[dict[str, Any]], Any]) -> Save:
    def save(got: dict[str, Any], data: dict[str, Any]) -> None:
        got[key] = path(data)

    return save


# Each query and mutation with the member who runs it; later steps use what earlier ones returned.
SCENARIO = [
    step("UpsertProfile", "newbie", {"username": "newbie", "displayName": "New Member"}),
    step("Viewer", "alice"),
    step("CreatePost", "alice", {"content": "hello #demo with @bob"}, saving("post", lambda d: d["createPost"]["id"])),
    step("CreatePost", "alice", {"content": "soon deleted"}, saving("doomed", lambda d: d["createPost"]["id"])),
    step("Follow", "bob", {"externalUserId": "alice"}),
    step("AddFavourite", "bob", {"externalUserId": "alice"}),
    step("FollowTag", "bob", {"tag": "demo"}),
    step("FollowedTags", "bob"),
    step("MemberLists", "bob", {"username": "alice"}),
    step("LikePost", "bob", lambda g: {"postId": g["post"]}),
    step("AddComment", "bob", lambda g: {"postId": g["post"], "content": "nice one @alice"}),
    step("Repost", "bob", lambda g: {"postId": g["post"]}),
    step("UpdatePost", "alice", lambda g: {"id": g["post"], "content": "hello again #demo with @bob"}),
    step("HomeFeed", "bob", {"first": 5}),
    step("HomeFeed", "bob", {"first": 1}, saving("cursor", lambda d: d["homeFeed"]["pageInfo"]["endCursor"])),
    step("HomeFeed", "bob", lambda g: {"first": 5, "after": g["cursor"]}),
    step("FavouritesFeed", "bob"),
    step("TagFeed", "bob", {"tag": "demo"}),
    step("MentionsFeed", "alice"),
    step("MentionsFeed", "bob"),
    step("Favourites", "bob"),
    step("FeedProfile", "bob"),
    step("UpdateFeedProfile", "bob", {"input": {"preset": "CLOSE_CIRCLE", "lookbackHours": 72}}),
    step("ForYouFeed", "bob", {"first": 1}, saving("foryou", lambda d: d["forYouFeed"]["pageInfo"]["endCursor"])),
    step("ForYouFeed", "bob", lambda g: {"first": 5, "after": g["foryou"]}),
    step("SuggestedTopics", "newbie", {"first": 8}),
    step("SuggestedMembers", "newbie", {"first": 5}),
    step("DismissSuggestion", "newbie", {"externalUserId": "alice"}),
    step("FeedStats", "admin", {"days": 7}),
    step("RankerModels", "admin"),
    step("Notifications", "alice"),
    step(
        "NotificationGroups",
        "alice",
        {"first": 5},
        saving("group", lambda d: d["notificationGroups"]["edges"][0]["node"]["key"]),
    ),
    step("MarkNotificationGroupRead", "alice", lambda g: {"key": g["group"]}),
    step("MarkNotificationsRead", "alice"),
    step("Member", "alice", {"externalId": "bob"}),
    step("Member", "bob", {"username": "alice", "first": 1}),
    step("Post", "bob", lambda g: {"id": g["post"]}),
    step("SimilarPosts", "bob", lambda g: {"postId": g["post"]}),
    step("UploadMedia", "alice", {}, saving("media", lambda d: d["uploadMedia"]["id"])),
    step("Media", "alice", lambda g: {"id": g["media"]}),
    step("CreatePlaylist", "alice", {"name": "Best of"}, saving("playlist", lambda d: d["createPlaylist"]["id"])),
    step(
        "AddToPlaylist",
        "alice",
        lambda g: {"playlistId": g["playlist"], "postId": g["post"]},
        saving("item", lambda d: d["addToPlaylist"]["id"]),
    ),
    step(
        "AddToPlaylist",
        "alice",
        lambda g: {"playlistId": g["playlist"], "postId": g["doomed"]},
        saving("item2", lambda d: d["addToPlaylist"]["id"]),
    ),
    step("MovePlaylistItem", "alice", lambda g: {"itemId": g["item2"], "beforeItemId": g["item"]}),
    step("Playlist", "bob", lambda g: {"id": g["playlist"]}),
    step("FollowPlaylist", "bob", lambda g: {"playlistId": g["playlist"]}),
    step("UnfollowPlaylist", "bob", lambda g: {"playlistId": g["playlist"]}),
    step("RemovePlaylistItem", "alice", lambda g: {"itemId": g["item2"]}),
    step(
        "Report",
        "bob",
        lambda g: {"input": {"postId": g["post"], "reason": "SPAM", "note": "looks like spam"}},
        saving("report", lambda d: d["report"]["id"]),
    ),
    step("MyReports", "bob"),
    step("Reports", "admin", {"status": "OPEN", "first": 5}),
    step("AddModerationTerm", "admin", {"phrase": "scamcoin"}, saving("term", lambda d: d["addModerationTerm"]["id"])),
    step("ModerationTerms", "admin"),
    step("RemoveModerationTerm", "admin", lambda g: {"id": g["term"]}),
    step("ResolveReport", "admin", lambda g: {"id": g["report"], "action": "DISMISS"}),
    step("HoldPost", "admin", lambda g: {"id": g["post"]}),
    step("ReleasePost", "admin", lambda g: {"id": g["post"]}),
    step("SuspendMember", "admin", {"externalUserId": "newbie"}),
    step("UnsuspendMember", "admin", {"externalUserId": "newbie"}),
    step("UnlikePost", "bob", lambda g: {"postId": g["post"]}),
    step("RemoveFavourite", "bob", {"externalUserId": "alice"}),
    step("UnfollowTag", "bob", {"tag": "demo"}),
    step("Unfollow", "bob", {"externalUserId": "alice"}),
    step("DeletePost", "alice", lambda g: {"id": g["doomed"]}),
    step("ImportBlocks", "newbie", {}, saving("imported", lambda d: d["importBlocks"])),
    step("Block", "bob", {"externalUserId": "alice"}),
    step("BlockedMembers", "bob"),
    step("Unblock", "bob", {"externalUserId": "alice"}),
    step("Mute", "bob", {"externalUserId": "alice"}),
    step("MutedMembers", "bob"),
    step("Unmute", "bob", {"externalUserId": "alice"}),
    step("AddMutedWord", "bob", {"phrase": "spoiler"}, saving("word", lambda d: d["addMutedWord"]["id"])),
    step("MutedWords", "bob"),
    step("RemoveMutedWord", "bob", lambda g: {"id": g["word"]}),
]

# The file each multipart operation sends, as (file name, bytes, content type).
UPLOADS = {
    "UploadMedia": lambda: ("photo.png", png(), "image/png"),
    "ImportBlocks": lambda: ("blocked_accounts.csv", b"alice\nnobody@elsewhere.example\n", "text/csv"),
}


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 90, 40)).save(out, "PNG")
    return out.getvalue()


async def run_http(api: Api, name: str, text: str, variables: dict[str, Any], token: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    if name in UPLOADS:
        response = await api.client.post(
            "/graphql",
            headers=headers,
            data={
                "operations": json.dumps({"query": text, "operationName": name, "variables": {"file": None}}),
                "map": json.dumps({"0": ["variables.file"]}),
            },
            files={"0": UPLOADS[name]()},
        )
    else:
        response = await api.client.post(
            "/graphql", headers=headers, json={"query": text, "operationName": name, "variables": variables}
        )
    body = response.json()
    assert not body.get("errors"), (name, variables, body.get("errors"))
    assert response.status_code == 200, (name, response.status_code)
    return body["data"]  # type: ignore[no-any-return]


async def test_every_query_and_mutation_runs_without_errors(
    api: Api, settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    docs = documents()
    # worker-notifications, applied inline before the notification steps: the groups are its writing.
    notifier = InlineGroup(notifications.GROUP, WorkerContext(settings=settings, pool=pool, redis=redis))
    http_ops = {n for n, t in docs.items() if operation_of(t).operation != OperationType.SUBSCRIPTION}
    assert {s[0] for s in SCENARIO} == http_ops, "every query and mutation file has a step"

    tokens = {
        "alice": await api.member("alice"),
        "bob": await api.member("bob"),
        "admin": await api.member("root", admin=True),
        "newbie": api.token("newbie"),
    }
    got: dict[str, Any] = {}
    for name, who, variables, save in SCENARIO:
        if name == "Notifications":
            await notifier.catch_up()
        data = await run_http(api, name, docs[name], variables(got), tokens[who])
        if save:
            save(got, data)
    assert got["media"] and got["playlist"]
    assert got["imported"] == {"blocked": 1, "unknown": ["nobody@elsewhere.example"]}


# ------------------------------------------------------------------ over WebSocket


async def test_every_subscription_runs_over_graphql_transport_ws(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    docs = documents()
    subs = {n for n, t in docs.items() if operation_of(t).operation == OperationType.SUBSCRIPTION}
    assert subs == {"HomeTimeline", "NotificationAdded", "NotificationGroupUpdated"}

    runner = group_runner(settings, pool, redis, notifications.GROUP)
    async with serve(settings) as server, running(relay(settings).run, runner.run):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        await api.follow(bob, "alice")
        first = await api.post(alice, "before #demo")
        second = await api.post(alice, "after #demo")
        async with ws_client(server, TRANSPORT_WS, bob) as ws:
            # `since` replays what is newer than the cursor, then goes live.
            await ws.subscribe(docs["HomeTimeline"], {"since": first})
            event = (await ws.next_data())["homeTimeline"]
            assert event["cursor"] == second and event["post"]["content"] == "after #demo"
            assert event["post"]["author"]["username"] == "alice"
        async with ws_client(server, TRANSPORT_WS, alice) as ws:
            await ws.subscribe(docs["NotificationAdded"])
            await wait_subscribed(server, 1)
            await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": second}, token=bob)
            # bob's follow may still be on its way: notifications arrive as they are made.
            kinds = []
            while "LIKE" not in kinds:
                got = (await ws.next_data())["notificationAdded"]
                kinds.append(got["kind"])
                assert got["actor"]["username"] == "bob" and len(kinds) <= 2, kinds
            assert got["post"]["id"] == second
        async with ws_client(server, TRANSPORT_WS, alice) as ws:
            await ws.subscribe(docs["NotificationGroupUpdated"])
            await wait_subscribed(server, 1)
            await api.gql(
                'mutation($p: ID!) { addComment(postId: $p, content: "hi") { id } }', {"p": second}, token=bob
            )
            # Groups bob's earlier follow and like changed may still be on their way.
            seen = []
            while not seen or seen[-1]["kind"] != "COMMENT":
                seen.append((await ws.next_data())["notificationGroupUpdated"])
                assert len(seen) <= 3, seen
            assert (seen[-1]["actorCount"], seen[-1]["sampleActors"][0]["username"]) == (1, "bob")


@pytest.mark.parametrize("name", ["HomeFeed", "TagFeed", "Post", "Member"])
def test_the_heaviest_operations_stay_far_below_the_cost_limit(name: str) -> None:
    from feedfabric.schema.cost import operation_cost

    text = documents()[name]
    cost = operation_cost(graphql_schema(schema), parse(text), name, {"first": 100, "commentsFirst": 100})
    assert cost < Settings().graphql_max_cost / 4, cost
