"""How a timeline stores a post: keys, the raw 16-byte entry form (and the older text form still read), packed follower IDs."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from feedfabric.core.ids import id_millis
from feedfabric.db import timeline_queries as q
from feedfabric.db.redisclient import REDIS_ERRORS, is_cluster

__all__ = ["shard_of"]

KEY_PREFIX = "feed:"


RAW_SCORE = "inf"


def encode_member(post_id: uuid.UUID | str) -> bytes:
    """The member a timeline stores for a post: its ID's 16 raw bytes (scored RAW_SCORE)."""
    return (post_id if isinstance(post_id, uuid.UUID) else uuid.UUID(post_id)).bytes


def decode_member(member: bytes | str) -> str:
    """A post ID as text from either stored form: 16 raw bytes, or the older UUID text."""
    if isinstance(member, bytes):
        return str(uuid.UUID(bytes=member)) if len(member) == 16 else member.decode()
    return member


def cursor_forms(post_id: uuid.UUID | str | None) -> tuple[bytes | str, str]:
    """A cursor as both stored forms (raw first), for the scripts that find its rank; empty: no cursor."""
    if post_id is None:
        return "", ""
    return encode_member(post_id), str(post_id)


def entries(post_ids: Iterable[uuid.UUID | str]) -> dict[bytes, str]:
    """ZADD's mapping for posts in the raw form."""
    return {encode_member(i): RAW_SCORE for i in post_ids}


def decode_entry(member: bytes | str, score: float) -> tuple[str, bool]:
    """(post ID, in order): an entry is in order when its score is its form's (+inf raw, the ID's ms as text),
    so that Redis order is ID order."""
    post_id = decode_member(member)
    if isinstance(member, bytes) and len(member) == 16:
        return post_id, score == float("inf")
    return post_id, score == score_of(uuid.UUID(post_id))


def feed_key(member_id: uuid.UUID | str) -> str:
    return f"{KEY_PREFIX}{member_id}"


def score_of(post_id: uuid.UUID) -> int:
    """The text form's score: the ID's Unix ms."""
    return id_millis(post_id)


def shard_of(redis: object, member_id: uuid.UUID | str) -> str:
    """Which Redis serves a member's timeline: "" on one server, the node's name on a cluster, so a
    node that is down costs the reads of its own slots only (breaker.CircuitBreaker.shard)."""
    if not is_cluster(redis):
        return ""
    try:
        return str(redis.get_node_from_key(feed_key(member_id)).name)  # type: ignore[attr-defined]
    except REDIS_ERRORS:
        return ""  # the slot map is not known yet (before the client's first command): the shared breaker


ID_TEXT_LENGTH = q.ID_TEXT_LENGTH


def pack_ids(member_ids: Sequence[str]) -> str:
    """Member IDs as the push script takes them: canonical UUID texts back to back."""
    packed = "".join(member_ids)
    if len(packed) != ID_TEXT_LENGTH * len(member_ids):
        raise ValueError("member IDs must be canonical UUID text")
    return packed


def unpack_ids(packed: str) -> list[str]:
    return [packed[i : i + ID_TEXT_LENGTH] for i in range(0, len(packed), ID_TEXT_LENGTH)]


def as_text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def owed_key(member_id: uuid.UUID | str) -> str:
    """Beside `feed_key`, on its cluster slot: the hash tag is the whole timeline key, which has no tag."""
    return f"{{{feed_key(member_id)}}}:owed"
