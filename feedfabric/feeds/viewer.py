"""Who is asking: the signed-in member behind a bearer token, resolved once per request."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg

from feedfabric.core.auth import Claims, TokenCache, bearer_token
from feedfabric.core.errors import FeedFabricError, Forbidden, Unauthenticated
from feedfabric.core.models import Member
from feedfabric.core.settings import Settings
from feedfabric.db import members as members_db
from feedfabric.db.outbox import add_event
from feedfabric.db.pool import transaction

__all__ = ["Viewer", "ViewerResult", "resolve_viewer"]

# last_seen_at is written at most this often, so reading does not write on every request.
SEEN_GRANULARITY = timedelta(hours=1)


@dataclass(frozen=True)
class Viewer:
    claims: Claims | None = None
    member: Member | None = None
    # Set when the member came back after INACTIVE_AFTER_DAYS: their timeline is being rebuilt.
    returning: bool = False
    # The home feed's owed mark kept in Postgres, read with the member (feeds.timelines.owed): the newest post
    # a first page served while Redis could not take the mark.
    home_owed: uuid.UUID | None = None
    # The version of the member's relations (blocks, mutes, muted words), read with the member: the
    # relations a process holds are used while at least this new (feeds.relations).
    relations_version: int = 0

    def require_claims(self) -> Claims:
        if self.claims is None:
            raise Unauthenticated("sign in first: send 'Authorization: Bearer <token>'")
        return self.claims

    def require_member(self) -> Member:
        self.require_claims()
        if self.member is None:
            raise Forbidden("create your profile first with upsertProfile")
        return self.member

    def require_admin(self) -> Member:
        member = self.require_member()
        assert self.claims is not None
        if not self.claims.is_admin:
            raise Forbidden("moderation needs an admin token")
        return member


ANONYMOUS = Viewer()


@dataclass(frozen=True)
class ViewerResult:
    """A refused token is not an anonymous viewer: every resolver re-raises its error."""

    viewer: Viewer
    error: FeedFabricError | None = None

    def get(self) -> Viewer:
        if self.error is not None:
            raise self.error
        return self.viewer


async def resolve_viewer(
    pool: asyncpg.Pool, settings: Settings, tokens: TokenCache, authorization: str | None
) -> ViewerResult:
    """`tokens`: the process's verified bearer tokens (Resources.tokens), so a token is checked once."""
    try:
        token = bearer_token(authorization)
        if token is None:
            return ViewerResult(ANONYMOUS)
        claims = tokens.decode(settings.jwt_secret, token, settings.jwt_max_lifetime_seconds)
        found = await members_db.viewer_by_external_id(pool, claims.external_id)
        if found is None:
            return ViewerResult(Viewer(claims=claims))
        member, home_owed, relations_version = found
        if not member.active:
            raise Unauthenticated("this account is suspended")
        returning = await _note_seen(pool, settings, member)
        return ViewerResult(
            Viewer(
                claims=claims,
                member=member,
                returning=returning,
                home_owed=home_owed,
                relations_version=relations_version,
            )
        )
    except FeedFabricError as error:
        return ViewerResult(ANONYMOUS, error)


async def _note_seen(pool: asyncpg.Pool, settings: Settings, member: Member) -> bool:
    """Tracks last-seen coarsely; a member back from inactivity gets a MemberReturned event."""
    if datetime.now(UTC) - member.last_seen_at < SEEN_GRANULARITY:
        return False
    # Commits here (feeds/__init__.py): recorded on reads too, and kept when the request fails.
    async with transaction(pool) as conn:
        previous = await members_db.touch_seen(conn, member.id, SEEN_GRANULARITY)
        if previous is None:
            return False  # a concurrent request of the same member got there first
        returning = settings.inactive_after_days > 0 and (
            datetime.now(UTC) - previous > timedelta(days=settings.inactive_after_days)
        )
        if returning:
            await add_event(
                conn, "MemberReturned", str(member.id), {"memberId": str(member.id)}, shards=settings.outbox_shards
            )
    return returning
