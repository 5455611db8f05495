"""`feedfabric verify`: checks every Redis timeline against what Postgres says it must and may hold.

It checks what readers are served, which is narrower than "the set equals a
rebuild": the home feed reads a timeline down to its oldest entry (and never
at or below the Redis run's floor, see `timelines.serving_floor`) and takes
the rest from Postgres. So for each member with a timeline, with
`lower = max(oldest entry, floor)`:

- missing: a post above `lower` that fan-out must have pushed and that is not
  there. Must = the member's own posts and the posts of followed
  non-celebrity members and followed tags whose follow is older than the post
  (what a follow merges is never required), not deleted, whose
  PostCreated worker-events has finished (in-flight fan-outs are reported as
  pending, not missing). Members inactive for INACTIVE_AFTER_DAYS have no
  such expectation (fan-out skips them; their return rebuilds), and members
  with a rebuild in flight are skipped and counted as pending.
- extra: an entry above the floor that no rule could have written: the post
  does not exist, or it is not the member's own, its author is not and never
  was followed (a past follow is known by its follow notification or, once
  an unfollow took that back, by its past_follows row), and it
  carries no tag the member follows. Entries of an unfollowed author are not
  extra: worker-events takes them out (timelines.unmerge), but a fan-out that
  read the followers before the unfollow committed can land after it. Deleted and held posts are not extra:
  fan-out pushes what existed, and reads filter them.
- misordered: an entry whose score is not its form's (`timelines.decode_entry`:
  +inf for the 16 raw bytes, the ID's timestamp for the older UUID text), so
  Redis order and ID order (the cursor order) disagree. Both forms are read.

Members are paged by keyset and checked a page at a time (bounded memory).
`--repair` deletes each bad timeline and rebuilds it twice from Postgres:
readers see no timeline meanwhile (Postgres serves them), and the second
rebuild catches a post whose fan-out found no key between the delete and the
first write. The exit status is 1 when anything was wrong (repaired or not).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from dataclasses import dataclass, field

import asyncpg
import redis.asyncio as aioredis

from feedfabric.core.settings import Settings
from feedfabric.db import verify_queries as q
from feedfabric.db.redisclient import create_redis, is_cluster
from feedfabric.feeds import timelines
from feedfabric.feeds.timelines import slots

__all__ = ["main", "verify"]

PAGE = 100
SHOWN = 5  # example IDs printed per problem kind and member


@dataclass
class MemberProblem:
    member_id: uuid.UUID
    external_id: str
    missing: list[str]
    extra: list[str]
    misordered: list[str]

    def line(self) -> str:
        parts = [
            f"{name} {len(ids)} ({', '.join(ids[:SHOWN])}{', ...' if len(ids) > SHOWN else ''})"
            for name, ids in (("missing", self.missing), ("extra", self.extra), ("misordered", self.misordered))
            if ids
        ]
        return f"{self.external_id}: " + "; ".join(parts)


@dataclass
class Report:
    members: int = 0
    timelines: int = 0
    entries: int = 0
    missing: int = 0
    extra: int = 0
    misordered: int = 0
    pending_posts: int = 0
    pending_members: int = 0
    repaired: int = 0
    untrusted: int = 0  # on a cluster: timelines whose slot lost data since they were rebuilt (read as missing)
    floor: str | None = None
    bad: int = 0
    problems: list[MemberProblem] = field(default_factory=list)  # the first few, for printing

    @property
    def clean(self) -> bool:
        return self.bad == 0

    def summary(self) -> str:
        return (
            f"verify: {self.members} members, {self.timelines} timelines, {self.entries} entries checked"
            f" (floor {self.floor or 'none'}); bad timelines {self.bad}: missing {self.missing},"
            f" extra {self.extra}, misordered {self.misordered}; pending fan-outs {self.pending_posts},"
            f" pending rebuilds {self.pending_members}"
            + (f", awaiting rebuild after a slot's loss {self.untrusted}" if self.untrusted else "")
            + (f"; repaired {self.repaired}" if self.repaired else "")
        )


async def _timelines(redis: aioredis.Redis, members: list[q.MemberRow]) -> list[list[tuple[str, bool]]]:
    """Each member's entries newest first as (post ID, in order)."""
    pipe = redis.pipeline(transaction=False)
    for m in members:
        pipe.zrevrange(timelines.feed_key(m.id), 0, -1, withscores=True)
    return [[timelines.decode_entry(i, float(s)) for i, s in entries] for entries in await pipe.execute()]


async def check_page(
    conn: asyncpg.Connection,
    redis: aioredis.Redis,
    settings: Settings,
    members: list[q.MemberRow],
    floor: str | None,
    pending_posts: set[str],
    pending_members: set[str],
    report: Report,
) -> list[MemberProblem]:
    """Checks one page of members; returns the bad ones."""
    report.members += len(members)
    lowers: dict[uuid.UUID, uuid.UUID] = {}
    served: dict[uuid.UUID, list[tuple[str, bool]]] = {}
    for member, entries in zip(members, await _timelines(redis, members), strict=True):
        if str(member.id) in pending_members:
            continue
        if entries and is_cluster(redis) and not await slots.timeline_trusted(conn, redis, member.id):
            report.untrusted += 1  # its slot lost data since its last rebuild: Postgres serves it until rebuilt
            continue
        shown = [(i, s) for i, s in entries if floor is None or i > floor]
        if not shown:
            continue  # no timeline, or nothing above the floor: Postgres serves this member
        report.timelines += 1
        report.entries += len(shown)
        served[member.id] = shown
        if member.active:
            oldest = min(i for i, _ in shown)  # by ID, not rank: a misordered entry must not hide others
            lowers[member.id] = uuid.UUID(max(oldest, floor) if floor else oldest)
    must = await q.required(conn, lowers, settings.celebrity_follower_threshold)
    odd = await q.unexplained(conn, [(m, uuid.UUID(i)) for m, shown in served.items() for i, _ in shown])
    bad: list[MemberProblem] = []
    for member in members:
        kept = served.get(member.id)
        if kept is None:
            continue
        present = {i for i, _ in kept}
        missing = sorted((must.get(member.id, set()) - present) - pending_posts, reverse=True)
        extra = sorted(odd.get(member.id, set()), reverse=True)
        misordered = [i for i, in_order in kept if not in_order]
        if missing or extra or misordered:
            bad.append(MemberProblem(member.id, member.external_id, missing, extra, misordered))
            report.missing += len(missing)
            report.extra += len(extra)
            report.misordered += len(misordered)
    return bad


async def repair(conn: asyncpg.Connection, redis: aioredis.Redis, settings: Settings, member_id: uuid.UUID) -> None:
    """Deletes and rebuilds one timeline; see the module docstring for why twice."""
    await redis.delete(timelines.feed_key(member_id))
    for _ in range(2):
        await timelines.rebuild(conn, redis, settings, member_id)


async def verify(
    settings: Settings, *, fix: bool = False, external_id: str | None = None, page_size: int = PAGE, keep: int = 50
) -> Report:
    conn = await asyncpg.connect(settings.database_url or "")
    redis = create_redis(settings)
    report = Report()
    try:
        report.floor = await timelines.serving_floor(conn, redis)
        pending_posts = await q.pending_fanouts(conn)
        pending_members = await q.pending_rebuilds(conn)
        report.pending_posts, report.pending_members = len(pending_posts), len(pending_members)
        after = uuid.UUID(int=0)
        while True:
            if external_id is not None:
                one = await q.member_by_external_id(conn, external_id, settings.inactive_after_days)
                if one is None:
                    raise LookupError(f"no member with external ID {external_id!r}")
                members = [one]
            else:
                members = await q.members_page(conn, after, page_size, settings.inactive_after_days)
            if not members:
                break
            bad = await check_page(conn, redis, settings, members, report.floor, pending_posts, pending_members, report)
            report.bad += len(bad)
            report.problems += bad[: max(0, keep - len(report.problems))]
            if fix:
                for problem in bad:
                    await repair(conn, redis, settings, problem.member_id)
                    report.repaired += 1
            if external_id is not None:
                break
            after = members[-1].id
    finally:
        await redis.aclose()
        await conn.close()
    return report


def main(settings: Settings, *, fix: bool, external_id: str | None) -> int:
    """Prints the report; returns the exit status (0 clean, 1 something was wrong, 2 could not check)."""
    try:
        report = asyncio.run(verify(settings, fix=fix, external_id=external_id))
    except LookupError as exc:
        print(f"verify: {exc.args[0]}", file=sys.stderr)
        return 2
    for problem in report.problems:
        print(problem.line())
    print(report.summary())
    return 0 if report.clean else 1
