"""Who is on a socket: the token from the `connection_init` payload (`{"authorization": "Bearer ..."}`),
else from the upgrade request's Authorization header.

A socket without a valid token is closed with 4403 before any operation runs, so it learns nothing
(graphql-transport-ws defines 4403 Forbidden; the legacy protocol, which has no such code, gets its
`connection_error` message and then the same close). A signed-in socket is registered with the
process's sessions (feedfabric.realtime.sessions) for the rest of its life: they close it with 4403 when
its token expires or its member is suspended, and hold each member to WS_MAX_SOCKETS_PER_MEMBER sockets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from feedfabric.feeds.viewer import ViewerResult, resolve_viewer
from feedfabric.realtime.sessions import Close
from feedfabric.resources import Resources

LIMIT_CODE = "RATE_LIMITED"


class Rejected(Exception):
    """No valid token: the socket is closed with 4403; `payload` is the legacy `connection_error`'s."""

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__(payload.get("message"))
        self.payload = payload


class TooManySockets(Exception):
    """The member already holds WS_MAX_SOCKETS_PER_MEMBER open sockets: this one is closed with
    TRY_AGAIN_LATER (1013), which clients retry with backoff, where 4403 would read as a bad token."""


def authorization(params: Mapping[str, Any] | None, headers: Mapping[str, str]) -> str | None:
    for key in ("authorization", "Authorization"):
        value = (params or {}).get(key)
        if isinstance(value, str):
            return value
    return headers.get("authorization")


async def authenticate(
    resources: Resources, params: Mapping[str, Any] | None, headers: Mapping[str, str], key: object, close: Close
) -> ViewerResult:
    """The socket's viewer, registered with the sessions under `key`; Rejected without a valid token,
    TooManySockets past the member's limit."""
    result = await resolve_viewer(resources.pool, resources.settings, resources.tokens, authorization(params, headers))
    if result.error is not None or result.viewer.claims is None:
        message = str(result.error) if result.error is not None else "sign in first: send a bearer token"
        raise Rejected({"message": message, "code": "UNAUTHENTICATED"})
    member = result.viewer.member
    sessions = resources.sessions
    if not await sessions.admit(key, member.id if member else None, result.viewer.claims.expires_at, close):
        raise TooManySockets(
            f"Too many open sockets: at most {sessions.max_per_member} per member; close one and retry"
        )
    return result
