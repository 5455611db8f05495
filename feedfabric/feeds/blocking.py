"""BLOCKED on any interaction between two members when either blocks the other.

A block (feeds.safety) and an interaction of the same pair take one advisory
lock of that pair, exclusive for the block and shared for interactions, so an
interaction checked before a block commits cannot commit after it: either the
block waits and then ends what the interaction made (a follow, a favourite),
or the interaction waits and is refused.
"""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.core.errors import Blocked
from feedfabric.db import relations as relations_db


async def ensure_not_blocked(conn: asyncpg.Connection, actor_id: uuid.UUID, other_id: uuid.UUID) -> None:
    """BLOCKED when either member blocks the other; holds the pair's shared lock until commit, so a block
    racing this interaction commits after it (and ends what it made) or before it (and refuses it)."""
    if actor_id == other_id:
        return
    await relations_db.lock_pair(conn, actor_id, other_id, exclusive=False)
    if await relations_db.blocked_either_way(conn, actor_id, other_id):
        raise Blocked("you cannot interact with this member")
