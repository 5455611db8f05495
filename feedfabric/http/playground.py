"""The graphql-playground web client at /playground, and its dev-only sign-in routes.

`/playground` serves the package's `playground/` files (plain HTML, CSS and
JavaScript modules; no build step). In the repository they live in
`graphql-playground/` at the top, and `feedfabric/playground` is a symlink to
it; a wheel copies them into the package (pyproject's package-data), so an
installed API serves the same playground as a checkout. It is mounted only
when the folder is there.

`GET /dev/members` and `GET /dev/token?externalId=...` let the playground sign
in as any member. They exist only when FEEDFABRIC_DEV_MODE is on (`feedfabric
dev` sets it) and never in production: otherwise the paths are plain 404s.
Even then they answer only a request from a loopback address whose `Host` is
a loopback name (localhost, 127.0.0.1, [::1]): a web page elsewhere cannot
reach them by DNS rebinding, nor another machine through a forwarded port
(403 `auth.forbidden`). Any process on the machine is a loopback caller, so
the admin's token takes one more thing: the dev stack's own secret
(FEEDFABRIC_DEV_SECRET, which `feedfabric dev` makes and prints in the
playground's URL) in the `X-Dev-Secret` header; without it, or with no secret
configured, it is 403. These paths never carry CORS headers (feedfabric.http.cors),
so no page of another origin can read a token, whatever CORS_ALLOWED_ORIGINS
allows.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from feedfabric.core.auth import issue_token
from feedfabric.core.settings import Settings
from feedfabric.http.static import StaticFolder
from feedfabric.rest.responses import JSONResponse

__all__ = ["ADMIN_EXTERNAL_ID", "PLAYGROUND_DIR", "routes"]

PLAYGROUND_DIR = Path(str(resources.files("feedfabric") / "playground"))
# The demo's moderator signs in with role=admin (feedfabric.ops.demo.ADMIN).
ADMIN_EXTERNAL_ID = "demo-admin"
TOKEN_TTL_SECONDS = 7 * 86_400
MEMBER_LIST_LIMIT = 200


def routes(settings: Settings) -> list[BaseRoute]:
    found: list[BaseRoute] = []
    if PLAYGROUND_DIR.is_dir():
        found.append(Mount("/playground", StaticFolder(directory=PLAYGROUND_DIR, html=True), name="playground"))
    if settings.feedfabric_dev_mode and not settings.feedfabric_production:
        found += [
            Route("/dev/members", loopback_only(dev_members), methods=["GET"]),
            Route("/dev/token", loopback_only(dev_token), methods=["GET"]),
        ]
    return found


LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def on_loopback(request: Request) -> bool:
    """The request names a loopback host and comes from a loopback address."""
    host = request.url.hostname or ""
    client = request.client.host if request.client else ""
    try:
        client_is_loopback = ipaddress.ip_address(client).is_loopback
    except ValueError:
        client_is_loopback = False
    return host.strip("[]").lower() in LOOPBACK_HOSTS and client_is_loopback


def loopback_only(endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    async def guarded(request: Request) -> Response:
        if not on_loopback(request):
            return JSONResponse(
                {"error": {"code": "auth.forbidden", "message": "dev sign-in answers only on a loopback host"}}, 403
            )
        return await endpoint(request)

    return guarded


DEV_SECRET_HEADER = "x-dev-secret"


def holds_dev_secret(request: Request, settings: Settings) -> bool:
    """The request sends the dev stack's secret; never true when none is configured."""
    expected = settings.feedfabric_dev_secret.encode()
    given = request.headers.get(DEV_SECRET_HEADER, "").encode()
    return bool(expected) and hmac.compare_digest(given, expected)


async def dev_members(request: Request) -> Response:
    """Active members for the sign-in picker, demo members first."""
    pool = request.app.state.resources.pool
    rows = await pool.fetch(
        """SELECT external_id, username, display_name FROM members WHERE status = 'active'
           ORDER BY external_id NOT LIKE 'demo-%', username LIMIT $1""",
        MEMBER_LIST_LIMIT,
    )
    return JSONResponse(
        {
            "members": [
                {"externalId": r["external_id"], "username": r["username"], "displayName": r["display_name"]}
                for r in rows
            ]
        }
    )


async def dev_token(request: Request) -> Response:
    """A bearer token for an existing member: `{"token": "..."}`."""
    external_id = request.query_params.get("externalId", "")
    pool = request.app.state.resources.pool
    if not external_id or await pool.fetchval("SELECT 1 FROM members WHERE external_id = $1", external_id) is None:
        return JSONResponse({"error": {"code": "member.not_found", "message": "no such member"}}, 404)
    settings: Settings = request.app.state.resources.settings
    admin = external_id == ADMIN_EXTERNAL_ID
    if admin and not holds_dev_secret(request, settings):
        return JSONResponse(
            {
                "error": {
                    "code": "auth.forbidden",
                    "message": "the admin's token needs the dev stack's secret (X-Dev-Secret, as `feedfabric dev` prints it)",
                }
            },
            403,
        )
    token = issue_token(settings.jwt_secret, external_id, admin=admin, ttl=TOKEN_TTL_SECONDS)
    return JSONResponse({"externalId": external_id, "token": token})
