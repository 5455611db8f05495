"""Which pages may open a socket: browsers apply no CORS to a WebSocket handshake, so the `Origin` header
is checked before the socket is accepted (cross-site WebSocket hijacking).

A handshake without an `Origin` (not a browser) or from the same origin is allowed; another origin only
when listed in WS_ALLOWED_ORIGINS (`*` for any). A refused handshake is answered with HTTP 403.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from strawberry.http.websocket_origin import is_same_origin, normalize_origin

__all__ = ["Origins"]


class Origins:
    """The allowed cross-origin pages, normalised once (Strawberry's `normalize_origin`: lowercase, no
    default port, as browsers send them)."""

    def __init__(self, allowed: Iterable[str]) -> None:
        listed = [o.strip() for o in allowed if o.strip()]
        self.any = "*" in listed
        self.allowed = frozenset(n for o in listed if o != "*" and (n := normalize_origin(o)) is not None)

    def allows(self, headers: Mapping[str, str]) -> bool:
        origin = headers.get("origin")
        if origin is None or headers.get("sec-fetch-site") == "same-origin":
            return True
        normalized = normalize_origin(origin)
        if normalized is None:
            return False
        if is_same_origin(normalized, headers.get("host")):
            return True
        return self.any or normalized in self.allowed
