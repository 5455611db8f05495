"""A member's open WebSockets, counted across every API instance, so one member cannot hold more than
WS_MAX_SOCKETS_PER_MEMBER.

Every open socket costs its API process a task, buffers and a share of each event's delivery. One
member's script or a client stuck in a reconnect loop could open hundreds and tax every other
member's sockets on the same instance, and behind the balancer they land on every instance. So each
admitted socket holds a lease in Redis: a sorted set per member, `wssockets:{<memberId>}` (the member
as hash tag: one Cluster slot), of socket tokens scored by when their lease ends. Admitting drops the
ended leases, counts the rest and adds one in one script, so two instances admitting at once cannot
both take the last place. The process renews its leases while their sockets stay open and gives one
back when its socket closes; a lease lasts LEASE_SECONDS, so the sockets of an instance that died
stop counting within that time.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

import redis.asyncio as aioredis

from feedfabric.db.redisclient import Script

__all__ = ["LEASE_SECONDS", "claim", "lease_key"]

KEY_PREFIX = "wssockets:"
LEASE_SECONDS = 60.0

_CLAIM = Script("""
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 1
""")


def lease_key(member_id: uuid.UUID) -> str:
    return f"{KEY_PREFIX}{{{member_id}}}"


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


async def claim(redis: aioredis.Redis, member_id: uuid.UUID, token: str, limit: int, now: float | None = None) -> bool:
    """Takes one of the member's `limit` places for the socket `token`; False when all are held."""
    now = time.time() if now is None else now
    taken = await _CLAIM(redis, [lease_key(member_id)], (_ms(now), limit, _ms(now + LEASE_SECONDS), token))
    return bool(taken)


async def renew(redis: aioredis.Redis, leases: Iterable[tuple[uuid.UUID, str]], now: float | None = None) -> None:
    """Extends the leases of sockets still open, in one pipeline. A lease Redis lost (a restart, a
    flush) is added back, so the members' counts recover by the next renewal."""
    ends = _ms((time.time() if now is None else now) + LEASE_SECONDS)
    pipe = redis.pipeline(transaction=False)
    for member_id, token in leases:
        key = lease_key(member_id)
        pipe.zadd(key, {token: ends})
        pipe.pexpireat(key, ends)
    await pipe.execute()


async def release(redis: aioredis.Redis, member_id: uuid.UUID, token: str) -> None:
    await redis.zrem(lease_key(member_id), token)
