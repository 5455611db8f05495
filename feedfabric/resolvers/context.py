"""The per-request context: the viewer, the app's resources (feedfabric.resources) and what one request reads."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import asyncpg
from starlette.requests import HTTPConnection
from starlette.responses import Response

from feedfabric.core.settings import Settings
from feedfabric.db.loaders import Loaders
from feedfabric.feeds.relations import Relations, relations_of
from feedfabric.feeds.viewer import Viewer, ViewerResult
from feedfabric.resources import Resources

__all__ = ["Context", "build_context", "note_write", "route_reads"]


class SocketCloser(Protocol):
    """A WebSocket's side of the context (the adapter's Connection): a subscription cut off closes it."""

    async def close(self, code: int, reason: str = "") -> None: ...


@dataclass
class Context:
    """Per request, or per WebSocket: then it lives as long as the socket, through many events.

    Loaders are made on first use, not with the context: a socket holding an
    idle subscription never needs any, and an event whose rendering is shared
    with other subscribers (feedfabric.adapter.execution) never touches them.
    """

    resources: Resources
    viewer_result: ViewerResult
    # The HTTP request or the WebSocket; None where the domain runs without one (tools, tests).
    request: HTTPConnection | None = None
    # The HTTP response (its headers are Strawberry's to set), or the socket a subscription may close.
    response: Response | SocketCloser | None = None
    connection_params: dict[str, Any] | None = None
    # Where this request's feed pages, hydration and lists are read (set by `route_reads`); None: the primary.
    read_from: asyncpg.Pool | None = None
    # An HTTP request that named no operation (feedfabric.adapter.graphql_http): its document must then hold only one.
    # Strawberry's execution context reports the first operation's name either way.
    operation_unnamed: bool = False
    _loaders: Loaders | None = field(default=None, repr=False)
    _prime: Callable[[Loaders], None] | None = field(default=None, repr=False)
    _relations: Relations | None = field(default=None, repr=False)
    # Set once this request changed the viewer's relations: its version read at the start is behind.
    _relations_changed: bool = field(default=False, repr=False)
    # Set on a socket's first event (reset_loaders): its viewer's version is the one read at connection.
    _per_event: bool = field(default=False, repr=False)

    @property
    def viewer(self) -> Viewer:
        return self.viewer_result.get()

    @property
    def settings(self) -> Settings:
        return self.resources.settings

    @property
    def pool(self) -> asyncpg.Pool:
        return self.resources.pool

    @property
    def read_pool(self) -> asyncpg.Pool:
        """Reads that may lag (feedfabric.db.replica): the replica when this request may use it."""
        return self.read_from or self.resources.pool

    def read_primary(self) -> None:
        """From now on this request reads the primary (it writes: a mutation returns what it wrote)."""
        self.read_from = None
        self._loaders = None

    @property
    def loaders(self) -> Loaders:
        if self._loaders is None:
            member = self.viewer_result.viewer.member
            self._loaders = Loaders(self.read_pool, member.id if member else None)
            if self._prime is not None:
                self._prime(self._loaders)
                self._prime = None
        return self._loaders

    async def relations(self) -> Relations:
        """The viewer's blocks, mutes and muted words (feeds.relations), read at most once a request and
        only when the request's version is newer than what this process holds; from the primary, so
        a change is seen on the next read whichever instance made it."""
        if self._relations is None:
            viewer = self.viewer_result.viewer
            member = viewer.member
            if self._per_event and member is not None:
                self._relations = await self._current_relations(member.id)
            else:
                version = None if self._relations_changed else viewer.relations_version
                self._relations = await relations_of(
                    self.pool, member.id if member else None, version, self.resources.relations
                )
        return self._relations

    def relations_changed(self) -> None:
        """This request changed the viewer's relations: what it reads next reflects the change."""
        self._relations = None
        self._relations_changed = True

    def reset_loaders(self, prime: Callable[[Loaders], None] | None = None) -> None:
        """A subscription sends many events over one socket: each gets loaders of its own (made when first
        used, then filled by `prime`), and reads the viewer's relations again, so nothing is cached across
        events or viewers (a live item's `viewerBlocks` is as of the item, not of the connection)."""
        self._loaders = None
        self._prime = prime
        self._relations = None
        self._per_event = True

    async def _current_relations(self, member_id: uuid.UUID) -> Relations:
        """An event's relations of the viewer: the process's entry, which the realtime consumer keeps
        current (each change's event makes every instance forget it; the delivery of an item reads it again
        when the follower's version moved), else read from the primary. The socket's own version, read when
        it connected, would let an older entry stand."""
        cache = self.resources.relations
        held = cache.peek(member_id)
        return held if held is not None else await relations_of(self.pool, member_id, None, cache)


def build_context(resources: Resources, viewer_result: ViewerResult, **kwargs: Any) -> Context:
    return Context(resources=resources, viewer_result=viewer_result, **kwargs)


async def route_reads(ctx: Context) -> None:
    """Sends this request's lag-tolerant reads to the replica when the viewer may read it (never a refused
    token's: its error comes from the primary's view)."""
    reads = ctx.resources.reads
    if reads is None or reads.replica is None:
        return
    ctx.read_from = await reads.pool_for(_writer_key(ctx))


async def note_write(ctx: Context) -> None:
    """After a member's write committed: their next reads, on any instance, see it."""
    reads = ctx.resources.reads
    key = _writer_key(ctx)
    if reads is not None and key is not None:
        await reads.wrote(key)


def _writer_key(ctx: Context) -> str | None:
    """Whom a write mark is for: the token's subject, so a member's first write (creating their profile,
    when no member existed to name) counts as theirs too. None: anonymous, or a refused token."""
    if ctx.viewer_result.error is not None:
        return None
    claims = ctx.viewer_result.viewer.claims
    return claims.external_id if claims is not None else None
