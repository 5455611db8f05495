"""`Idempotency-Key`: a write a client retries with the same key is done once and answered alike.

A mobile client whose request timed out cannot tell whether the post was
made; without a key its retry makes a second one. With the header (as in the
IETF httpapi draft, and Stripe's API) on a POST, PUT, PATCH or DELETE by a
signed-in member, the first request claims the key in Redis for its member,
runs, and leaves its answer there for KEPT_S. A retry of the same request
(method, path, query and body: see Fingerprint) within that time gets the kept answer, marked
`Idempotent-Replayed: true`, and nothing runs again; one with another request
under the key is 422; one while the first still runs is 409 with
`Retry-After`.

Only an answer the retry would not change is kept: a 5xx, a 429 or 401, and a
GraphQL body with an error coded RATE_LIMITED, UNAUTHENTICATED or INTERNAL
(the operation may not have run) free the key for the retry instead. Requests
without a token or without the header pass through untouched. When Redis
cannot answer, the request runs without the guarantee, as every Redis
feature of the API degrades rather than refuses.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

import orjson
from redis.exceptions import RedisError
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feedfabric.core.auth import TokenCache, bearer_token
from feedfabric.core.errors import FeedFabricError
from feedfabric.http.multipart_digest import MultipartDigest
from feedfabric.http.refusal import refusal

__all__ = ["Idempotency"]

log = logging.getLogger("feedfabric.idempotency")

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
KEPT_S = 24 * 3600
# A claim outlives any request the server lets run (uvicorn's and nginx's timeouts are far shorter),
# so a process that dies mid-request frees the key by itself.
CLAIM_S = 120
MAX_KEY = 255
MAX_KEPT_BODY = 256 * 1024
_KEPT_HEADERS = frozenset({b"content-type", b"location"})
_RETRYABLE_CODES = frozenset({"RATE_LIMITED", "UNAUTHENTICATED", "INTERNAL"})
_CLAIMED = b"claimed"


class Idempotency:
    """ASGI middleware (see the module docstring); inside BodyLimit, so a body it reads is bounded."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        headers = Headers(scope=scope) if scope["type"] == "http" and scope["method"] in WRITES else None
        raw_key = headers.get("idempotency-key") if headers is not None else None
        if headers is None or raw_key is None:
            return self.app(scope, receive, send)  # no frame of ours kept for a socket's life (feedfabric.http)
        return self._keyed(scope, receive, send, headers, raw_key)

    async def _keyed(self, scope: Scope, receive: Receive, send: Send, headers: Headers, raw_key: str) -> None:
        key = raw_key.strip()
        if not key or len(key) > MAX_KEY or not all("\x21" <= c <= "\x7e" for c in key):
            invalid = refusal(scope, 400, _BAD_KEY, code="BAD_USER_INPUT", rest_code="request.invalid")
            await invalid(scope, receive, send)
            return
        resources = scope["app"].state.resources
        subject = _subject(headers, resources.settings.jwt_secret, resources.tokens)
        if subject is None or resources.redis is None:
            await self.app(scope, receive, send)
            return
        slot = "idem:{%s}:%s" % (subject, hashlib.sha256(key.encode()).hexdigest()[:32])  # noqa: UP031 - braces are Redis's
        try:
            claimed = await resources.redis.set(slot, _CLAIMED, nx=True, ex=CLAIM_S)
            kept = None if claimed else await resources.redis.get(slot)
        except (RedisError, OSError) as error:
            log.warning("idempotency: Redis did not answer (%s); the request runs unguarded", type(error).__name__)
            await self.app(scope, receive, send)
            return
        if claimed:
            await self._first(scope, receive, send, headers, resources.redis, slot)
        elif kept is None or kept == _CLAIMED:  # None: freed between the two commands; the client may retry
            busy = refusal(
                scope, 409, _IN_PROGRESS, code="CONFLICT", rest_code="request.in_progress", headers={"Retry-After": "1"}
            )
            await busy(scope, receive, send)
        else:
            await self._replay(scope, receive, send, headers, json.loads(kept))

    async def _first(  # noqa: PLR0917
        self, scope: Scope, receive: Receive, send: Send, headers: Headers, redis: Any, slot: str
    ) -> None:
        """Runs the request, fingerprinting its body as the app reads it and keeping its answer."""
        fingerprint = Fingerprint.of(scope, headers)
        answer: dict[str, Any] = {"headers": [], "body": bytearray()}
        # A request without a body has been read whole before the app reads anything.
        read_whole = headers.get("content-length", "0") == "0" and "transfer-encoding" not in headers

        async def reading() -> Message:
            nonlocal read_whole
            message = await receive()
            if message["type"] == "http.request":
                fingerprint.add(message.get("body", b""))
                read_whole = not message.get("more_body", False)
            return message

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                answer["headers"] = [(k, v) for k, v in message.get("headers", []) if k.lower() in _KEPT_HEADERS]
            elif message["type"] == "http.response.body":
                answer["body"] += message.get("body", b"")
            await send(message)

        kept: str | None = None
        try:
            await self.app(scope, reading, sending)
            if _final(answer) and read_whole:  # else the fingerprint is not the whole body's
                kept = _encode(fingerprint.hexdigest(), answer)
        finally:
            # Whatever ended the request (the app raised, the client left, the answer could not be
            # encoded), a key not kept is freed: a claim left behind would answer 409 for CLAIM_S.
            try:
                if kept is not None:
                    await redis.set(slot, kept, ex=KEPT_S)
                else:
                    await redis.delete(slot)
            except (RedisError, OSError) as error:
                log.warning("idempotency: could not keep the answer (%s)", type(error).__name__)

    async def _replay(  # noqa: PLR0917
        self, scope: Scope, receive: Receive, send: Send, headers: Headers, kept: dict[str, Any]
    ) -> None:
        fingerprint = Fingerprint.of(scope, headers)
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            fingerprint.add(message.get("body", b""))
            if not message.get("more_body", False):
                break
        if fingerprint.hexdigest() != kept["fingerprint"]:
            reused = refusal(scope, 422, _REUSED, code="BAD_USER_INPUT", rest_code="request.key_reused")
            await reused(scope, receive, send)
            return
        answered = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in kept["headers"]]
        answered.append((b"idempotent-replayed", b"true"))
        await send({"type": "http.response.start", "status": kept["status"], "headers": answered})
        await send({"type": "http.response.body", "body": base64.b64decode(kept["body"])})


_BAD_KEY = "Idempotency-Key must be 1 to 255 visible ASCII characters."
_IN_PROGRESS = "A request with this Idempotency-Key is still running; retry shortly."
_REUSED = "This Idempotency-Key was used for a different request."


def _subject(headers: Headers, secret: str, tokens: TokenCache) -> str | None:
    """The token's member (external ID), or None when there is no valid token (the app then refuses)."""
    try:
        token = bearer_token(headers.get("authorization"))
        return tokens.decode(secret, token).external_id if token is not None else None
    except FeedFabricError:
        return None


@dataclass
class Fingerprint:
    """What a retry must repeat: method, path, query and body. A JSON body is compared as the value it
    holds (keys sorted), since a client may serialise its retry afresh; a multipart body, whose boundary
    differs on every retry, part by part (feedfabric.http.multipart_digest); any other body byte for byte."""

    digest: Any
    body: str
    chunks: list[bytes] = field(default_factory=list)
    parts: MultipartDigest | None = None

    @classmethod
    def of(cls, scope: Scope, headers: Headers) -> Fingerprint:
        digest = hashlib.sha256()
        for part in (scope["method"].encode(), scope["path"].encode(), scope.get("query_string", b"")):
            digest.update(len(part).to_bytes(4, "big") + part)
        content_type = headers.get("content-type", "")
        if content_type.startswith("multipart/"):
            return cls(digest, "multipart", parts=MultipartDigest(content_type))
        return cls(digest, "json" if "json" in content_type else "raw")

    def add(self, chunk: bytes) -> None:
        if self.parts is not None:
            self.parts.add(chunk)
        elif self.body == "json":
            self.chunks.append(chunk)
        else:
            self.digest.update(chunk)

    def hexdigest(self) -> str:
        """Never raises: a body that is not JSON, or nested past what orjson reads (1,024 levels) or
        writes (254), is compared byte for byte, so a deep body neither recurses nor goes unguarded."""
        if self.parts is not None:
            self.digest.update(self.parts.hexdigest().encode())
        elif self.body == "json":
            raw = b"".join(self.chunks)
            try:
                canonical = orjson.dumps(orjson.loads(raw), option=orjson.OPT_SORT_KEYS)
            except (orjson.JSONDecodeError, orjson.JSONEncodeError):
                canonical = raw
            self.digest.update(canonical)
        return str(self.digest.hexdigest())


def _final(answer: dict[str, Any]) -> bool:
    """Whether a retry would get the same answer (see the module docstring)."""
    status = answer.get("status", 500)
    if status >= 500 or status in (401, 429) or len(answer["body"]) > MAX_KEPT_BODY:
        return False
    if not any(k.lower() == b"content-type" and b"json" in v for k, v in answer["headers"]):
        return True
    try:
        errors = json.loads(answer["body"]).get("errors") or []
    except (ValueError, AttributeError):
        return True
    return not any((e.get("extensions") or {}).get("code") in _RETRYABLE_CODES for e in errors if isinstance(e, dict))


def _encode(fingerprint: str, answer: dict[str, Any]) -> str:
    return json.dumps(
        {
            "fingerprint": fingerprint,
            "status": answer["status"],
            "headers": [(k.decode("latin-1"), v.decode("latin-1")) for k, v in answer["headers"]],
            "body": base64.b64encode(answer["body"]).decode(),
        }
    )
