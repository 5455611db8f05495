"""Moderation terms (admin): phrases that hold a post when it is created or edited with one in it.

The check runs at write time, inside the writing transaction. Each process keeps the matcher it
compiled for the terms' current version; a write reads that version (one small row) and compiles
again only when an admin changed the terms, so a term added on one API instance holds posts written
on every other from its commit on.
"""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.core.errors import BadInput, LimitReached
from feedfabric.core.ids import new_id
from feedfabric.core.moderation import Term
from feedfabric.db import moderation_terms as terms_db
from feedfabric.db.queryable import Queryable
from feedfabric.feeds import term_matcher, text

__all__ = ["MAX_TERMS", "add", "newest_first", "remove"]

MAX_PHRASE = 100
MAX_TERMS = 1_000
"""Moderation terms in all: what `moderationTerms` can return (its declared bound for the query cost)."""

_compiled: tuple[int, term_matcher.Matcher] | None = None


def clean_phrase(phrase: str) -> tuple[str, str]:
    """(the phrase as entered, trimmed; its folded form): 1 to MAX_PHRASE visible characters."""
    phrase = text.clean_text(phrase, "phrase", max_length=MAX_PHRASE)
    folded = term_matcher.fold(phrase)
    if not folded.strip():
        raise BadInput("phrase must not be empty")
    return phrase, folded


async def matcher(conn: Queryable, known_version: int | None = None) -> term_matcher.Matcher:
    """The matcher of the terms as committed now (as this transaction sees them); `known_version` is the
    version a statement of the caller's already read (createPost's insert does)."""
    global _compiled
    current = known_version if known_version is not None else await terms_db.version(conn)
    cached = _compiled
    if cached is not None and cached[0] == current:
        return cached[1]
    # Two writes compiling one new version at once both compile it: the same result, no lock needed.
    version, folded = await terms_db.folded_terms(conn)
    compiled = term_matcher.compile_phrases(folded)
    _compiled = (version, compiled)
    return compiled


async def holds(conn: Queryable, content: str, known_version: int | None = None) -> bool:
    """Whether `content` carries a moderation term (whole words, NFKC and case-folded)."""
    return (await matcher(conn, known_version)).matches(content)


async def add(conn: asyncpg.Connection, phrase: str) -> Term:
    """Adding a phrase already there (in any case or width) returns the existing term. Past MAX_TERMS a new
    one is LIMIT_REACHED: `moderationTerms` returns them all, and the query cost counts that many."""
    phrase, folded = clean_phrase(phrase)
    if await terms_db.count(conn) >= MAX_TERMS:
        known = await terms_db.find(conn, folded)
        if known is None:
            raise LimitReached(f"there are already {MAX_TERMS} moderation terms; remove one first")
        return known
    return await terms_db.add(conn, new_id(), phrase, folded)


async def remove(conn: asyncpg.Connection, term_id: uuid.UUID) -> bool:
    return await terms_db.remove(conn, term_id)


async def newest_first(conn: Queryable) -> list[Term]:
    return await terms_db.newest_first(conn)
