"""auth.TokenCache: verified tokens are not re-verified, but never outlive their expiry or their secret."""

import time

import jwt
import pytest
from feedfabric.core import auth
from feedfabric.core.auth import TokenCache, issue_token
from feedfabric.core.errors import Unauthenticated

SECRET = "s3cret-" + "x" * 32  # PyJWT warns of HMAC keys under 32 bytes


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    verify = auth.verify_token

    def counted(secret: str, token: str, max_lifetime: float | None = None) -> tuple[auth.Claims, float]:
        calls.append(token)
        return verify(secret, token, max_lifetime)

    monkeypatch.setattr(auth, "verify_token", counted)
    return calls


def test_a_token_is_verified_once_while_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch)
    cache = TokenCache()
    token = issue_token(SECRET, "maya", admin=True)
    for _ in range(3):
        claims = cache.decode(SECRET, token)
        assert (claims.external_id, claims.is_admin) == ("maya", True)
    assert len(calls) == 1


def test_a_cached_token_is_refused_once_expired(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    cache = TokenCache(clock=clock)
    token = issue_token(SECRET, "maya", ttl=60)
    assert cache.decode(SECRET, token).external_id == "maya"
    clock.now += 59
    assert cache.decode(SECRET, token).external_id == "maya"
    clock.now += 2  # past exp by the cache's clock: the entry goes, and PyJWT (real clock) decides afresh
    monkeypatch.setattr(jwt, "decode", lambda *a, **k: (_ for _ in ()).throw(jwt.ExpiredSignatureError()))
    with pytest.raises(Unauthenticated, match="expired"):
        cache.decode(SECRET, token)
    assert len(cache) == 0


def test_an_expired_token_is_never_cached() -> None:
    cache = TokenCache()
    with pytest.raises(Unauthenticated, match="expired"):
        cache.decode(SECRET, issue_token(SECRET, "maya", ttl=-5))
    assert len(cache) == 0


def test_a_token_is_checked_against_each_secret() -> None:
    cache = TokenCache()
    token = issue_token(SECRET, "maya")
    assert cache.decode(SECRET, token).external_id == "maya"
    with pytest.raises(Unauthenticated, match="invalid"):
        cache.decode("another-secret-" + "x" * 32, token)
    with pytest.raises(Unauthenticated, match="invalid"):
        cache.decode(SECRET, token[:-2] + ("AA" if not token.endswith("AA") else "BB"))


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch)
    cache = TokenCache(max_entries=3)
    tokens = [issue_token(SECRET, f"m{i}") for i in range(5)]
    for token in tokens:
        cache.decode(SECRET, token)
    assert len(cache) == 3
    cache.decode(SECRET, tokens[-1])  # still held
    assert len(calls) == 5
    cache.decode(SECRET, tokens[0])  # evicted: verified again
    assert len(calls) == 6


def test_a_token_whose_expiry_is_a_string_is_refused() -> None:
    token = jwt.encode({"sub": "maya", "exp": str(int(time.time()) + 60)}, SECRET, algorithm="HS256")
    with pytest.raises(Unauthenticated):
        auth.TokenCache().decode(SECRET, token)
