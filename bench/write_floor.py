"""The write path's API floor: a bare Starlette endpoint per mutation that does only what the mutation must.

Run by bench/write_path.py as a server process beside the real API, on the same database. Per request the
bare endpoint checks the bearer token (the product's JWT check, feedfabric.core.auth), maps it to the
member from a dict filled before the run (no member row), writes the same rows as the product in ONE
statement in autocommit (one round trip: the post with its tags and mentions, the like with its Liked
playlist item, the follow; each with its outbox row, version and NOTIFY) and answers the same JSON as
the product (GraphQL's `{"data": ...}` or REST's body). Whatever it serves, the product can only serve
more slowly; the gap is what the product's own steps cost.

`steps` add the product's steps one by one, each the product's own function, so a server per step is a
cost ladder from the bare endpoint to the real one (as bench/home_feed_ladder.py is for reads):

- `member`: the viewer's member row by external ID (feeds.viewer, each request)
- `ratelimit`: one operation of the member's Redis window (feeds.ratelimit)
- `domain`: the product's domain write (feeds.posts.create_post, feeds.reactions.like,
  feeds.members.follow) in its transaction, instead of the bare statement

The top of the ladder is the product itself (`feedfabric api`), measured by bench/write_path.py.
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator
from typing import Any

STEPS = ("member", "ratelimit", "domain")
Members = dict[str, dict[str, Any]]  # external ID -> {"id", "username", "row": the member row's columns}

_OUTBOX = """, bumped AS (
    INSERT INTO outbox_keys (key, version) VALUES ($KEY::text, 1)
    ON CONFLICT (key) DO UPDATE SET version = outbox_keys.version + 1 RETURNING version
), added AS (
    INSERT INTO outbox (topic, key, shard, event_type, aggregate_version, payload)
    SELECT $TOPIC, $KEY::text, $SHARD::int, $TYPE, bumped.version, $PAYLOAD::jsonb FROM bumped WHERE $GATE
    RETURNING shard
)"""


def _outbox(key: str, topic: str, shard: str, event_type: str, payload: str, gate: str = "true") -> str:
    return (
        _OUTBOX.replace("$KEY", key)
        .replace("$TOPIC", topic)
        .replace("$SHARD", shard)
        .replace("$TYPE", event_type)
        .replace("$PAYLOAD", payload)
        .replace("$GATE", gate)
    )


BARE_POST = (
    """WITH post AS (
    INSERT INTO posts (id, author_id, content) VALUES ($1, $2, $3) RETURNING created_at
), tagged AS (
    INSERT INTO post_tags (post_id, tag, source) SELECT $1, t, 'hashtag' FROM unnest($4::text[]) AS t
), mentioned AS (
    INSERT INTO mentions (member_id, item_id, post_id) SELECT m, $1, $1 FROM unnest($5::uuid[]) AS m
)"""
    + _outbox("$1", "$6", "$7", "'PostCreated'", "$8")
    + " SELECT (SELECT created_at FROM post), (SELECT pg_notify('feedfabric_outbox', shard::text) FROM added)"
)

BARE_LIKE = (
    """WITH liked AS (
    INSERT INTO likes (post_id, member_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING post_id
), item AS (
    INSERT INTO playlist_items (id, playlist_id, post_id, rank) SELECT $3, $4, $1, $5 FROM liked
)"""
    + _outbox("$1", "$6", "$7", "'PostLiked'", "$8", "EXISTS (SELECT 1 FROM liked)")
    + " SELECT coalesce((SELECT likes FROM post_stats WHERE post_id = $1), 0) + 1,"
    " (SELECT pg_notify('feedfabric_outbox', shard::text) FROM added)"
)

BARE_FOLLOW = (
    """WITH followed AS (
    INSERT INTO follows (follower_id, target_type, target_id) VALUES ($1, 'member', $2::text)
    ON CONFLICT DO NOTHING RETURNING 1
)"""
    + _outbox("$1", "$3", "$4", "'MemberFollowed'", "$5", "EXISTS (SELECT 1 FROM followed)")
    + " SELECT (SELECT pg_notify('feedfabric_outbox', shard::text) FROM added)"
)


def make_app(database_url: str, redis_url: str, secret: str, members: Members, steps: frozenset[str]) -> Any:
    """The bare endpoints (POST /post, /like, /follow, PUT /follows/{id}) plus the chosen `steps`."""
    import orjson
    import redis.asyncio as aioredis
    from feedfabric.core.auth import TokenCache
    from feedfabric.core.events import TOPIC_OF
    from feedfabric.core.ids import id_millis, new_id
    from feedfabric.core.models import Member
    from feedfabric.core.settings import Settings
    from feedfabric.db import members as members_db
    from feedfabric.db.outbox import shard_of
    from feedfabric.db.playlists import liked_playlist_id
    from feedfabric.db.pool import create_pool, transaction
    from feedfabric.feeds import members as members_svc
    from feedfabric.feeds import posts as posts_svc
    from feedfabric.feeds import ratelimit, reactions, text
    from feedfabric.rest import serialize
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    windows = ratelimit.LocalWindows()

    settings = Settings(
        database_url=database_url,
        redis_url=redis_url,
        feedfabric_jwt_secret=secret,
        rate_limit_operations=10**9,
        rate_limit_cost=10**12,
    )
    state: dict[str, Any] = {}
    tokens = TokenCache()  # as the product's viewer checks a token (feeds.viewer)
    ranks = itertools.count(10**12)
    by_name = {m["username"]: m for m in members.values()}

    def json(body: Any) -> Response:
        return Response(orjson.dumps(body), media_type="application/json")

    async def viewer(request: Request) -> tuple[dict[str, Any], Member]:
        claims = tokens.decode(secret, request.headers["authorization"][7:])
        known = members[claims.external_id]
        member = Member(**known["row"])
        if "member" in steps:
            found = await members_db.viewer_by_external_id(state["pool"], claims.external_id)
            assert found is not None and found[0].active
            member = found[0]
        if "ratelimit" in steps:
            await ratelimit.spend(state["redis"], settings, windows, ratelimit.client_key(member.id, None), 1)
        return known, member

    async def post(request: Request) -> Response:
        known, member = await viewer(request)
        content = (await request.json())["content"]
        if "domain" in steps:
            async with transaction(state["pool"]) as conn:
                row = await posts_svc.create_post(conn, settings, member, content)
            post_id, created_at, tags = row.id, row.created_at, text.hashtags(content)
        else:
            post_id, tags = new_id(), text.hashtags(content)
            mentioned = sorted(
                by_name[n]["id"] for n in text.mentions(content) if n in by_name and n != member.username
            )
            payload = {
                "postId": str(post_id),
                "authorId": str(member.id),
                "createdAtMs": id_millis(post_id),
                "repostOf": None,
                "mentionedIds": [str(m) for m in mentioned],
            }
            row = await state["pool"].fetchrow(
                BARE_POST,
                post_id,
                member.id,
                content,
                tags,
                mentioned,
                TOPIC_OF["PostCreated"],
                shard_of(str(post_id)),
                payload,
            )
            created_at = row[0]
        node = {"id": str(post_id), "content": content, "tags": tags, "createdAt": created_at.isoformat()}
        return json({"data": {"createPost": node}})

    async def like(request: Request) -> Response:
        known, member = await viewer(request)
        post_id = uuid.UUID((await request.json())["postId"])
        if "domain" in steps:
            async with transaction(state["pool"]) as conn:
                await reactions.like(conn, settings, member, post_id)
            count = await state["pool"].fetchval("SELECT likes FROM post_stats WHERE post_id = $1", post_id)
        else:
            author = await state["pool"].fetchval("SELECT author_id FROM posts WHERE id = $1", post_id)
            payload = {"postId": str(post_id), "memberId": str(member.id), "authorId": str(author)}
            count = await state["pool"].fetchval(
                BARE_LIKE,
                post_id,
                member.id,
                new_id(),
                liked_playlist_id(member.id),
                f"z{next(ranks)}",
                TOPIC_OF["PostLiked"],
                shard_of(str(post_id)),
                payload,
            )
        return json({"data": {"likePost": {"id": str(post_id), "likeCount": count, "viewerHasLiked": True}}})

    async def follow_target(request: Request, target: str) -> Member:
        known, member = await viewer(request)
        if "domain" in steps:
            async with transaction(state["pool"]) as conn:
                return await members_svc.follow(conn, settings, member, target)
        followed = members[target]
        payload = {"followerId": str(member.id), "memberId": str(followed["id"])}
        await state["pool"].fetchval(
            BARE_FOLLOW,
            member.id,
            str(followed["id"]),
            TOPIC_OF["MemberFollowed"],
            shard_of(str(member.id)),
            payload,
        )
        return Member(**followed["row"])

    async def follow(request: Request) -> Response:
        target = (await request.json())["externalUserId"]
        followed = await follow_target(request, target)
        return json({"data": {"follow": {"id": str(followed.id), "username": followed.username}}})

    async def follow_rest(request: Request) -> Response:
        followed = await follow_target(request, request.path_params["external_id"])
        return json({"member": serialize.member(followed), "following": True})

    async def healthz(request: Request) -> Response:
        return Response(b"ok")

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        state["pool"] = await create_pool(database_url, max_size=20, lean_reset=True, generic_plans=True)
        state["redis"] = aioredis.from_url(redis_url)
        yield
        await state["pool"].close()
        await state["redis"].aclose()

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/post", post, methods=["POST"]),
            Route("/like", like, methods=["POST"]),
            Route("/follow", follow, methods=["POST"]),
            Route("/follows/{external_id}", follow_rest, methods=["PUT"]),
        ],
        lifespan=lifespan,
    )


def serve(port: int, database_url: str, redis_url: str, secret: str, members: Members, steps: frozenset[str]) -> None:
    """One server process, run by uvicorn as `feedfabric api` runs the product (one worker, default loop)."""
    import uvicorn

    app = make_app(database_url, redis_url, secret, members, steps)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
