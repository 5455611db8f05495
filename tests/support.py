"""A GraphQL/REST client for tests, talking to the real app over ASGI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from feedfabric.core.auth import issue_token
from feedfabric.core.settings import Settings


class GraphQLErrors(AssertionError):
    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors)
        self.errors = errors

    @property
    def codes(self) -> list[str]:
        return [e.get("extensions", {}).get("code") for e in self.errors]


@dataclass
class Api:
    client: httpx.AsyncClient
    settings: Settings
    app: Any = None  # the app behind the client, where a test waits on its state

    def token(self, external_id: str, *, admin: bool = False, ttl: int = 3600) -> str:
        return issue_token(self.settings.jwt_secret, external_id, admin=admin, ttl=ttl)

    async def raw(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        hdrs = dict(headers or {})
        if token:
            hdrs["Authorization"] = f"Bearer {token}"
        response = await self.client.post("/graphql", json={"query": query, "variables": variables or {}}, headers=hdrs)
        return response.json()  # type: ignore[no-any-return]

    async def gql(self, query: str, variables: dict[str, Any] | None = None, *, token: str | None = None) -> Any:
        body = await self.raw(query, variables, token=token)
        if body.get("errors"):
            raise GraphQLErrors(body["errors"])
        return body["data"]

    async def error_codes(
        self, query: str, variables: dict[str, Any] | None = None, *, token: str | None = None
    ) -> list[str]:
        body = await self.raw(query, variables, token=token)
        return [e.get("extensions", {}).get("code") for e in body.get("errors") or []]

    async def member(self, name: str, *, admin: bool = False) -> str:
        """Creates a member whose external ID and username are `name`; returns their token."""
        token = self.token(name, admin=admin)
        await self.gql(
            "mutation($u: String!, $d: String!) { upsertProfile(username: $u, displayName: $d) { id } }",
            {"u": name, "d": name.title()},
            token=token,
        )
        return token

    async def post(self, token: str, content: str) -> str:
        data = await self.gql(
            "mutation($c: String!) { createPost(input: {content: $c}) { id } }", {"c": content}, token=token
        )
        return str(data["createPost"]["id"])

    async def follow(self, token: str, external_id: str) -> None:
        await self.gql("mutation($e: String!) { follow(externalUserId: $e) { id } }", {"e": external_id}, token=token)

    async def rest(self, method: str, path: str, *, token: str | None = None, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return await self.client.request(method, path, headers=headers, **kwargs)


HOME = """query($first: Int, $after: String) {
  homeFeed(first: $first, after: $after) {
    edges { cursor node { id content author { username } repostOf { id } } }
    pageInfo { hasNextPage endCursor } source
  }
}"""


@asynccontextmanager
async def make_api(settings: Settings) -> AsyncIterator[Api]:
    """The real app over ASGI, with its lifespan (pool, Redis client, feed log) running."""
    from feedfabric.app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            yield Api(client, settings, app)


async def feed_world(api: Api, first_post: str = "hello #news") -> str:
    """A reader following two members: two posts, the first liked, commented on and reposted; returns the reader."""
    reader = await api.member("reader")
    author = await api.member("author")
    other = await api.member("other")
    await api.follow(reader, "author")
    await api.follow(reader, "other")
    first = await api.post(author, first_post)
    await api.post(author, "plain")
    await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": first}, token=reader)
    await api.gql(
        "mutation($p: ID!, $c: String!) { addComment(postId: $p, content: $c) { id } }",
        {"p": first, "c": "nice"},
        token=other,
    )
    await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": first}, token=other)
    return reader


async def breaker_allows(api: Api, shard: str = "") -> None:
    """Waits until the API's Redis circuit breaker (of a cluster node's `shard`) lets a request try Redis
    again: its cool-down has passed."""
    from tests.pipeline_support import eventually

    breaker = api.app.state.resources.breaker.shard(shard)

    async def allows() -> bool:
        return breaker.allows

    await eventually(allows)
