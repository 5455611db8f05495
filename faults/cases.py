"""The fault cases. Each starts its own world, runs a workload, injects one fault, and checks everything.

A case's shape: members and follows first (so every follow predates every
post and a Redis page must equal the Postgres page), then writers posting and
liking with readers reading while the fault is injected a third of the way
in; a probe post right after the fault measures recovery (seconds until a new
post is in its author's timeline); then the pipeline drains and the checker
runs (faults/checker.py).
"""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import redis.asyncio as aioredis
from feedfabric.db.outbox import add_event
from feedfabric.db.pool import init_connection
from feedfabric.ops import devstack

from faults import checker
from faults.harness import (
    Case,
    Client,
    Record,
    open_case,
    probe,
    quiesce,
    retrying,
    run_load,
    setup_graph,
)


@dataclass
class Outcome:
    name: str
    injected: str
    recovery_s: float
    verdict: checker.Verdict
    seconds: float

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    def report(self) -> str:
        facts = ", ".join(f"{k} {v}" for k, v in self.verdict.facts.items())
        status = "PASS" if self.ok else "FAIL"
        text = (
            f"[{status}] {self.name} ({self.seconds:.0f}s): {self.injected}\n"
            f"    recovery {self.recovery_s:.2f}s; {self.verdict.line()}\n    {facts}"
        )
        if self.verdict.verify_status != 0:
            text += "\n    verify: " + self.verdict.verify_output.replace("\n", "\n    verify: ")
        return text


@dataclass
class Params:
    short: bool
    root: Path
    pg_server: str

    @property
    def load_s(self) -> float:
        return 6.0 if self.short else 20.0


Inject = Callable[[Case, Client, Record], Awaitable[str]]


async def _run(
    p: Params,
    name: str,
    inject: Inject,
    *,
    env: dict[str, str] | None = None,
    workers: int = 1,
    relays: int = 1,
    members: int = 24,
    follows: int = 5,
    pg_server: str | None = None,
    expect_dead_letters: int = 0,
    load_s: float | None = None,
    writers: int = 8,
    extra_check: Callable[[Case, checker.Verdict], Awaitable[None]] | None = None,
) -> Outcome:
    started = time.monotonic()
    case = await open_case(name, p.root, pg_server or p.pg_server, env=env, workers=workers, relays=relays)
    client = Client(case.api_url)
    try:
        names = await setup_graph(client, members, follows)
        record = Record()
        stop = asyncio.Event()
        load = asyncio.create_task(run_load(client, names, record, load_s or p.load_s, writers=writers, stop=stop))
        await asyncio.sleep((load_s or p.load_s) / 3)
        injected = await inject(case, client, record)
        recovery = await probe(case, client, names[0])
        await load
        await quiesce(case)
        verdict = await checker.check(case, record, client, expect_dead_letters=expect_dead_letters)
        if extra_check is not None:
            await extra_check(case, verdict)
        return Outcome(name, injected, recovery, verdict, time.monotonic() - started)
    finally:
        await client.aclose()
        case.stop()


async def _replace_when_dead(case: Case, proc_name: str, start: Callable[[], object], timeout: float = 30.0) -> float:
    """Waits for the armed process to kill itself, then starts a clean one; returns when it died."""
    deadline = time.monotonic() + timeout
    victim = next(p for p in case.procs if p.name == proc_name)  # the first, armed one (may be dead already)
    while victim.alive():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{case.name}: {proc_name} never reached its crash point")
        await asyncio.sleep(0.02)
    died = time.monotonic()
    start()
    return died


# -- The cases --------------------------------------------------------------------


async def relay_killed_between_produce_and_stamp(p: Params) -> Outcome:
    async def inject(case: Case, client: Client, record: Record) -> str:
        await _replace_when_dead(case, "relay", lambda: case.relay(FEEDFABRIC_CRASH_AT=""))
        return "relay SIGKILLed after its 5th batch was acknowledged by the broker and before it was stamped; a new relay started"

    return await _run(p, "relay-kill", inject, env={"FEEDFABRIC_CRASH_AT": "relay-after-produce:5"})


async def worker_killed_mid_fanout(p: Params) -> Outcome:
    async def inject(case: Case, client: Client, record: Record) -> str:
        await _replace_when_dead(case, "worker", lambda: case.worker(FEEDFABRIC_CRASH_AT=""))
        return (
            "worker SIGKILLed right after pushing its 30th follower batch (FANOUT_BATCH_SIZE 2, so mid-post),"
            " its transaction and offset uncommitted; a new worker started"
        )

    return await _run(
        p, "worker-kill-mid-fanout", inject, env={"FEEDFABRIC_CRASH_AT": "fanout-batch:30", "FANOUT_BATCH_SIZE": "2"}
    )


async def redis_restarted_empty(p: Params) -> Outcome:
    async def inject(case: Case, client: Client, record: Record) -> str:
        assert case.redis is not None
        port = int(case.redis.url.rsplit(":", 1)[1].split("/")[0])
        case.redis.kill()
        await asyncio.sleep(2.0)
        case.redis = devstack.start_redis(case.work_dir / "redis-empty", port=port)
        return "Redis SIGKILLed under reads and fan-out writes, down 2s, started empty on the same port"

    return await _run(p, "redis-restart-empty", inject)


async def redis_restarted_from_stale_snapshot(p: Params) -> Outcome:
    async def inject(case: Case, client: Client, record: Record) -> str:
        assert case.redis is not None
        port = int(case.redis.url.rsplit(":", 1)[1].split("/")[0])
        folder = case.work_dir / "redis"
        redis = aioredis.from_url(case.redis.url)
        await redis.save()
        await redis.aclose()
        shutil.copy(folder / "dump.rdb", case.work_dir / "stale.rdb")
        posts_at_snapshot = len(record.posts)
        await asyncio.sleep(1.5)  # fan-out keeps writing what the snapshot will not have
        missed = len(record.posts) - posts_at_snapshot
        case.redis.kill()
        shutil.copy(case.work_dir / "stale.rdb", folder / "dump.rdb")
        case.redis = devstack.start_redis(folder, port=port)
        return (
            f"Redis snapshot taken (SAVE), {missed} more posts fanned out, Redis SIGKILLed and restarted"
            " from the stale snapshot on the same port"
        )

    async def floor_set(case: Case, verdict: checker.Verdict) -> None:
        conn = await asyncpg.connect(case.database_url)
        try:
            floor = await conn.fetchval("SELECT floor FROM timeline_epoch")
        finally:
            await conn.close()
        verdict.facts["floor"] = str(floor)[:13] + "…" if floor else None
        if floor is None:
            verdict.lost["stale run not noticed"] = 1

    return await _run(p, "redis-stale-snapshot", inject, extra_check=floor_set)


async def broker_restarted_empty(p: Params) -> Outcome:
    async def inject(case: Case, client: Client, record: Record) -> str:
        assert case.kafka is not None
        port = int(case.kafka.url.rsplit(":", 1)[1])
        case.kafka.kill()
        await asyncio.sleep(1.0)
        case.kafka = devstack.start_kafka(case.work_dir / "kafka-empty", port=port)
        return "broker SIGKILLed with events in flight and started empty (no volume) on the same port"

    return await _run(p, "broker-restart-empty", inject)


async def postgres_restarted_immediate(p: Params) -> Outcome:
    pg_dir = p.root / "pg-restart"
    shutil.rmtree(pg_dir, ignore_errors=True)
    own = devstack.start_postgres(pg_dir, database="postgres", durable=True)
    port = int(own.url.rsplit(":", 1)[1].split("/")[0])
    holder = {"pg": own}

    async def inject(case: Case, client: Client, record: Record) -> str:
        devstack.stop_postgres_immediately(pg_dir)
        holder["pg"].process.wait(10) if holder["pg"].process else None
        await asyncio.sleep(1.0)
        holder["pg"] = devstack.start_postgres(pg_dir, port, database="postgres", durable=True)
        return "Postgres stopped with `pg_ctl stop -m immediate` under load (no checkpoint), restarted after 1s"

    try:
        return await _run(p, "postgres-restart", inject, pg_server=own.url)
    finally:
        holder["pg"].stop()


async def api_killed_before_commit(p: Params) -> Outcome:
    async def inject(case: Case, client: Client, record: Record) -> str:
        await _replace_when_dead(case, "api", lambda: case.api(FEEDFABRIC_CRASH_AT=""))
        await case.wait_api()
        return "API process SIGKILLed inside a createPost transaction (rows and outbox row written, not committed); restarted"

    async def nothing_committed(case: Case, verdict: checker.Verdict) -> None:
        crashes = [r for r in checker.read_log(case, "crash") if r.get("point") == "post-before-commit"]
        conn = await asyncpg.connect(case.database_url)
        try:
            rows = sum(
                [await conn.fetchval("SELECT count(*) FROM posts WHERE content = $1", r["content"]) for r in crashes]
            )
            orphans = await conn.fetchval(
                "SELECT count(*) FROM outbox o WHERE event_type = 'PostCreated'"
                " AND NOT EXISTS (SELECT 1 FROM posts p WHERE p.id::text = o.key)"
            )
        finally:
            await conn.close()
        verdict.facts["killed posts"] = len(crashes)
        verdict.facts["their rows"] = rows
        verdict.facts["events without a post"] = orphans
        if len(crashes) != 1 or rows or orphans:
            verdict.duplicated["rows or events of the killed transaction"] = rows + orphans + (len(crashes) != 1)

    return await _run(
        p,
        "api-kill-before-commit",
        inject,
        env={"FEEDFABRIC_CRASH_AT": "post-before-commit:25"},
        extra_check=nothing_committed,
    )


async def consumer_frozen_past_session_timeout(p: Params) -> Outcome:
    async def inject(case: Case, client: Client, record: Record) -> str:
        frozen = case.live("worker")[0]
        frozen.signal(signal.SIGSTOP)
        await asyncio.sleep(7.0)  # session timeout 3s: the group moves its partitions to the other worker
        frozen.signal(signal.SIGCONT)
        return "one of two workers SIGSTOPped for 7s (session timeout 3s) under load, then SIGCONTed"

    async def late_commit(case: Case, verdict: checker.Verdict) -> None:
        text = "".join(p.log.read_text(errors="replace") for p in case.procs if p.name == "worker")
        verdict.facts["late commits refused"] = text.count("commit after a rebalance failed")

    return await _run(p, "consumer-sigstop", inject, workers=2, extra_check=late_commit)


async def consumers_churned(p: Params) -> Outcome:
    churn_s = 20.0 if p.short else 120.0

    async def inject(case: Case, client: Client, record: Record) -> str:
        rng = random.Random(3)
        extra: list = []
        added = removed = 0
        deadline = time.monotonic() + churn_s
        while time.monotonic() < deadline:
            if len(extra) < 2 and (not extra or rng.random() < 0.5):
                extra.append(case.worker())
                added += 1
            else:
                victim = extra.pop(rng.randrange(len(extra)))
                victim.kill() if rng.random() < 0.5 else victim.stop()
                removed += 1
            await asyncio.sleep(3.0)
        return f"for {churn_s:.0f}s a worker added or removed (SIGTERM or SIGKILL) every 3s: {added} added, {removed} removed"

    return await _run(p, "consumer-churn", inject, load_s=churn_s + 6)


async def hot_keys_race(p: Params) -> Outcome:
    """Two relays, two workers per group, 50 writers toggling likes on 10 hot posts: per-key versions in order."""
    started = time.monotonic()
    case = await open_case("hot-keys-race", p.root, p.pg_server, workers=2, relays=2)
    client = Client(case.api_url)
    try:
        writers = [f"w{i:02d}" for i in range(50)]
        await asyncio.gather(*(retrying(lambda w=w: client.member(w)) for w in writers))
        hot = [await client.post(writers[i], f"hot {i}") for i in range(10)]
        record = Record()
        for i, h in enumerate(hot):
            record.posts[h] = writers[i]
        seconds = p.load_s + 4
        deadline = time.monotonic() + seconds
        toggles = 0

        async def writer(who: str) -> None:
            nonlocal toggles
            rng = random.Random(who)
            state: dict[str, bool] = {}
            while time.monotonic() < deadline:
                post = rng.choice(hot)
                on = not state.get(post, False)
                try:
                    await client.like(who, post, on)
                except Exception:  # noqa: BLE001 - outcome unknown: drop the pair from the check
                    record.fail("like")
                    state.pop(post, None)
                    record.likes.discard((who, post))
                    record.unliked.discard((who, post))
                    continue
                toggles += 1
                state[post] = on
                (record.likes.add if on else record.unliked.add)((who, post))
                (record.unliked.discard if on else record.likes.discard)((who, post))

        await asyncio.gather(*(writer(w) for w in writers))
        recovery = 0.0
        await quiesce(case)
        verdict = await checker.check(case, record, client)
        verdict.facts["acknowledged toggles"] = toggles
        injected = f"2 relays and 2 workers per group; 50 writers toggled likes on 10 hot posts for {seconds:.0f}s"
        return Outcome("hot-keys-race", injected, recovery, verdict, time.monotonic() - started)
    finally:
        await client.aclose()
        case.stop()


async def poison_event(p: Params) -> Outcome:
    async def inject(case: Case, client: Client, record: Record) -> str:
        conn = await asyncpg.connect(case.database_url)
        await init_connection(conn)  # the JSON codecs the app's pool uses
        try:
            async with conn.transaction():
                await add_event(conn, "PostCreated", "poison", {"postId": "not-a-uuid", "note": "never valid"})
        finally:
            await conn.close()
        return "a PostCreated whose postId is not an ID committed to the outbox among real events"

    return await _run(p, "poison-event", inject, expect_dead_letters=2)


CASES: dict[str, Callable[[Params], Awaitable[Outcome]]] = {
    "relay-kill": relay_killed_between_produce_and_stamp,
    "worker-kill-mid-fanout": worker_killed_mid_fanout,
    "redis-restart-empty": redis_restarted_empty,
    "redis-stale-snapshot": redis_restarted_from_stale_snapshot,
    "broker-restart-empty": broker_restarted_empty,
    "postgres-restart": postgres_restarted_immediate,
    "api-kill-before-commit": api_killed_before_commit,
    "consumer-sigstop": consumer_frozen_past_session_timeout,
    "consumer-churn": consumers_churned,
    "hot-keys-race": hot_keys_race,
    "poison-event": poison_event,
}
