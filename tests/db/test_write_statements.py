"""What each write costs Postgres: the statements, and so the round trips, of one mutation through the whole app.

Counted at the pool the app's requests use (asyncpg's query logger sees every call, BEGIN and COMMIT included;
each call is one round trip once its statement is prepared), so a change that adds a round trip to createPost,
likePost or follow, over GraphQL or REST, fails here (issue 50; bench/write_path.py prints the same counts
beside their CPU).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg
import pytest
from feedfabric.core.settings import Settings
from feedfabric.db.pool import create_pool
from feedfabric.resources import Resources

from tests.support import Api, make_api

_INTROSPECTION = ("typeinfo_tree", "current_setting('jit')", "set_config('jit'")


@dataclass(eq=False)
class Statements:
    """Every statement the counted pool ran, in order (asyncpg's type introspection left out: it runs once per
    connection, on whichever request first meets a type)."""

    seen: list[str] = field(default_factory=list)

    def __call__(self, record: asyncpg.connection.LoggedQuery) -> None:
        if not any(mark in record.query for mark in _INTROSPECTION):
            self.seen.append(" ".join(record.query.split())[:90])


@dataclass
class Counted:
    api: Api
    statements: Statements

    async def during(self, call: object) -> list[str]:
        before = len(self.statements.seen)
        await call  # type: ignore[misc]
        return self.statements.seen[before:]


@pytest.fixture
async def counted(settings: Settings) -> AsyncIterator[Counted]:
    """The real app over ASGI whose requests run on a pool that logs every statement (configured as the app's)."""
    statements = Statements()

    async def attach(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(statements)

    assert settings.database_url is not None
    pool = await create_pool(
        settings.database_url, min_size=1, max_size=4, lean_reset=True, generic_plans=True, on_connect=attach
    )
    try:
        async with make_api(settings) as api:
            transport = api.client._transport  # noqa: SLF001 -- the test's own ASGI transport, to reach the app
            resources: Resources = transport.app.state.resources  # type: ignore[attr-defined]
            resources.pool = pool
            if resources.reads is not None:
                resources.reads.primary = pool
            yield Counted(api, statements)
    finally:
        await pool.close()


CREATE = "mutation($c: String!) { createPost(input: {content: $c}) { id content tags createdAt } }"
LIKE = "mutation($p: ID!) { likePost(postId: $p) { id likeCount viewerHasLiked } }"
FOLLOW = "mutation($e: String!) { follow(externalUserId: $e) { id username } }"


# What each mutation costs now, each call one round trip. Lower a figure when a change saves one; never raise one
# to make a change pass without saying in its commit why the mutation needs the round trip.
EXPECTED = {
    # the viewer; BEGIN; the post with its tags, its mentions and its outbox row (db.posts.insert_with_entities,
    # db.outbox.event_ctes); COMMIT. The answer's extras are the fresh post's own (feeds.posts.fresh_extras).
    "createPost": 4,
    # the viewer; BEGIN; the post locked for share with its visibility (db.posts.get_to_act); the like; the
    # Liked playlist locked, its last rank and the new item; the outbox row; COMMIT; the answer's extras.
    "likePost": 10,
    # the viewer; BEGIN; the member followed; the follow; the outbox row; COMMIT.
    "follow": 6,
    "PUT /follows": 6,
}


@pytest.fixture
async def world(counted: Counted) -> tuple[str, list[str]]:
    """maya, who has posted, liked and followed once already (so every statement below is prepared on the
    pool's connection and her last-seen mark is fresh); theo's posts to like; peers to follow and mention."""
    api = counted.api
    maya = await api.member("maya")
    for i in range(6):
        await api.member(f"peer{i}")
    theo = await api.member("theo")
    posts = [await api.post(theo, f"theo {i}") for i in range(4)]
    await api.gql(CREATE, {"c": "warm #a @peer0"}, token=maya)
    await api.gql(LIKE, {"p": posts[0]}, token=maya)
    await api.gql(FOLLOW, {"e": "peer0"}, token=maya)
    assert (await api.rest("PUT", "/follows/peer1", token=maya)).status_code == 200
    return maya, posts


def _check(name: str, seen: list[str]) -> None:
    listing = "\n  ".join(seen)
    assert len(seen) == EXPECTED[name], f"{name}: {len(seen)} round trips, {EXPECTED[name]} expected:\n  {listing}"


async def test_create_post_costs_its_round_trips_whatever_its_tags_and_mentions(
    counted: Counted, world: tuple[str, list[str]]
) -> None:
    maya, _ = world
    for content in ("hello", "hello #news #more @peer2 @peer3 @nobody"):
        seen = await counted.during(counted.api.gql(CREATE, {"c": content}, token=maya))
        _check("createPost", seen)
    data = await counted.api.gql(CREATE, {"c": "again #news @peer4"}, token=maya)
    assert data["createPost"]["tags"] == ["news"]


async def test_like_post_costs_its_round_trips(counted: Counted, world: tuple[str, list[str]]) -> None:
    maya, posts = world
    for post_id in posts[1:3]:
        seen = await counted.during(counted.api.gql(LIKE, {"p": post_id}, token=maya))
        _check("likePost", seen)


async def test_follow_costs_its_round_trips_over_graphql_and_rest(
    counted: Counted, world: tuple[str, list[str]]
) -> None:
    maya, _ = world
    _check("follow", await counted.during(counted.api.gql(FOLLOW, {"e": "peer2"}, token=maya)))
    _check("PUT /follows", await counted.during(counted.api.rest("PUT", "/follows/peer3", token=maya)))
