"""The safety matrix: every served surface against every relation the viewer can have with an author.

Rows are the surfaces: each Query field that lists or returns posts, members' items or notifications,
the nested fields that do (a member's posts, a post's comments, a group's sample), the REST GET routes,
and the live subscriptions (tests/realtime/test_safety_live.py). They are found by walking the served
schema and the REST routes, not listed by hand: a new field or route must be put in ROWS (with the
rule it keeps) or in NOT_A_SURFACE (with why), so one added later without the rule fails here.

Columns are the relations: an author the viewer blocks, one who blocks the viewer, one muted, one muted
without notifications, one whose words the viewer mutes in each FilterContext, one whose mute expired,
one blocked then unblocked, and a control. Each author writes a post (mentioning the viewer, #probe),
has it reposted by a member the viewer follows, comments on the viewer's post, likes it and mentions
the viewer (notifications). Every probe answers which authors it showed; the matrix asserts it shows
exactly the authors the rule lets through (so an empty answer cannot pass for a hidden one).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.app import schema
from feedfabric.db.pool import transaction
from feedfabric.feeds import timelines
from feedfabric.feeds.matcher import CONTEXTS
from feedfabric.rest.routes import routes
from feedfabric.schema.core_schema import graphql_schema
from graphql import GraphQLList, GraphQLNonNull, GraphQLObjectType, get_named_type

from tests.feeds.test_post_visibility_paths import notify
from tests.support import Api

WORDS = {f"word:{c}": f"zz{c.lower()}" for c in CONTEXTS}
RELATIONS = ["shown", "blocked", "blocking", "muted", "muted_quiet", *WORDS, "expired", "unblocked"]
FEEDS = ("HOME", "FAVOURITES", "TAGS", "FOR_YOU")


@dataclass(frozen=True)
class Rule:
    """What a surface hides: `context` names the muted words it applies (None: none); `mutes` is "feed"
    (any mute hides), "notify" (a mute with notifications hides) or None (a mute hides nothing)."""

    context: str | None
    mutes: str | None

    def hides(self, relation: str) -> bool:
        if relation in ("blocked", "blocking"):
            return True
        if relation == "muted":
            return self.mutes in ("feed", "notify")
        if relation == "muted_quiet":
            return self.mutes == "feed"
        if relation.startswith("word:"):
            return self.context == relation.removeprefix("word:")
        return False


@dataclass
class World:
    api: Api
    viewer: str
    tokens: dict[str, str]  # relation -> the author's token
    member_ids: dict[str, str] = field(default_factory=dict)  # member id -> relation
    items: dict[str, str] = field(default_factory=dict)  # post / comment id -> relation
    posts: dict[str, str] = field(default_factory=dict)  # relation -> its post
    mine: str = ""

    def owners(self, data: Any) -> set[str]:
        """The relations whose items (or whose member) appear anywhere in a response."""
        found: set[str] = set()
        if isinstance(data, dict):
            for key, value in data.items():
                if key == "id" and isinstance(value, str):
                    owner = self.items.get(value) or self.member_ids.get(value)
                    if owner is not None:
                        found.add(owner)
                else:
                    found |= self.owners(value)
        elif isinstance(data, list):
            for value in data:
                found |= self.owners(value)
        return found

    async def gql(self, query: str, variables: dict[str, Any] | None = None) -> set[str]:
        body = await self.api.raw(query, variables, token=self.viewer)
        assert not body.get("errors"), body["errors"]
        return self.owners(body["data"])

    async def rest(self, path: str) -> set[str]:
        response = await self.api.rest("GET", path, token=self.viewer)
        assert response.status_code == 200, response.text
        return self.owners(response.json())


Probe = Callable[[World], Awaitable[set[str]]]


def gql(query: str) -> Probe:
    async def probe(world: World) -> set[str]:
        return await world.gql(query)

    return probe


def rest(path: str) -> Probe:
    async def probe(world: World) -> set[str]:
        return await world.rest(path)

    return probe


async def _each_post(world: World) -> set[str]:
    seen: set[str] = set()
    for post in world.posts.values():
        seen |= await world.gql("query($id: ID!) { post(id: $id) { id } }", {"id": post})
    return seen


async def _member_posts(world: World) -> set[str]:
    seen: set[str] = set()
    for relation in RELATIONS:
        seen |= await world.gql(
            "query($u: String!) { member(username: $u) { posts(first: 50) { edges { node { id } } } } }",
            {"u": _name(relation)},
        )
    return seen


async def _comments(world: World) -> set[str]:
    return await world.gql(
        "query($id: ID!) { post(id: $id) { comments(first: 50) { edges { node { id } } } } }", {"id": world.mine}
    )


async def _similar(world: World) -> set[str]:
    seen: set[str] = set()
    for post in world.posts.values():
        seen |= await world.gql("query($id: ID!) { similarPosts(postId: $id, first: 50) { id } }", {"id": post})
    return seen


async def _group_sample(world: World) -> set[str]:
    """The like group on the viewer's post: its sample, and its count must agree with it."""
    body = await world.api.raw(
        "{ notificationGroups(first: 50) { edges { node { kind actorCount sampleActors { id } } } } }",
        token=world.viewer,
    )
    groups = [e["node"] for e in body["data"]["notificationGroups"]["edges"] if e["node"]["kind"] == "LIKE"]
    assert len(groups) == 1
    # The count leaves out whom the sample leaves out (the sample holds at most 8 of them).
    assert groups[0]["actorCount"] == len(expected(ROWS["NotificationGroup.sampleActors"][0]))
    return world.owners(groups[0]["sampleActors"])


async def _notification_groups(world: World) -> set[str]:
    """The MENTION groups (one a notification, never grouped): whose mention the viewer is shown."""
    body = await world.api.raw(
        "{ notificationGroups(first: 50) { edges { node { kind sampleActors { id } } } } }", token=world.viewer
    )
    mentions = [e["node"] for e in body["data"]["notificationGroups"]["edges"] if e["node"]["kind"] == "MENTION"]
    return world.owners(mentions)


async def _notifications(world: World) -> set[str]:
    """The MENTION notifications (the like ones are the group's): whose the viewer is shown."""
    body = await world.api.raw(
        "{ notifications(first: 50) { edges { node { kind actor { id } } } } }", token=world.viewer
    )
    return world.owners([e["node"] for e in body["data"]["notifications"]["edges"] if e["node"]["kind"] == "MENTION"])


FEED = Rule("HOME", "feed")
ROWS: dict[str, tuple[Rule, Probe]] = {
    "Query.homeFeed": (FEED, gql("{ homeFeed(first: 100) { edges { node { id repostOf { id } } } } }")),
    "Query.favouritesFeed": (
        Rule("FAVOURITES", "feed"),
        gql("{ favouritesFeed(first: 100) { edges { node { id } } } }"),
    ),
    "Query.tagFeed": (Rule("TAGS", "feed"), gql('{ tagFeed(tag: "probe", first: 100) { edges { node { id } } } }')),
    "Query.mentionsFeed": (
        Rule("MENTIONS", "notify"),
        gql("{ mentionsFeed(first: 100) { edges { node { ... on Post { id } ... on Comment { id } } } } }"),
    ),
    "Query.forYouFeed": (Rule("FOR_YOU", "feed"), gql("{ forYouFeed(first: 100) { edges { node { id } } } }")),
    "Query.similarPosts": (Rule("FOR_YOU", "feed"), _similar),
    "Query.post": (Rule(None, None), _each_post),
    "Member.posts": (Rule(None, None), _member_posts),
    "Post.comments": (Rule("COMMENTS", None), _comments),
    "Query.notifications": (Rule("NOTIFICATIONS", "notify"), _notifications),
    "Query.notificationGroups": (Rule("NOTIFICATIONS", "notify"), _notification_groups),
    "NotificationGroup.sampleActors": (Rule(None, "notify"), _group_sample),
    "GET /userfeed/home": (FEED, rest("/userfeed/home?limit=100")),
    "GET /userfeed/favourites": (Rule("FAVOURITES", "feed"), rest("/userfeed/favourites?limit=100")),
    "GET /userfeed/tags/{tag}/posts": (Rule("TAGS", "feed"), rest("/userfeed/tags/probe/posts?limit=100")),
    "GET /userfeed/mentions": (Rule("MENTIONS", "notify"), rest("/userfeed/mentions?limit=100")),
    "GET /userfeed/foryou": (Rule("FOR_YOU", "feed"), rest("/userfeed/foryou?limit=100")),
}
# Rows that cannot show every author they should here (similar posts need the embedding pipeline; a
# group's sample holds at most 8 actors, its count is checked instead): only their hiding is checked.
NO_CONTROL = {"Query.similarPosts", "NotificationGroup.sampleActors"}

# Fields and routes that list something but are not a surface of others' content, each with why.
NOT_A_SURFACE = {
    "Query.viewer": "the viewer themself",
    "Query.member": "answers for a blocked member too, by contract (a client offers to unblock)",
    "Query.favourites": "the viewer's own choice of members; a block ends favourites both ways",
    "Query.followedTags": "tags, no one's content",
    "Query.blockedMembers": "the viewer's own relations",
    "Query.mutedMembers": "the viewer's own relations",
    "Query.mutedWords": "the viewer's own relations",
    "Query.feedProfile": "the viewer's settings",
    "Query.playlist": "the viewer's own curation; its items read visible_posts (blocks), tests/feeds/test_post_visibility_paths.py",
    "Query.media": "the viewer's own uploads",
    "Query.feedStats": "admin figures",
    "Query.rankerModels": "admin figures",
    "Query.suggestedMembers": "its own rule leaves out blocked and muted members (tests/feeds/test_suggestions.py)",
    "Query.suggestedTopics": "topics, no one's content",
    "Query.myReports": "the viewer's own reports",
    "Query.reports": "admin queue",
    "Query.moderationTerms": "admin list",
    "GET /userfeed": "the viewer's own posts",
    "GET /feed-profile": "the viewer's settings",
    "GET /favourites": "the viewer's own choice of members",
    "GET /blocks": "the viewer's own relations",
    "GET /mutes": "the viewer's own relations",
    "GET /media/{media_id}/status": "the viewer's own upload",
    "GET /media/{media_id}": "bytes of a READY photo by ID",
    "GET /suggestions/members": "its own rule leaves out blocked and muted members (tests/feeds/test_suggestions.py)",
    "GET /suggestions/topics": "topics, no one's content",
    "GET /dashboard": "admin figures",
    "GET /reports": "admin queue",
}


def _lists_something(type_: Any) -> bool:
    """A field's type holds many items or a post: a list, a connection, a Post."""
    while isinstance(type_, GraphQLNonNull):
        type_ = type_.of_type
    if isinstance(type_, GraphQLList):
        return True
    named = get_named_type(type_)
    return named.name == "Post" or (isinstance(named, GraphQLObjectType) and "edges" in named.fields)


def query_surfaces() -> set[str]:
    found = {
        f"Query.{name}" for name, f in graphql_schema(schema).query_type.fields.items() if _lists_something(f.type)
    }
    return (
        found
        | {"Query.post", "Query.viewer", "Query.member", "Member.posts", "Post.comments"}
        | {"NotificationGroup.sampleActors"}
    )


def rest_surfaces() -> set[str]:
    found = set()
    for route in routes():
        if "GET" in (route.methods or set()):
            found.add(f"GET {route.path}")
    return found


def test_every_surface_is_in_the_matrix_or_says_why_not() -> None:
    listed = set(ROWS) | set(NOT_A_SURFACE)
    assert query_surfaces() - listed == set(), "a new Query field: put it in ROWS with its rule, or say why not"
    assert rest_surfaces() - listed == set(), "a new REST GET route: put it in ROWS with its rule, or say why not"


def test_every_rule_in_the_matrix_is_a_served_surface() -> None:
    served = query_surfaces() | rest_surfaces()
    assert set(ROWS) - served == set()


def _name(relation: str) -> str:
    return "r_" + relation.replace("word:", "w_").lower()


async def build_world(api: Api, pool: asyncpg.Pool, redis: aioredis.Redis) -> World:
    viewer = await api.member("looker")
    echo = await api.member("echo")
    world = World(api, viewer, {})
    for relation in RELATIONS:
        world.tokens[relation] = await api.member(_name(relation))
    rows = await pool.fetch("SELECT id, username FROM members")
    by_name = {r["username"]: str(r["id"]) for r in rows}
    world.member_ids = {by_name[_name(r)]: r for r in RELATIONS}
    world.mine = await api.post(viewer, "my own post")
    for who in ["echo", *(_name(r) for r in RELATIONS)]:
        await api.follow(viewer, who)
        await api.gql("mutation($e: String!) { addFavourite(externalUserId: $e) { id } }", {"e": who}, token=viewer)
    for relation in RELATIONS:
        token, word = world.tokens[relation], WORDS.get(relation, "plain")
        post = await api.post(token, f"{word} hello #probe @looker")
        world.posts[relation], world.items[post] = post, relation
        repost = await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": post}, token=echo)
        world.items[repost["repost"]["id"]] = relation
        comment = await api.gql(
            "mutation($p: ID!, $c: String!) { addComment(postId: $p, content: $c) { id } }",
            {"p": world.mine, "c": f"{word} nice"},
            token=token,
        )
        world.items[comment["addComment"]["id"]] = relation
        await notify(pool, "looker", _name(relation), "like", world.mine, None)
        await notify(pool, "looker", _name(relation), "mention", post, None)
    # The viewer's timeline holds every post and repost before any relation exists (as fan-out left it).
    for row in await pool.fetch("SELECT payload FROM outbox WHERE event_type = 'PostCreated' ORDER BY id"):
        async with transaction(pool) as conn:
            await timelines.fan_out(conn, redis, api.settings, uuid.UUID(row["payload"]["postId"]))
    await apply_relations(world, pool)
    return world


async def apply_relations(world: World, pool: asyncpg.Pool) -> None:
    api, viewer = world.api, world.viewer
    block = "mutation($e: String!) { block(externalUserId: $e) { id } }"
    await api.gql(block, {"e": _name("blocked")}, token=viewer)
    await api.gql(block, {"e": "looker"}, token=world.tokens["blocking"])
    mute = "mutation($e: String!, $n: Boolean, $x: Int) { mute(externalUserId: $e, notifications: $n, expiresInSeconds: $x) { id } }"
    await api.gql(mute, {"e": _name("muted")}, token=viewer)
    await api.gql(mute, {"e": _name("muted_quiet"), "n": False}, token=viewer)
    await api.gql(mute, {"e": _name("expired"), "x": 3600}, token=viewer)
    await pool.execute(
        "UPDATE mutes SET expires_at = now() - interval '1 second' WHERE muted_id = (SELECT id FROM members WHERE username = $1)",
        _name("expired"),
    )
    await pool.execute("UPDATE members SET relations_version = relations_version + 1 WHERE username = 'looker'")
    await api.gql(block, {"e": _name("unblocked")}, token=viewer)
    await api.gql(
        "mutation($e: String!) { unblock(externalUserId: $e) { id } }", {"e": _name("unblocked")}, token=viewer
    )
    await api.follow(viewer, _name("unblocked"))
    await api.gql(
        "mutation($e: String!) { addFavourite(externalUserId: $e) { id } }", {"e": _name("unblocked")}, token=viewer
    )
    for relation, word in WORDS.items():
        context = relation.removeprefix("word:")
        await api.gql(
            "mutation($p: String!, $c: [FilterContext!]) { addMutedWord(phrase: $p, contexts: $c) { id } }",
            {"p": word, "c": [context]},
            token=viewer,
        )


def expected(rule: Rule) -> set[str]:
    return {r for r in RELATIONS if not rule.hides(r)}


@pytest.fixture
async def world(api: Api, pool: asyncpg.Pool, redis: aioredis.Redis) -> World:
    return await build_world(api, pool, redis)


async def test_every_surface_holds_against_every_relation(world: World, redis: aioredis.Redis) -> None:
    wrong: list[str] = []

    def check(name: str, rule: Rule, seen: set[str]) -> None:
        want = expected(rule)
        if name in NO_CONTROL:
            seen_hidden = seen - want
            if seen_hidden:
                wrong.append(f"{name} shows {sorted(seen_hidden)}")
        elif seen != want:
            wrong.append(f"{name}: shows {sorted(seen - want)} it should hide, hides {sorted(want - seen)}")

    # The home feed from the viewer's Redis timeline (entries pushed before the relations existed) ...
    source = (await world.api.gql("{ homeFeed(first: 100) { source } }", token=world.viewer))["homeFeed"]["source"]
    assert source == "REDIS"
    for name, (rule, probe) in ROWS.items():
        check(name, rule, await probe(world))
    # ... and from Postgres (the timeline gone: read from the follow graph).
    looker = await world.api.gql("{ viewer { id } }", token=world.viewer)
    await redis.delete(timelines.feed_key(looker["viewer"]["id"]))
    source = (await world.api.gql("{ homeFeed(first: 100) { source } }", token=world.viewer))["homeFeed"]["source"]
    assert source == "POSTGRES"
    for name in ("Query.homeFeed", "GET /userfeed/home"):
        rule, probe = ROWS[name]
        check(f"{name} (postgres)", rule, await probe(world))
    assert wrong == []
