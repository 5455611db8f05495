"""WebSocket authentication for /graphql, shared by both subscription protocols.

The token comes from the `connection_init` payload (`{"authorization": "Bearer
..."}`), else from the upgrade request's Authorization header. A socket
without a valid token is closed with 4403 before any operation runs, so it
learns nothing: graphql-transport-ws defines 4403 Forbidden; the legacy
graphql-ws protocol has no such code, so it gets its `connection_error`
message and then the same 4403 close (strawberry's default there is a bare
1011, which reads as a server fault).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from strawberry.exceptions import ConnectionRejectionError
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler

from feedfabric.feeds.viewer import resolve_viewer

if TYPE_CHECKING:
    from feedfabric.context import Context

FORBIDDEN = 4403


def _authorization(context: Context) -> str | None:
    params = context.connection_params if isinstance(context.connection_params, dict) else {}
    for key in ("authorization", "Authorization"):
        value = params.get(key)
        if isinstance(value, str):
            return value
    request = context.request
    headers = getattr(request, "headers", None)
    return headers.get("authorization") if headers is not None else None


async def authenticate(context: Context) -> None:
    """Resolves the socket's viewer from the token; raises ConnectionRejectionError without a valid one."""
    resources = context.resources
    result = await resolve_viewer(resources.pool, resources.settings, _authorization(context))
    if result.error is not None or result.viewer.claims is None:
        message = str(result.error) if result.error is not None else "sign in first: send a bearer token"
        raise ConnectionRejectionError({"message": message, "code": "UNAUTHENTICATED"})
    context.viewer_result = result
    context.reset_loaders()  # the viewer changed: loaders made from now on are theirs


class LegacyGraphQLWSHandler(BaseGraphQLWSHandler[Any, Any]):
    """graphql-ws (subscriptions-transport-ws) with the forbidden close of graphql-transport-ws."""

    async def handle_connection_init(self, message: Any) -> None:
        payload = message.get("payload")
        if isinstance(payload, dict) or payload is None:
            self.context.connection_params = payload
            try:
                await authenticate(self.context)
            except ConnectionRejectionError as rejected:
                await self.send_message({"type": "connection_error", "payload": rejected.payload})
                await self.websocket.close(code=FORBIDDEN, reason="Forbidden")
                return
        await super().handle_connection_init(message)
