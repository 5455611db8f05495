"""Reports and moderation terms as the domain sees them: plain frozen dataclasses built from rows."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from asyncpg import Record

__all__ = ["Report", "Target", "Term"]


@dataclass(frozen=True, slots=True)
class Report:
    id: uuid.UUID
    reporter_id: uuid.UUID | None
    member_id: uuid.UUID
    target_kind: str
    target_id: uuid.UUID
    post_id: uuid.UUID | None
    comment_id: uuid.UUID | None
    reason: str
    note: str | None
    status: str
    action: str | None
    created_at: datetime
    resolved_at: datetime | None
    open_on_target: int

    @classmethod
    def of(cls, record: Record) -> Report:
        return cls(**{name: record[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class Target:
    """What a report names: its kind and ID, the member reported, and the post or comment."""

    kind: str
    id: uuid.UUID
    member_id: uuid.UUID
    post_id: uuid.UUID | None = None
    comment_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class Term:
    id: uuid.UUID
    phrase: str
    created_at: datetime
