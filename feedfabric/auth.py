"""HS256 bearer tokens: `sub` is the member's external ID, `role: admin` grants moderation."""

from __future__ import annotations

import time
from dataclasses import dataclass

import jwt

from feedfabric.errors import Unauthenticated

_ALGORITHM = "HS256"


@dataclass(frozen=True)
class Claims:
    external_id: str
    is_admin: bool


def issue_token(secret: str, external_id: str, *, admin: bool = False, ttl: int = 3600) -> str:
    now = int(time.time())
    payload: dict[str, object] = {"sub": external_id, "iat": now, "exp": now + ttl}
    if admin:
        payload["role"] = "admin"
    return jwt.encode(payload, secret, algorithm=_ALGORITHM)


def decode_token(secret: str, token: str) -> Claims:
    try:
        payload = jwt.decode(token, secret, algorithms=[_ALGORITHM], options={"require": ["sub", "exp"]})
    except jwt.ExpiredSignatureError:
        raise Unauthenticated("token expired") from None
    except jwt.PyJWTError:
        raise Unauthenticated("invalid token") from None
    sub = payload.get("sub")
    if not isinstance(sub, str) or not sub or len(sub) > 200 or "\x00" in sub:
        raise Unauthenticated("invalid token")
    return Claims(external_id=sub, is_admin=payload.get("role") == "admin")


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <JWT>` value, or None when there is none."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("expected 'Authorization: Bearer <token>'")
    return token.strip()
