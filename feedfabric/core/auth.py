"""HS256 bearer tokens: `sub` is the member's external ID, `role: admin` grants moderation."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import jwt

from feedfabric.core.errors import Unauthenticated

__all__ = ["Claims", "TokenCache", "bearer_token", "issue_token", "verify_token"]

_ALGORITHM = "HS256"


@dataclass(frozen=True)
class Claims:
    external_id: str
    is_admin: bool
    # The token's `exp` (Unix seconds): an open WebSocket is closed when it passes (feedfabric.realtime.sessions).
    expires_at: float = float("inf")


def issue_token(secret: str, external_id: str, *, admin: bool = False, ttl: int = 3600) -> str:
    now = int(time.time())
    payload: dict[str, object] = {"sub": external_id, "iat": now, "exp": now + ttl}
    if admin:
        payload["role"] = "admin"
    return jwt.encode(payload, secret, algorithm=_ALGORITHM)


def verify_token(secret: str, token: str, max_lifetime: float | None = None) -> tuple[Claims, float]:
    """The token's claims and its expiry (Unix seconds), or Unauthenticated. A token whose `exp` is more
    than `max_lifetime` seconds away (JWT_MAX_LIFETIME_SECONDS) is refused: an `exp` in the year 3000 made
    a leaked token good for ever."""
    try:
        payload = jwt.decode(token, secret, algorithms=[_ALGORITHM], options={"require": ["sub", "exp"]})
    except jwt.ExpiredSignatureError:
        raise Unauthenticated("token expired") from None
    except jwt.PyJWTError:
        raise Unauthenticated("invalid token") from None
    sub = payload.get("sub")
    if not isinstance(sub, str) or not sub or len(sub) > 200 or "\x00" in sub:
        raise Unauthenticated("invalid token")
    exp = payload["exp"]
    # RFC 7519 makes `exp` a number; PyJWT also takes a numeric string.
    if isinstance(exp, bool) or not isinstance(exp, int | float) or not math.isfinite(exp):
        raise Unauthenticated("invalid token")
    expires = float(exp)
    if max_lifetime is not None and expires - time.time() > max_lifetime:
        raise Unauthenticated(f"token lifetime longer than the {int(max_lifetime)} s allowed")
    return Claims(external_id=sub, is_admin=payload.get("role") == "admin", expires_at=expires), expires


class TokenCache:
    """Verified tokens, so a client sending the same bearer token on every request is not re-verified each time.

    PyJWT's verification (HMAC, JSON, claim checks) was a measurable share of
    a home-feed page's CPU. An entry is kept only for a token that verified,
    keyed by the secret too (a new secret never meets old entries), and is
    served only while the token is unexpired: PyJWT rejects once `exp <= now`,
    and so does this. The other time claims (`nbf`, `iat`) can only become
    more valid with time, so a token that passed once stays valid until `exp`.
    Bounded: the oldest entry goes when full.
    """

    def __init__(self, max_entries: int = 2048, clock: Callable[[], float] = time.time) -> None:
        self.max_entries = max_entries
        self._clock = clock
        self._entries: dict[tuple[str, str, float | None], tuple[Claims, float]] = {}

    def decode(self, secret: str, token: str, max_lifetime: float | None = None) -> Claims:
        key = (secret, token, max_lifetime)
        hit = self._entries.get(key)
        if hit is not None:
            if self._clock() < hit[1]:
                return hit[0]
            del self._entries[key]
        claims, expires = verify_token(secret, token, max_lifetime)
        if self._clock() >= expires:  # valid when PyJWT looked, no longer: answer, do not keep
            return claims
        if len(self._entries) >= self.max_entries:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (claims, expires)
        return claims

    def __len__(self) -> int:
        return len(self._entries)


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <JWT>` value, or None when there is none."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("expected 'Authorization: Bearer <token>'")
    return token.strip()
