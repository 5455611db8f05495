"""Cross-origin access for the public API, and none for the dev sign-in routes.

Starlette's CORSMiddleware answers for every path it wraps. `/dev/token` hands
out tokens (to a loopback caller only, feedfabric.http.playground), so an allowed
origin, or `CORS_ALLOWED_ORIGINS=*`, must not let a page of another origin read
one: requests under DEV_PREFIX skip the middleware, and a browser then refuses
the page the answer (a preflight for them gets the route's own 405).
"""

from __future__ import annotations

from typing import Any

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["CorsExceptDev"]

DEV_PREFIX = "/dev/"


class CorsExceptDev:
    """CORSMiddleware for every path but DEV_PREFIX's; takes CORSMiddleware's keyword arguments."""

    def __init__(self, app: ASGIApp, /, **options: Any) -> None:
        self.app = app
        self.cors = CORSMiddleware(app, **options)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(DEV_PREFIX):
            await self.app(scope, receive, send)
            return
        await self.cors(scope, receive, send)
