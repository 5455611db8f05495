"""importBlocks: a list of usernames or external IDs, one a line, blocked in one transaction.

Mastodon's `blocked_accounts.csv` is read as it is exported: one account address a line, or, as its
other exports write them, CSV rows whose first field is the address under a header line (`Account
address,...`). A leading `@` is dropped. Each name is a member's external ID, else their username,
else (an address `user@domain`) the username before the `@` (db.block_import.resolve).

Every effect of `block` happens for the whole list in a fixed number of set-based statements (the
blocks, the follows and favourites ended both ways, the relations versions, the events in one
outbox statement), so an import's cost is linear in its lines. A block's pair lock (feeds.safety) is
not taken per line: tens of thousands of advisory locks would outgrow Postgres's lock table. An
interaction racing the import's commit may land just before it; the visibility rule still hides it.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import asyncpg

from feedfabric.core.errors import BadInput
from feedfabric.core.models import Member
from feedfabric.core.settings import Settings
from feedfabric.db import block_import as import_db
from feedfabric.db import relations as relations_db
from feedfabric.db.outbox import add_events

__all__ = ["MAX_BYTES", "MAX_LINES", "UNKNOWN_SHOWN", "BlockImport", "import_blocks"]

MAX_LINES = 200_000
MAX_BYTES = 8_000_000
MAX_NAME = 200
UNKNOWN_SHOWN = 100
# Lines past which the import's statements get more working memory (db.block_import.give_memory).
_IN_MEMORY_FROM = 2_000
_HEADERS = frozenset({"account address", "account_address", "acct", "username", "external id", "externalid"})


@dataclass(frozen=True, slots=True)
class BlockImport:
    blocked: int
    unknown: list[str]


def names_of(data: bytes) -> list[tuple[str, str]]:
    """(the line as written, the name it gives) for each line naming someone, first occurrences only."""
    if len(data) > MAX_BYTES:
        raise BadInput(f"the file is over the limit of {MAX_BYTES} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInput("the file must be UTF-8 text") from None
    if "\x00" in text:
        raise BadInput("the file must be text, not binary")
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise BadInput(f"the file has more than {MAX_LINES} lines")
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    for number, line in enumerate(lines):
        written = line.strip()
        if not written:
            continue
        field = next(csv.reader(io.StringIO(written)), [""])[0].strip() if "," in written or '"' in written else written
        name = field.removeprefix("@").strip()
        if number == 0 and name.lower() in _HEADERS:
            continue
        if not name or len(name) > MAX_NAME:
            found.append((written[:MAX_NAME], ""))
            continue
        if name in seen:
            continue
        seen.add(name)
        found.append((written, name))
    return found


async def import_blocks(conn: asyncpg.Connection, settings: Settings, blocker: Member, data: bytes) -> BlockImport:
    named = names_of(data)
    if len(named) > _IN_MEMORY_FROM:
        await import_db.give_memory(conn)
    ids = await import_db.resolve(conn, [name for _, name in named])
    unknown = [written for (written, _), member_id in zip(named, ids, strict=True) if member_id is None]
    wanted = list(dict.fromkeys(m for m in ids if m is not None and m != blocker.id))
    new = await relations_db.add_blocks(conn, blocker.id, wanted)
    if new:
        ended = await import_db.end_follows(conn, blocker.id, new)
        await import_db.end_favourites(conn, blocker.id, new)
        await relations_db.bump(conn, [blocker.id, *new])
        events = [
            (
                "MemberUnfollowed",
                str(follower),
                {"followerId": str(follower), "memberId": str(followed), "reason": "block"},
            )
            for follower, followed in ended
        ]
        events += [("MemberBlocked", str(blocker.id), {"memberId": str(blocker.id), "blockedId": str(b)}) for b in new]
        await add_events(conn, events, shards=settings.outbox_shards)
    named_members = sum(1 for m in ids if m is not None and m != blocker.id)
    return BlockImport(blocked=named_members, unknown=unknown[:UNKNOWN_SHOWN])
