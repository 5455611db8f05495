"""Domain errors, each with its public code and its REST form (docs/api.md, "Error codes")."""

from __future__ import annotations

__all__ = [
    "BadInput",
    "Blocked",
    "FavouriteLimitReached",
    "FeedFabricError",
    "Forbidden",
    "LimitReached",
    "NotFound",
    "QueryTooComplex",
    "QuotaExceeded",
    "RateLimited",
    "RequestTooLarge",
    "ServiceUnavailable",
    "Unauthenticated",
    "store_unreachable",
]


class FeedFabricError(Exception):
    code = "INTERNAL"
    rest_code = "internal"
    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadInput(FeedFabricError):
    code = "BAD_USER_INPUT"
    rest_code = "request.invalid"
    status = 400


class RequestTooLarge(BadInput):
    """Raised while a body is read (feedfabric.app.BodyLimit), so every reader of a body, REST's or
    Strawberry's, stops at the limit and answers in its own error shape."""

    rest_code = "request.too_large"
    status = 413


class Unauthenticated(FeedFabricError):
    code = "UNAUTHENTICATED"
    rest_code = "auth.unauthenticated"
    status = 401


class Forbidden(FeedFabricError):
    code = "FORBIDDEN"
    rest_code = "auth.forbidden"
    status = 403


class NotFound(FeedFabricError):
    code = "NOT_FOUND"
    rest_code = "resource.not_found"
    status = 404


class FavouriteLimitReached(FeedFabricError):
    code = "FAVOURITE_LIMIT_REACHED"
    rest_code = "favourite.limit_reached"
    status = 409


class Blocked(FeedFabricError):
    """An action between two members when either has blocked the other. It says no more: who blocked
    whom is private."""

    code = "BLOCKED"
    rest_code = "member.blocked"
    status = 403


class LimitReached(FeedFabricError):
    """A list past its cap: a member's muted words, the moderation terms."""

    code = "LIMIT_REACHED"
    rest_code = "limit.reached"
    status = 409


class RateLimited(FeedFabricError):
    code = "RATE_LIMITED"
    rest_code = "rate.limited"
    status = 429


class QueryTooComplex(FeedFabricError):
    code = "QUERY_TOO_COMPLEX"
    rest_code = "query.too_complex"
    status = 400


class QuotaExceeded(FeedFabricError):
    code = "QUOTA_EXCEEDED"
    rest_code = "media.quota_exceeded"
    status = 409


class ServiceUnavailable(FeedFabricError):
    """Postgres could not be reached or did not answer in time (a partition, a failover under way): retry."""

    code = "SERVICE_UNAVAILABLE"
    rest_code = "service.unavailable"
    status = 503
    message_text = "The service could not reach its database; retry shortly."


def store_unreachable(error: BaseException) -> bool:
    """Whether `error` says Postgres is out of reach rather than that the request is wrong: the connection
    failed or was lost, a statement timed out, or the server is a standby or shutting down. Such failures
    answer SERVICE_UNAVAILABLE (503), which clients retry, instead of an internal error."""
    import asyncpg

    unreachable = (
        OSError,
        TimeoutError,
        asyncpg.InterfaceError,
        asyncpg.ConnectionDoesNotExistError,
        asyncpg.CannotConnectNowError,
        asyncpg.ClientCannotConnectError,
        asyncpg.TargetServerAttributeNotMatched,
        asyncpg.ReadOnlySQLTransactionError,
        asyncpg.AdminShutdownError,
        asyncpg.ConnectionFailureError,
        # asyncpg's pool releasing a connection that its failed query cancellation already terminated.
        asyncpg.InternalClientError,
    )
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, unreachable):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
