"""A viewer's relations, read once per change: blocks both ways, mutes, and the compiled muted words.

Postgres holds them (db.relations) and names each state by
members.relations_version, which the viewer lookup of every request reads with
the member (feeds.viewer). This process keeps the relations of recently seen
members in a bounded LRU, each entry tagged with its version and with the
earliest expiry among its mutes and words: an entry is used while its version
is at least the one the request read and no expiry has passed, so a page
reads them at most once, a change made on any API instance is seen on the
next read anywhere, and an expired mute or word ends on time without a write.

The post rules themselves (blocks both ways, mutes) are applied by Postgres
in visible_posts / feed_posts (migration 320), where they keep SQL pages full;
what only this process can apply is the muted-word matcher (feeds.matcher),
and set membership where no statement runs (live delivery, notifications).
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from time import monotonic

from feedfabric.db import relations as relations_db
from feedfabric.db.executor import Executor
from feedfabric.feeds.matcher import EMPTY, Matcher, Phrase, context_mask

# Members whose relations one API process keeps (each a few sets and one automaton).
CACHE_SIZE = 4096


@dataclass(frozen=True)
class Relations:
    member_id: uuid.UUID | None
    version: int = -1
    blocked: frozenset[uuid.UUID] = frozenset()
    blocked_by: frozenset[uuid.UUID] = frozenset()
    # Muted members, and those of them muted with notifications.
    muted: frozenset[uuid.UUID] = frozenset()
    muted_notifying: frozenset[uuid.UUID] = frozenset()
    matcher: Matcher = EMPTY
    # monotonic() past which an expiry has passed: the entry must be read again.
    valid_until: float = float("inf")
    hidden: frozenset[uuid.UUID] = field(default=frozenset())

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", self.blocked | self.blocked_by)

    @property
    def empty(self) -> bool:
        return not (self.hidden or self.muted or self.matcher.contexts)

    def blocks_either_way(self, other: uuid.UUID) -> bool:
        return other in self.hidden

    def hides_author(self, author_id: uuid.UUID, *, feed: bool) -> bool:
        """A post of `author_id` (or a repost of one): blocked either way anywhere; muted in feeds."""
        return author_id in self.hidden or (feed and author_id in self.muted)

    def hides_actor(self, actor_id: uuid.UUID) -> bool:
        """A notification's actor: blocked either way, or muted with notifications."""
        return actor_id in self.hidden or actor_id in self.muted_notifying

    def hides_text(self, texts: Iterable[str], context: str, author_id: uuid.UUID | None = None) -> bool:
        """Whether a muted word given `context` occurs in `texts`; never for the viewer's own."""
        if author_id is not None and author_id == self.member_id:
            return False
        return self.matcher.matches(texts, context)


NONE = Relations(None)


def compile_rows(member_id: uuid.UUID, rows: relations_db.RelationRows) -> Relations:
    """The rows of one version as the in-memory entry: sets, the one matcher, the earliest expiry."""
    expiries = [e for _, _, e in rows.muted if e is not None] + [w.expires_at for w in rows.words if w.expires_at]
    valid_until = float("inf")
    if expiries:
        left: timedelta = min(expiries) - rows.now
        valid_until = monotonic() + max(left.total_seconds(), 0.0)
    matcher = Matcher(Phrase(w.phrase, w.whole_word, context_mask(w.contexts)) for w in rows.words)
    return Relations(
        member_id=member_id,
        version=rows.version,
        blocked=frozenset(rows.blocked),
        blocked_by=frozenset(rows.blocked_by),
        muted=frozenset(m for m, _, _ in rows.muted),
        muted_notifying=frozenset(m for m, n, _ in rows.muted if n),
        matcher=matcher,
        valid_until=valid_until,
    )


class RelationsCache:
    """Bounded, least recently used first out; shared by the requests of one process."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[uuid.UUID, Relations] = OrderedDict()
        self._lock = threading.Lock()
        self.loads = 0

    def get(self, member_id: uuid.UUID, version: int) -> Relations | None:
        with self._lock:
            entry = self._entries.get(member_id)
            if entry is None or entry.version < version or monotonic() >= entry.valid_until:
                return None
            self._entries.move_to_end(member_id)
            return entry

    def put(self, entry: Relations) -> None:
        if entry.member_id is None:
            return
        with self._lock:
            current = self._entries.get(entry.member_id)
            if current is not None and current.version > entry.version:
                return
            self._entries[entry.member_id] = entry
            self._entries.move_to_end(entry.member_id)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def forget(self, member_id: uuid.UUID) -> None:
        with self._lock:
            self._entries.pop(member_id, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


CACHE = RelationsCache()


async def relations_of(conn: Executor, member_id: uuid.UUID | None, version: int | None = None) -> Relations:
    """The member's relations at `version` or newer (None: whatever Postgres holds now)."""
    if member_id is None:
        return NONE
    if version == 0:
        return Relations(member_id, 0)  # never had a relation, on either side: nothing to read
    if version is not None:
        cached = CACHE.get(member_id, version)
        if cached is not None:
            return cached
    rows = await relations_db.load(conn, member_id)
    CACHE.loads += 1
    entry = compile_rows(member_id, rows)
    CACHE.put(entry)
    return entry
