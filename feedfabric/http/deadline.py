"""REQUEST_TIMEOUT_SECONDS: an HTTP request still running past it ends with 503 SERVICE_UNAVAILABLE.

A store that stops answering (a partition leaves a query waiting on a
connection no packet reaches) must not hold a client, or a balancer's slot,
for as long as TCP takes to give up. The request's task is cancelled, so its
queries are cancelled with it and its transaction rolls back; the client gets
a clear, retryable error in the shape of the route it called (GraphQL's
`errors` with `extensions.code`, or REST's `error.code`). A response already
started cannot be replaced: the connection is closed instead. WebSockets
are not bounded (subscriptions are long-lived by design).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feedfabric.core.errors import store_unreachable

__all__ = ["RequestDeadline"]

log = logging.getLogger("feedfabric.deadline")

GRAPHQL_CODE = "SERVICE_UNAVAILABLE"
REST_CODE = "service.unavailable"
MESSAGE = "The service could not answer in time; retry shortly."


class RequestDeadline:
    def __init__(self, app: ASGIApp, seconds: float, graphql_path: str = "/graphql") -> None:
        self.app = app
        self.seconds = seconds
        self.graphql_path = graphql_path

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] != "http":
            return self.app(scope, receive, send)  # no frame of ours kept for a socket's life (feedfabric.http)
        return self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        deadline = asyncio.timeout(self.seconds if self.seconds > 0 else None)
        try:
            async with deadline:
                await self.app(scope, receive, tracking)
        except Exception as error:
            # Past the deadline, whatever the cancelled request raised on its way out (a driver may turn the
            # cancellation into an error of its own) is the timeout. Before it, a database out of reach that
            # no handler answered (while the request's viewer was being resolved, say) is the same 503.
            timed_out = isinstance(error, TimeoutError) or deadline.expired()
            if started or not (timed_out or store_unreachable(error)):
                raise
            if timed_out:
                log.warning("request past REQUEST_TIMEOUT_SECONDS (%.1fs): %s", self.seconds, scope.get("path"))
            else:
                log.warning("postgres unreachable on %s: %s", scope.get("path"), type(error).__name__)
            await send_unavailable(scope, send, scope.get("path") == self.graphql_path)


async def send_unavailable(scope: Scope, send: Send, graphql: bool) -> None:
    body: dict[str, object]
    if graphql:
        body = {"errors": [{"message": MESSAGE, "extensions": {"code": GRAPHQL_CODE}}]}
    else:
        body = {"error": {"code": REST_CODE, "message": MESSAGE}}
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"retry-after", b"1")]
    headers.append((b"content-length", str(len(payload)).encode()))
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
