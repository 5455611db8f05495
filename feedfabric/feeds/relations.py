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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from time import monotonic

from feedfabric.db import relations as relations_db
from feedfabric.db.queryable import Queryable
from feedfabric.feeds.matcher import EMPTY, Matcher, Phrase, context_bit, context_mask

__all__ = ["Relations", "RelationsCache", "relations_many", "relations_of"]

# Members whose relations one API process keeps (each a few sets and one automaton).
CACHE_SIZE = 4096


@dataclass(frozen=True)
class Relations:
    """The member sets hold UUIDs as ints: an int is not tracked by the garbage collector, a UUID is, and
    a process holding thousands of members' relations (each with up to 10,000 blocks) would otherwise
    have every full collection walk each of them (measured: +180 ms a collection for 1,000 members of
    100 blocks). Ask with the methods, which take UUIDs."""

    member_id: uuid.UUID | None
    version: int = -1
    blocked: frozenset[int] = frozenset()
    blocked_by: frozenset[int] = frozenset()
    # Muted members, and those of them muted with notifications.
    muted: frozenset[int] = frozenset()
    muted_notifying: frozenset[int] = frozenset()
    matcher: Matcher = EMPTY
    # monotonic() past which an expiry has passed: the entry must be read again.
    valid_until: float = float("inf")
    hidden: frozenset[int] = field(default=frozenset())
    # For live delivery's per-recipient loop, worked out once per entry: the authors whose posts the
    # member's feeds leave out (blocked either way, muted), the one-word phrases of HOME, and whether
    # HOME has phrases only the automaton finds.
    feed_hidden: frozenset[int] = field(default=frozenset())
    home_words: frozenset[str] = field(default=frozenset())
    home_scan: bool = False

    def __post_init__(self) -> None:
        hidden = self.blocked | self.blocked_by
        home = context_bit("HOME")
        object.__setattr__(self, "hidden", hidden)
        object.__setattr__(self, "feed_hidden", hidden | self.muted)
        object.__setattr__(self, "home_words", self.matcher.words_for(home))
        object.__setattr__(self, "home_scan", self.matcher.scans(home))

    @property
    def empty(self) -> bool:
        return not (self.hidden or self.muted or self.matcher.contexts)

    def blocks(self, other: uuid.UUID) -> bool:
        """Whether the member blocks `other` (viewerBlocks)."""
        return other.int in self.blocked

    def mutes(self, other: uuid.UUID) -> bool:
        """Whether the member mutes `other`, unexpired (viewerMutes)."""
        return other.int in self.muted

    def blocks_either_way(self, other: uuid.UUID) -> bool:
        return other.int in self.hidden

    def hides_author(self, author_id: uuid.UUID, *, feed: bool) -> bool:
        """A post of `author_id` (or a repost of one): blocked either way anywhere; muted in feeds."""
        key = author_id.int
        return key in self.hidden or (feed and key in self.muted)

    def hides_actor(self, actor_id: uuid.UUID) -> bool:
        """A notification's actor: blocked either way, or muted with notifications."""
        key = actor_id.int
        return key in self.hidden or key in self.muted_notifying

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
        blocked=frozenset(m.int for m in rows.blocked),
        blocked_by=frozenset(m.int for m in rows.blocked_by),
        muted=frozenset(m.int for m, _, _ in rows.muted),
        muted_notifying=frozenset(m.int for m, n, _ in rows.muted if n),
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

    def peek(self, member_id: uuid.UUID) -> Relations | None:
        """The entry whatever its version, unless an expiry passed: for live delivery, where the events
        of every change (MemberBlocked, ...) make the consumer `forget` what changed."""
        with self._lock:
            entry = self._entries.get(member_id)
            if entry is None or monotonic() >= entry.valid_until:
                return None
            self._entries.move_to_end(member_id)
            return entry

    def peek_many(
        self, member_ids: Iterable[uuid.UUID], versions: Mapping[uuid.UUID, int] | None = None
    ) -> tuple[dict[uuid.UUID, Relations], list[uuid.UUID]]:
        """`peek` of many at once (one lock): the entries held, and the members with none. With `versions`
        (read in the caller's statement), an entry older than its member's is missing too."""
        found: dict[uuid.UUID, Relations] = {}
        missing: list[uuid.UUID] = []
        now = monotonic()
        wanted = versions or {}
        with self._lock:
            entries = self._entries
            for member_id in member_ids:
                entry = entries.get(member_id)
                if entry is None or now >= entry.valid_until or entry.version < wanted.get(member_id, -1):
                    missing.append(member_id)
                else:
                    found[member_id] = entry
        return found, missing

    def forget(self, member_id: uuid.UUID) -> None:
        with self._lock:
            self._entries.pop(member_id, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


async def relations_of(
    conn: Queryable, member_id: uuid.UUID | None, version: int | None, cache: RelationsCache
) -> Relations:
    """The member's relations at `version` or newer (None: whatever Postgres holds now), from `cache` (the
    process's, Resources.relations: made in the lifespan, never module state) when it holds them."""
    if member_id is None:
        return NONE
    if version == 0:
        # Never had a relation, on either side: nothing to read (kept, so live delivery need not read it).
        entry = Relations(member_id, 0)
        cache.put(entry)
        return entry
    if version is not None:
        cached = cache.get(member_id, version)
        if cached is not None:
            return cached
    rows = await relations_db.load(conn, member_id)
    cache.loads += 1
    entry = compile_rows(member_id, rows)
    cache.put(entry)
    return entry


async def relations_many(
    conn: Queryable,
    member_ids: Iterable[uuid.UUID],
    cache: RelationsCache,
    versions: Mapping[uuid.UUID, int] | None = None,
) -> dict[uuid.UUID, Relations]:
    """The relations of many members (every subscriber a live item reaches): those this process holds (at
    `versions` or newer, where given), and the others read in one batch (db.relations.load_many) and kept."""
    found, missing = cache.peek_many(member_ids, versions)
    if missing:
        loaded = await relations_db.load_many(conn, missing)
        cache.loads += len(loaded)
        for member_id, rows in loaded.items():
            entry = compile_rows(member_id, rows)
            cache.put(entry)
            found[member_id] = entry
    return found
