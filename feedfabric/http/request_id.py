"""Every request's ID: taken from a safe X-Request-ID or made, set for the request's logs, echoed back,
and written in one access line."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feedfabric.core.logging import SAFE_ID, access_log, request_id_var

__all__ = ["REQUEST_ID_HEADER", "RequestIdMiddleware"]

REQUEST_ID_HEADER = "x-request-id"  # as ASGI spells header names: lower case
_HEADER = REQUEST_ID_HEADER.encode("latin-1")


def _incoming_id(scope: Scope) -> str:
    for name, value in scope.get("headers") or []:
        if name == _HEADER:
            candidate: str = value.decode("latin-1")
            if SAFE_ID.match(candidate):
                return candidate
    return uuid.uuid4().hex


class RequestIdMiddleware:
    """Sets the request ID for the request's logs, echoes it as X-Request-ID and writes one access line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] == "websocket":
            # Set for the socket's task, which is this call's: its logs carry the ID, and no frame of ours is
            # kept for the socket's life (feedfabric.http).
            request_id_var.set(_incoming_id(scope))
            return self.app(scope, receive, send)
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        return self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = _incoming_id(scope)
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != _HEADER]
                headers.append((_HEADER, request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            access_log.info(
                "%s %s %s",
                scope.get("method"),
                scope.get("path"),
                status,
                extra={
                    "method": scope.get("method"),
                    "path": scope.get("path"),
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                },
            )
            request_id_var.reset(token)
