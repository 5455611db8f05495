"""Which pages may open a socket: browsers apply no CORS to a WebSocket handshake, so the `Origin` header
is checked before the socket is accepted (cross-site WebSocket hijacking).

A handshake without an `Origin` (not a browser) or from the same origin is allowed; another origin only
when listed in WS_ALLOWED_ORIGINS (`*` for any). A refused handshake is answered with HTTP 403.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def normalize(origin: str) -> str | None:
    """`scheme://host[:port]` as browsers send it (lowercase, no default port); None for a non-origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    return f"{scheme}://{host}"


class Origins:
    """The allowed cross-origin pages, normalised once."""

    def __init__(self, allowed: Iterable[str]) -> None:
        listed = [o.strip() for o in allowed if o.strip()]
        self.any = "*" in listed
        self.allowed = frozenset(n for o in listed if o != "*" and (n := normalize(o)) is not None)

    def allows(self, headers: Mapping[str, str]) -> bool:
        origin = headers.get("origin")
        if origin is None or headers.get("sec-fetch-site") == "same-origin":
            return True
        normalized = normalize(origin)
        if normalized is None:
            return False
        host = headers.get("host")
        if host is not None and _same_host(normalized, host):
            return True
        return self.any or normalized in self.allowed


def _same_host(origin: str, host: str) -> bool:
    """The page came from the host it connects to (the scheme's default port left out on both sides)."""
    scheme, _, origin_host = origin.partition("://")
    default = _DEFAULT_PORTS.get(scheme)
    if default is not None and host.endswith(f":{default}"):
        host = host[: -len(f":{default}")]
    return origin_host == host.lower()
