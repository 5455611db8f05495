"""After a case: lost, duplicated and reordered effects, from the effect log and from Postgres and Redis.

In the spirit of Jepsen's Kafka checker, over what the processes logged
(every produce by the relay, every record handled by a consumer, with
`fresh` true when its transaction applied the effect) and what the stores
hold:

- lost: an acknowledged post or like absent from Postgres; a committed
  outbox event never produced, or never applied by a group that takes it
  (and not parked as a dead letter); an expected notification absent.
- duplicated: an event applied (fresh) twice by one group; a notification
  or NotificationCreated event twice for one (event, recipient, kind).
- reordered: one key's events applied (fresh) by a group in an order other
  than their versions; one key's events first produced out of version order.
- visible: `feedfabric verify` clean, and each sampled member's first home
  page from the API equal to the one Postgres computes.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
from feedfabric.core.events import Event
from feedfabric.db import posts as posts_db
from feedfabric.workers import notifications as notifications_worker

from faults.harness import GROUPS, Case, Client, Record, group_types, run_verify


@dataclass
class Verdict:
    lost: dict[str, int] = field(default_factory=dict)
    duplicated: dict[str, int] = field(default_factory=dict)
    reordered: dict[str, int] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    verify_status: int = -1
    verify_output: str = ""
    page_mismatches: int = 0
    unexpected_exits: list[str] = field(default_factory=list)  # processes that died on their own

    @property
    def lost_total(self) -> int:
        return sum(self.lost.values())

    @property
    def duplicated_total(self) -> int:
        return sum(self.duplicated.values())

    @property
    def reordered_total(self) -> int:
        return sum(self.reordered.values())

    @property
    def ok(self) -> bool:
        return (
            self.lost_total == 0
            and self.duplicated_total == 0
            and self.reordered_total == 0
            and self.verify_status == 0
            and self.page_mismatches == 0
            and not self.unexpected_exits
        )

    def line(self) -> str:
        def kinds(d: dict[str, int]) -> str:
            bad = {k: v for k, v in d.items() if v}
            return "" if not bad else " (" + ", ".join(f"{k} {v}" for k, v in bad.items()) + ")"

        return (
            f"lost {self.lost_total}{kinds(self.lost)}, duplicated {self.duplicated_total}{kinds(self.duplicated)},"
            f" reordered {self.reordered_total}{kinds(self.reordered)}, verify exit {self.verify_status},"
            f" page mismatches {self.page_mismatches}"
            + (f", processes died on their own: {', '.join(self.unexpected_exits)}" if self.unexpected_exits else "")
        )


def read_log(case: Case, kind: str) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for path in sorted(Path(case.effect_dir).glob(f"{kind}-*.jsonl")):
        for raw in path.read_text().splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                continue  # a line cut by SIGKILL mid-write
    return sorted(lines, key=lambda r: r["t"])


def _out_of_order(versions: list[int]) -> int:
    return sum(1 for a, b in zip(versions, versions[1:]) if b <= a)


async def check(
    case: Case, record: Record, client: Client, *, sample_pages: int = 10, expect_dead_letters: int = 0
) -> Verdict:
    v = Verdict()
    conn = await asyncpg.connect(case.database_url)
    try:
        await _check_writes(conn, record, v)
        outbox = await conn.fetch("SELECT id, key, event_type, aggregate_version, payload::text AS payload FROM outbox")
        await _check_log(case, conn, outbox, v)
        await _check_notifications(conn, outbox, v)
        dead = await conn.fetchval("SELECT count(*) FROM dead_letters")
        v.facts["dead letters"] = dead
        if dead != expect_dead_letters:
            v.lost["dead letters unexpected"] = abs(int(dead) - expect_dead_letters)
        v.verify_status, v.verify_output = run_verify(case)
        v.page_mismatches = await _check_pages(conn, client, sample_pages, v)
        v.unexpected_exits = [
            f"{p.name} (exit {p.popen.returncode}, {p.log.name})" for p in case.procs if p.died_unexpectedly()
        ]
    finally:
        await conn.close()
    return v


async def _check_writes(conn: asyncpg.Connection, record: Record, v: Verdict) -> None:
    ids = [uuid.UUID(p) for p in record.posts]
    found = {r[0] for r in await conn.fetch("SELECT id FROM posts WHERE id = ANY($1::uuid[])", ids)}
    v.lost["acknowledged posts"] = sum(1 for i in ids if i not in found)
    likes = await conn.fetch("SELECT m.external_id, l.post_id::text FROM likes l JOIN members m ON m.id = l.member_id")
    have = {(r[0], r[1]) for r in likes}
    v.lost["acknowledged likes"] = sum(1 for like in record.likes if like not in have)
    v.lost["acknowledged unlikes"] = sum(1 for like in record.unliked if like in have)
    v.facts["acknowledged posts"] = len(ids)
    v.facts["acknowledged likes"] = len(record.likes)
    v.facts["indeterminate requests"] = record.failed


async def _check_log(case: Case, conn: asyncpg.Connection, outbox: list[asyncpg.Record], v: Verdict) -> None:
    produced = read_log(case, "produce")
    applied = read_log(case, "apply")
    v.facts["produces logged"] = len(produced)
    v.facts["applies logged"] = len(applied)
    produced_ids = {r["id"] for r in produced}
    v.lost["events never produced"] = sum(1 for r in outbox if r["id"] not in produced_ids)
    # First produce of each event, per topic and key, in time order: versions must rise. (Order is
    # promised per key within a topic, as Kafka keeps it per partition; a post's likes and its
    # PostCreated travel on different topics and may be consumed in either order.)
    first: dict[int, dict[str, Any]] = {}
    for r in produced:
        first.setdefault(r["id"], r)
    by_key: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in sorted(first.values(), key=lambda r: r["t"]):
        by_key[(r["topic"], r["key"])].append(r["version"])
    v.reordered["first produces per key"] = sum(_out_of_order(vs) for vs in by_key.values())

    types = group_types()
    fresh: dict[tuple[str, int], int] = defaultdict(int)
    per_key: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for r in applied:
        if r["fresh"]:
            fresh[(r["group"], r["id"])] += 1
            per_key[(r["group"], r["topic"], r["key"])].append(r["version"])
    v.duplicated["effects applied twice"] = sum(n - 1 for n in fresh.values() if n > 1)
    v.reordered["applies per key"] = sum(_out_of_order(vs) for vs in per_key.values())
    v.facts["redeliveries absorbed"] = sum(1 for r in applied if not r["fresh"])

    processed = {(r[0], r[1]) for r in await conn.fetch("SELECT group_name, event_id FROM processed_events")}
    parked = {
        (r[0], int(r[1]))
        for r in await conn.fetch(
            r"SELECT group_name, substring(payload from '\"eventId\":(\d+)') FROM dead_letters"
            r" WHERE payload ~ '\"eventId\":\d+'"
        )
    }
    missing = 0
    for row in outbox:
        for group in GROUPS:
            if row["event_type"] in types[group]:
                key = (group, row["id"])
                if key not in processed and key not in parked:
                    missing += 1
    v.lost["events never applied"] = missing
    # A processed_events row without a logged fresh apply means the log is incomplete (a SIGKILL right
    # after commit); count such rows as a fact, not a failure.
    v.facts["applies committed but not logged"] = sum(1 for k in processed if k[0] in GROUPS and k not in fresh)


async def _check_notifications(conn: asyncpg.Connection, outbox: list[asyncpg.Record], v: Verdict) -> None:
    """Every notification the events ask for exists once, with one NotificationCreated event (none for a
    redo within a day of its take-back), unless a later undo took it back (an unlike its like, an unfollow
    its follow, a deleted repost its repost); and every group's counts are those of its notifications."""
    wanted: set[tuple[int, uuid.UUID, str]] = set()
    undone_by: dict[int, tuple[str, ...]] = {}  # a notifying event's ID -> the key its undo carries
    last_undo: dict[tuple[str, ...], int] = {}
    kinds = notifications_worker.GROUP.event_types
    for row in outbox:
        if row["event_type"] not in kinds:
            continue
        event = Event(row["id"], row["event_type"], row["key"], row["aggregate_version"], json.loads(row["payload"]))
        done, undo = _undo_keys(event)
        if done is not None:
            undone_by[row["id"]] = done
        if undo is not None:
            last_undo[undo] = max(last_undo.get(undo, 0), row["id"])
        try:
            for item in notifications_worker.plan(event):
                wanted |= {(row["id"], r, item.kind) for r in item.recipients}
        except Exception:  # noqa: BLE001 - a poison payload notifies nobody
            continue
    taken_back = {
        w
        for w in wanted
        if w[2] in ("like", "follow", "repost") and w[0] in undone_by and last_undo.get(undone_by[w[0]], 0) > w[0]
    }
    rows = await conn.fetch("SELECT id, event_id, recipient_id, kind FROM notifications")
    have = {(r["event_id"], r["recipient_id"], r["kind"]) for r in rows}
    v.lost["notifications"] = len(wanted - taken_back - have)
    v.duplicated["notifications taken back but kept"] = len(taken_back & have)
    v.lost["grouped notifications"] = await conn.fetchval(
        """SELECT count(*) FROM notification_groups g
           LEFT JOIN LATERAL (SELECT count(*) AS n, count(DISTINCT actor_id) AS actors
                              FROM notifications WHERE group_id = g.id) c ON true
           WHERE (c.n, c.actors) IS DISTINCT FROM (g.notification_count::bigint, g.actor_count::bigint)"""
    ) + await conn.fetchval("SELECT count(*) FROM notifications WHERE group_id IS NULL")
    v.duplicated["notifications"] = len(rows) - len(have)
    created = await conn.fetch(
        "SELECT payload->>'notificationId' AS n, count(*) AS c FROM outbox"
        " WHERE event_type = 'NotificationCreated' GROUP BY 1"
    )
    per = {r["n"]: r["c"] for r in created}
    # A redo within a day of a take-back the recipient had been told of (the like toggled back on) is not announced.
    quiet = {
        str(r["id"])
        for r in await conn.fetch(
            """SELECT n.id FROM notifications n JOIN notification_take_backs t
                 ON t.recipient_id = n.recipient_id AND t.kind = n.kind AND t.actor_id = n.actor_id
                AND t.target_id = CASE WHEN n.kind = 'follow' THEN n.recipient_id ELSE n.post_id END
               WHERE t.announced AND t.taken_at <= n.created_at AND t.taken_at > n.created_at - interval '24 hours'"""
        )
    }
    v.lost["NotificationCreated events"] = sum(1 for r in rows if str(r["id"]) not in per and str(r["id"]) not in quiet)
    v.duplicated["NotificationCreated events"] = sum(c - 1 for c in per.values() if c > 1) + len(quiet & set(per))
    v.facts["notifications"] = len(rows)


def _undo_keys(event: Event) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """(the key an undo of this event would carry, the key this event undoes): a like and its unlike share
    (post, member), a follow and its unfollow (follower, member), a repost and its deletion the repost's ID."""
    d = event.data
    if event.type in ("PostLiked", "PostUnliked"):
        key = ("like", str(d.get("postId")), str(d.get("memberId")))
        return (key, None) if event.type == "PostLiked" else (None, key)
    if event.type in ("MemberFollowed", "MemberUnfollowed"):
        key = ("follow", str(d.get("followerId")), str(d.get("memberId")))
        return (key, None) if event.type == "MemberFollowed" else (None, key)
    if event.type == "PostCreated" and d.get("repostOf"):
        return ("post", str(d.get("postId"))), None
    if event.type == "PostDeleted":
        return None, ("post", str(d.get("postId")))
    return None, None


async def _check_pages(conn: asyncpg.Connection, client: Client, sample: int, v: Verdict) -> int:
    """The API's first home page of sampled members equals the Postgres page (follows predate posts)."""
    members = await conn.fetch("SELECT id, external_id FROM members ORDER BY external_id LIMIT $1", sample)
    mismatches = 0
    sources: dict[str, int] = defaultdict(int)
    for m in members:
        truth = [str(p.id) for p in await posts_db.home_page(conn, m["id"], None, 30)]
        response = await client.http.get(
            "/userfeed/home", params={"limit": 30}, headers={"Authorization": f"Bearer {_token(m['external_id'])}"}
        )
        body = response.json()
        sources[body.get("source", "?")] += 1
        if [p["id"] for p in body.get("posts", [])] != truth:
            mismatches += 1
    v.facts["page sources"] = dict(sources)
    return mismatches


def _token(external_id: str) -> str:
    from feedfabric.core.auth import issue_token

    from faults.harness import SECRET

    return issue_token(SECRET, external_id, ttl=3600)
