"""REST routes (docs/api.md, "REST routes") over the same resolvers as GraphQL."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from feedfabric.core.errors import BadInput, FeedFabricError, NotFound, ServiceUnavailable, store_unreachable
from feedfabric.feeds import ratelimit
from feedfabric.feeds.viewer import resolve_viewer
from feedfabric.resolvers import foryou as foryou_resolvers
from feedfabric.resolvers import media as media_resolvers
from feedfabric.resolvers import reads, safety, writes
from feedfabric.resolvers import suggestions as suggestion_resolvers
from feedfabric.resolvers.context import Context, build_context, note_write, route_reads
from feedfabric.resources import Resources
from feedfabric.rest import reports as rest_reports
from feedfabric.rest import serialize
from feedfabric.rest.responses import JSONResponse

if TYPE_CHECKING:
    from feedfabric.resolvers.foryou import Profile

__all__ = ["favourites", "favourites_feed", "home", "mentions", "own_posts", "routes", "tag_feed"]

log = logging.getLogger("feedfabric.rest")

Handler = Callable[[Context, Request], Awaitable[object]]


def endpoint(handler: Handler, *, rate_limited: bool = True) -> Callable[[Request], Awaitable[Response]]:
    """Builds the request context, spends one operation of the client's rate limit (as one GraphQL
    root field would), runs the handler and maps domain errors to the REST error shape."""

    async def run(request: Request) -> Response:
        resources: Resources = request.app.state.resources
        headers: dict[str, str] = {}
        client: str | None = None
        try:
            viewer = await resolve_viewer(
                resources.pool, resources.settings, resources.tokens, request.headers.get("authorization")
            )
            if rate_limited:
                member = viewer.viewer.member
                client = ratelimit.client_key(
                    member.id if member else None, request.client.host if request.client else None
                )
                allowance = await ratelimit.spend(
                    resources.redis, resources.settings, resources.rate_windows, client, 1
                )
                if allowance is not None:
                    headers = allowance.as_headers()
                    if allowance.refusal is not None:
                        raise allowance.refusal
            ctx = build_context(resources, viewer, request=request)
            reading = request.method in ("GET", "HEAD")
            if reading:
                await route_reads(ctx)
            result = await handler(ctx, request)
            if not reading:
                await note_write(ctx)  # the member's next reads, on any instance, see this write
            if isinstance(result, Response):
                result.headers.update(headers)
                return result
            return JSONResponse(result, headers=headers)
        except FeedFabricError as error:
            if isinstance(error, BadInput) and client is not None:
                await _spend_refused_body(request, resources, client)
            return JSONResponse({"error": {"code": error.rest_code, "message": error.message}}, error.status, headers)
        except Exception as error:
            if store_unreachable(error):
                log.warning("postgres unreachable on %s %s: %s", request.method, request.url.path, type(error).__name__)
                body = {"code": ServiceUnavailable.rest_code, "message": ServiceUnavailable.message_text}
                return JSONResponse({"error": body}, ServiceUnavailable.status, {"Retry-After": "1"})
            log.exception("unexpected error on %s %s", request.method, request.url.path)
            return JSONResponse({"error": {"code": "internal", "message": "Internal server error."}}, 500)

    return run


async def _spend_refused_body(request: Request, resources: Resources, client: str) -> None:
    """A refused body spends a unit of the cost budget per BYTES_PER_UNIT of its bytes, as GraphQL's refused
    variables do: `PUT /feed-profile` with 960 kB of sources cost one operation where its GraphQL twin cost
    96,000 units."""
    if request.method in ("GET", "HEAD"):
        return
    try:
        size = len(await request.body())  # already read by the handler; an upload's stream is not kept
    except RuntimeError:
        return
    if size >= ratelimit.BYTES_PER_UNIT:
        units = size // ratelimit.BYTES_PER_UNIT
        await ratelimit.spend(resources.redis, resources.settings, resources.rate_windows, client, 0, units)


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit")
    if raw is None:
        return 20
    # isdigit() alone passes "²" and other digits int() refuses.
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 6:
        raise BadInput("limit must be a whole number from 1 to 100")
    return int(raw)


def _cursor(request: Request) -> str | None:
    return request.query_params.get("cursor") or None


async def home(ctx: Context, request: Request) -> dict[str, object]:
    return serialize.feed_page(await reads.home_feed(ctx, _limit(request), _cursor(request)))


async def favourites_feed(ctx: Context, request: Request) -> dict[str, object]:
    return serialize.feed_page(await reads.favourites_feed(ctx, _limit(request), _cursor(request)))


async def tag_feed(ctx: Context, request: Request) -> dict[str, object]:
    tag = request.path_params["tag"]
    return serialize.feed_page(await reads.tag_feed(ctx, tag, _limit(request), _cursor(request)))


async def for_you(ctx: Context, request: Request) -> dict[str, object]:
    result = await foryou_resolvers.for_you(ctx, _limit(request), _cursor(request))
    posts = [
        {**serialize.feed_post(post), "reason": reason.upper(), "score": score}
        for post, reason, score in zip(result.page.posts, result.reasons, result.scores, strict=True)
    ]
    return {
        **serialize.feed_page(result.page, posts),
        "preset": result.preset.upper(),
        "rankedAt": result.ranked_at.isoformat(),
    }


def _profile(profile: Profile) -> dict[str, object]:
    return {
        "preset": profile.preset.upper(),
        "sources": [s.upper() for s in profile.sources],
        "lookbackHours": profile.lookback_hours,
    }


async def feed_profile(ctx: Context, request: Request) -> dict[str, object]:
    if request.method == "GET":
        ctx.viewer.require_member()
        profile = await foryou_resolvers.feed_profile(ctx)
        assert profile is not None  # a member always has one: the default until they choose
        return {"profile": _profile(profile)}
    try:
        body = await request.json()
    except (ValueError, RecursionError):
        raise BadInput("the body must be a JSON object") from None
    if not isinstance(body, dict) or set(body) - {"preset", "sources", "lookbackHours"}:
        raise BadInput("the body takes preset, sources and lookbackHours")
    preset, sources, hours = body.get("preset"), body.get("sources"), body.get("lookbackHours")
    if preset is not None and not isinstance(preset, str):
        raise BadInput("preset must be a string")
    if sources is not None and (not isinstance(sources, list) or not all(isinstance(s, str) for s in sources)):
        raise BadInput("sources must be a list of strings")
    profile = await foryou_resolvers.update_feed_profile(ctx, preset, sources, hours)
    return {"profile": _profile(profile)}


async def mentions(ctx: Context, request: Request) -> dict[str, object]:
    """Posts and comments that mention the viewer; a constant number of statements for any page size."""
    return serialize.mentions_page(await reads.mentions_feed(ctx, _limit(request), _cursor(request)))


async def own_posts(ctx: Context, request: Request) -> dict[str, object]:
    member = ctx.viewer.require_member()
    q = request.query_params
    order = q.get("order", "newest")
    if order not in ("newest", "oldest"):
        raise BadInput("order must be newest or oldest")
    page = await reads.member_posts(
        ctx,
        member,
        newest_first=order == "newest",
        first=_limit(request),
        after=_cursor(request),
        gt=q.get("gt"),
        gte=q.get("gte"),
        lt=q.get("lt"),
        lte=q.get("lte"),
    )
    return serialize.bare_page(page)


async def follow(ctx: Context, request: Request) -> dict[str, object]:
    target = request.path_params["external_id"]
    if request.method == "PUT":
        member = await writes.follow(ctx, target)
    else:
        member = await writes.unfollow(ctx, target)
    return {"member": serialize.member(member), "following": request.method == "PUT"}


async def favourite(ctx: Context, request: Request) -> dict[str, object]:
    target = request.path_params["external_id"]
    if request.method == "PUT":
        member = await writes.add_favourite(ctx, target)
    else:
        member = await writes.remove_favourite(ctx, target)
    return {"member": serialize.member(member), "favourite": request.method == "PUT"}


async def block(ctx: Context, request: Request) -> dict[str, object]:
    target = request.path_params["external_id"]
    if request.method == "PUT":
        member = await safety.block(ctx, target)
    else:
        member = await safety.unblock(ctx, target)
    return {"member": serialize.member(member), "blocked": request.method == "PUT"}


async def _mute_body(request: Request) -> tuple[bool | None, int | None]:
    """The optional JSON body of PUT /mutes/{id}: `notifications` and `expiresInSeconds`."""
    raw = await request.body()
    if not raw.strip():
        return None, None
    try:
        body = await request.json()
    except (ValueError, RecursionError):
        raise BadInput("the body must be a JSON object") from None
    if not isinstance(body, dict) or set(body) - {"notifications", "expiresInSeconds"}:
        raise BadInput("the body takes notifications and expiresInSeconds")
    notifications, expires = body.get("notifications"), body.get("expiresInSeconds")
    if notifications is not None and not isinstance(notifications, bool):
        raise BadInput("notifications must be true or false")
    if expires is not None and (not isinstance(expires, int) or isinstance(expires, bool)):
        raise BadInput("expiresInSeconds must be a whole number")
    return notifications, expires


async def mute(ctx: Context, request: Request) -> dict[str, object]:
    target = request.path_params["external_id"]
    if request.method == "PUT":
        notifications, expires = await _mute_body(request)
        member = await safety.mute(ctx, target, notifications, expires)
    else:
        member = await safety.unmute(ctx, target)
    return {"member": serialize.member(member), "muted": request.method == "PUT"}


async def blocked_members(ctx: Context, request: Request) -> dict[str, object]:
    return serialize.member_page(await safety.blocked_members(ctx, _limit(request), _cursor(request)))


async def muted_members(ctx: Context, request: Request) -> dict[str, object]:
    return serialize.member_page(await safety.muted_members(ctx, _limit(request), _cursor(request)))


async def favourites(ctx: Context, request: Request) -> dict[str, object]:
    return {"favourites": [serialize.member(m) for m in await reads.favourites(ctx)]}


async def suggested_members(ctx: Context, request: Request) -> dict[str, object]:
    found = await suggestion_resolvers.members(ctx, _limit(request))
    return {"members": [{"member": serialize.member(s.member), "reason": s.reason.upper()} for s in found]}


async def suggested_topics(ctx: Context, request: Request) -> dict[str, object]:
    found = await suggestion_resolvers.topics(ctx, _limit(request))
    return {
        "topics": [{"tag": s.tag, "reason": s.reason.upper(), "recentPostCount": s.recent_post_count} for s in found]
    }


async def upload_media(ctx: Context, request: Request) -> dict[str, object]:
    """POST /media: multipart with a `file` part, or the raw bytes as the body."""
    limit = ctx.settings.media_max_bytes
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        try:
            form = await request.form(max_files=1, max_fields=4)
        except HTTPException as refused:  # more parts than one file, or a malformed body
            raise BadInput(f"send one photo as the multipart part `file` ({refused.detail})") from None
        try:
            data = await media_resolvers.read_upload(form.get("file"), limit)
        finally:
            await form.close()  # its spooled files, on disk past a megabyte
    else:
        data = await request.body()
        if len(data) > limit:
            raise BadInput(f"the upload is over the limit of {limit} bytes")
    row = await media_resolvers.upload(ctx, data)
    return {"media": serialize.media(row)}


async def media_status(ctx: Context, request: Request) -> dict[str, object]:
    return {"media": serialize.media(await media_resolvers.media_item(ctx, request.path_params["media_id"]))}


_MEDIA_HEADERS = {"Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff"}


async def media_file(ctx: Context, request: Request) -> Response:
    """A served file never changes, so a client revalidating with the ETag it holds gets 304, no body
    (FileResponse makes the ETag and answers ranges, but leaves `If-None-Match` to StaticFiles)."""
    path, content_type = await media_resolvers.file_to_serve(ctx, request.path_params["media_id"])
    try:
        stat = await asyncio.to_thread(os.stat, path)
    except FileNotFoundError:
        raise NotFound("media not found") from None
    response = FileResponse(path, media_type=content_type, headers=_MEDIA_HEADERS, stat_result=stat)
    etag = response.headers["etag"]
    held = request.headers.get("if-none-match", "")
    if held.strip() == "*" or etag in (tag.strip().removeprefix("W/") for tag in held.split(",")):
        return Response(status_code=304, headers={**_MEDIA_HEADERS, "ETag": etag})
    return response


def routes() -> list[Route]:
    return [
        Route("/userfeed/home", endpoint(home), methods=["GET"]),
        Route("/userfeed/favourites", endpoint(favourites_feed), methods=["GET"]),
        Route("/userfeed/tags/{tag}/posts", endpoint(tag_feed), methods=["GET"]),
        Route("/userfeed/mentions", endpoint(mentions), methods=["GET"]),
        Route("/userfeed/foryou", endpoint(for_you), methods=["GET"]),
        Route("/feed-profile", endpoint(feed_profile), methods=["GET", "PUT"]),
        Route("/userfeed", endpoint(own_posts), methods=["GET"]),
        Route("/follows/{external_id}", endpoint(follow), methods=["PUT", "DELETE"]),
        Route("/favourites/{external_id}", endpoint(favourite), methods=["PUT", "DELETE"]),
        Route("/favourites", endpoint(favourites), methods=["GET"]),
        Route("/blocks/{external_id}", endpoint(block), methods=["PUT", "DELETE"]),
        Route("/blocks", endpoint(blocked_members), methods=["GET"]),
        Route("/mutes/{external_id}", endpoint(mute), methods=["PUT", "DELETE"]),
        Route("/mutes", endpoint(muted_members), methods=["GET"]),
        Route("/suggestions/members", endpoint(suggested_members), methods=["GET"]),
        Route("/suggestions/topics", endpoint(suggested_topics), methods=["GET"]),
        Route("/media", endpoint(upload_media), methods=["POST"]),
        Route("/reports", endpoint(rest_reports.post_report), methods=["POST"]),
        Route("/media/{media_id}/status", endpoint(media_status), methods=["GET"]),
        # Photo bytes are immutable and fetched by the dozen per page: not operations.
        Route("/media/{media_id}", endpoint(media_file, rate_limited=False), methods=["GET"]),
    ]
