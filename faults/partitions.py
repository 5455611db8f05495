"""The network cases: partitions and failovers between hosts (faults/hosts.py), checked after heal.

Each case starts the whole system as hosts, makes members and follows, then
runs the workload (writers through the first API instance, failing over to
the second when it cannot connect) and the monotonic reader (faults/reader.py)
through both instances while the fault is injected; after heal the pipeline
drains and faults/checker.py checks what was lost, duplicated or reordered.
A reader that saw the feed go backwards, or an own post missing, fails the
case too. Each case reports its own figures.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from feedfabric.core.auth import issue_token
from feedfabric.db import posts as posts_db
from feedfabric.feeds.timelines import feed_key

from faults import checker
from faults.harness import SECRET, Client, Record, quiesce, retrying, run_load, setup_graph
from faults.hosts import REDIS_HOSTS, REDIS_PORT, Stack, open_stack
from faults.reader import Reader, ReaderReport


@dataclass
class Result:
    name: str
    injected: str
    verdict: checker.Verdict
    reader: ReaderReport
    seconds: float
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            self.verdict.ok
            and self.reader.backwards == 0
            and self.reader.own_missing == 0
            and "FAILED" not in self.figures
        )

    def report(self) -> str:
        status = "PASS" if self.ok else "FAIL"
        figures = ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in self.figures.items())
        facts = ", ".join(f"{k} {v}" for k, v in self.verdict.facts.items())
        text = (
            f"[{status}] {self.name} ({self.seconds:.0f}s): {self.injected}\n    {figures}\n"
            f"    {self.verdict.line()}\n    {self.reader.line()}\n    {facts}"
        )
        for example in self.reader.examples:
            text += f"\n    reader: {example}"
        if self.verdict.verify_status != 0:
            text += "\n    verify: " + self.verdict.verify_output.replace("\n", "\n    verify: ")
        return text


@dataclass
class Params:
    short: bool
    root: Path

    @property
    def load_s(self) -> float:
        return 14.0 if self.short else 30.0


class FailoverClient(Client):
    """Writes through the first instance; a request that could not connect goes to the other (never sent, so
    never doubled)."""

    def __init__(self, urls: list[str]) -> None:
        super().__init__(urls[0])
        self.other = httpx.AsyncClient(base_url=urls[1], timeout=10, limits=httpx.Limits(max_connections=200))

    async def aclose(self) -> None:
        await super().aclose()
        await self.other.aclose()

    async def gql(self, who: str, query: str, variables: dict[str, Any] | None = None) -> Any:
        try:
            return await super().gql(who, query, variables)
        except httpx.ConnectError:
            from feedfabric.core.auth import issue_token

            response = await self.other.post(
                "/graphql",
                json={"query": query, "variables": variables or {}},
                headers={"Authorization": f"Bearer {issue_token(SECRET, who, ttl=3600)}"},
            )
            body = response.json()
            if body.get("errors"):
                raise RuntimeError(str(body["errors"])[:300]) from None
            return body["data"]


Inject = Callable[[Stack, Client, dict[str, Any]], Awaitable[str]]


async def _run(
    p: Params,
    name: str,
    inject: Inject,
    *,
    sync_standby: bool = True,
    members: int = 24,
    follows: int = 5,
    writers: int = 4,
    env: dict[str, str] | None = None,
    extra_check: Callable[[Stack, checker.Verdict, dict[str, Any]], Awaitable[None]] | None = None,
) -> Result:
    started = time.monotonic()
    stack = await open_stack(name, p.root, sync_standby=sync_standby, env=env)
    client = FailoverClient([stack.api_url_of("api1"), stack.api_url_of("api2")])
    figures: dict[str, Any] = {}
    try:
        names = await setup_graph(client, members, follows)
        record = Record()
        stop = asyncio.Event()
        reader = Reader([stack.api_url_of("api1"), stack.api_url_of("api2")], names[:4], SECRET)
        READERS[name] = reader
        reading = asyncio.create_task(reader.run(stop))
        load = asyncio.create_task(run_load(client, names, record, 3600, writers=writers, readers=0, stop=stop))
        await asyncio.sleep(p.load_s / 3)
        figures["_readers"] = names[:4]  # the reader's members (a case may aim its fault at them)
        injected = await inject(stack, client, figures)  # returns healed
        figures.pop("_readers", None)
        await asyncio.sleep(p.load_s / 3)
        stop.set()
        await load
        report = await reading
        figures["backlog drained s"] = await quiesce(stack, timeout=120)
        verdict = await checker.check(stack, record, client)
        if extra_check is not None:
            await extra_check(stack, verdict, figures)
        if "_flushed" in figures:
            figures["s until 95% of pages from redis"] = _back_to_redis(report, figures.pop("_flushed"))
        if "postgres reads from" in figures:
            since, until = figures.pop("postgres reads from")
            window = [(t, src) for t, src, _ in report.timeline if since <= t <= until]
            from_pg = [t for t, src in window if src != "redis"]
            figures["reads from postgres during the fault"] = f"{len(from_pg)}/{len(window)}"
            figures["s of postgres-served reads"] = from_pg[-1] - from_pg[0] if len(from_pg) > 1 else 0.0
        return Result(name, injected, verdict, report, time.monotonic() - started, figures)
    finally:
        await client.aclose()
        stack.stop()


def _back_to_redis(report: ReaderReport, since: float, window: int = 20) -> float:
    """Seconds from `since` until the last `window` pages were at least 95 % Redis-served; -1: never."""
    after = [(t, s) for t, s, _ in report.timeline if t >= since]
    for i in range(window, len(after) + 1):
        recent = after[i - window : i]
        if sum(s == "redis" for _, s in recent) >= 0.95 * window:
            return recent[-1][0] - since
    return -1.0


async def _until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what} not within {timeout:.0f}s")
        await asyncio.sleep(0.1)
    return time.monotonic() - started


def _master_hosts(stack: Stack, via: str) -> list[str]:
    roles = stack.cluster_roles(via)
    by_address = {f"{stack.addr(h)}:{REDIS_PORT}": h for h in REDIS_HOSTS}
    return [by_address[a] for a, r in roles.items() if r == "master" and a in by_address]


async def _master_of_member(stack: Stack, via: str, external_id: str) -> str:
    """The Redis host that is master of the slot of a member's timeline (`feed:{memberId}`)."""
    conn = await asyncpg.connect(stack.database_url)
    try:
        member_id = await conn.fetchval("SELECT id FROM members WHERE external_id = $1", external_id)
    finally:
        await conn.close()
    slot = int(stack.redis_cli("cluster", "keyslot", feed_key(member_id), node=via).strip())
    by_address = {f"{stack.addr(h)}:{REDIS_PORT}": h for h in REDIS_HOSTS}
    for line in stack.redis_cli("cluster", "nodes", node=via).splitlines():
        parts = line.split()
        if len(parts) < 9 or "master" not in parts[2]:
            continue
        for served in parts[8:]:
            low, _, high = served.partition("-")
            if not served.startswith("[") and int(low) <= slot <= int(high or low):
                return by_address[parts[1].split("@")[0]]
    raise RuntimeError(f"no master serves slot {slot}")


# -- 1 ----------------------------------------------------------------------------


async def redis_master_cut(p: Params) -> Result:
    async def inject(stack: Stack, client: Client, fig: dict[str, Any]) -> str:
        # The master serving the reader's first member's timeline: their pages must cross the cut and the failover.
        victim = await _master_of_member(stack, stack.redis_nodes[0], fig["_readers"][0])
        witness = next(f"{stack.addr(h)}:{REDIS_PORT}" for h in REDIS_HOSTS if h not in (victim,))
        victim_address = f"{stack.addr(victim)}:{REDIS_PORT}"
        cut_at = time.monotonic()
        stack.net.cut_host(victim)

        async def promoted() -> bool:
            masters_now = await asyncio.to_thread(_master_hosts, stack, witness)
            return victim not in masters_now and len(masters_now) == 3

        fig["failover s"] = await _until(promoted, 30, "replica promoted")
        await asyncio.sleep(3.0)  # fan-out keeps going on the promoted replica
        stack.net.heal()
        fig["postgres reads from"] = (cut_at, time.monotonic())

        async def rejoined() -> bool:
            roles = await asyncio.to_thread(stack.cluster_roles, victim_address)
            return roles.get(victim_address) == "slave"

        fig["rejoined as replica s"] = await _until(rejoined, 60, "old master rejoined as a replica")
        await stack.wait_cluster_ok()
        return f"Redis master {victim} cut off (cluster-node-timeout 2000 ms); its replica promoted; healed"

    return await _run(p, "1-redis-master-cut", inject)


# -- 2 ----------------------------------------------------------------------------


async def postgres_failover(p: Params) -> Result:
    async def inject(stack: Stack, client: Client, fig: dict[str, Any]) -> str:
        stack.net.cut_host("pg1")
        lost_at = time.monotonic()
        await asyncio.sleep(1.0)
        stack.kill_service("pg1")  # fenced: the old primary never comes back as a second primary
        await stack.promote_standby()
        await retrying(lambda: client.post("m000", "after failover"), attempts=240)
        fig["s until writes succeed"] = time.monotonic() - lost_at
        stack.net.heal()
        return "Postgres primary cut off, fenced (killed), standby promoted (synchronous_standby_names '*')"

    return await _run(p, "2-postgres-failover", inject)


# -- 3 ----------------------------------------------------------------------------


async def standby_cut(p: Params) -> Result:
    async def inject(stack: Stack, client: Client, fig: dict[str, Any]) -> str:
        stack.net.cut_host("pg2")
        lags: list[float] = []
        for _ in range(8):
            await asyncio.sleep(1.0)
            lags.append(await _metric(stack, "api2", "feedfabric_replica_lag_seconds"))
        fig["replica lag metric max s"] = max(lags)
        stack.net.heal()
        healed = time.monotonic()

        async def caught_up() -> bool:
            return (
                await _metric(stack, "api2", "feedfabric_replica_lag_seconds") < 0.5
                and (await _metric(stack, "api2", "feedfabric_replica_usable")) == 1.0
            )

        fig["s until replica read again"] = (
            await _until(caught_up, 60, "replica caught up") + (time.monotonic() - healed) * 0
        )
        return "standby cut off for 8 s while members wrote (asynchronous standby), healed"

    return await _run(p, "3-standby-cut", inject, sync_standby=False)


async def _metric(stack: Stack, host: str, name: str) -> float:
    async with httpx.AsyncClient(timeout=3) as http:
        try:
            text = (await http.get(stack.api_url_of(host) + "/metrics")).text
        except httpx.HTTPError:
            return float("nan")
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


# -- 4 ----------------------------------------------------------------------------


async def api_cut_from_redis_then_postgres(p: Params) -> Result:
    async def inject(stack: Stack, client: Client, fig: dict[str, Any]) -> str:
        for r in REDIS_HOSTS:
            stack.net.cut_pair("api1", r)
        cut_at = time.monotonic()
        pages = 0
        async with httpx.AsyncClient(timeout=10) as http:
            from faults.checker import _token

            for _ in range(20):
                response = await http.get(
                    stack.api_url_of("api1") + "/userfeed/home",
                    params={"limit": 30},
                    headers={"Authorization": f"Bearer {_token('m001')}"},
                )
                pages += response.status_code == 200 and response.json().get("source") == "postgres"
                await asyncio.sleep(0.2)
        fig["api1 pages from postgres while cut from redis"] = f"{pages}/20"
        fig["postgres reads from"] = (cut_at, time.monotonic())
        stack.net.heal()
        await asyncio.sleep(1.0)
        for pg in ("pg1", "pg2"):
            stack.net.cut_pair("api1", pg)
        cut_pg = time.monotonic()

        async def in_flight(graphql: bool) -> tuple[int, str, float]:
            started = time.monotonic()
            headers = {"Authorization": f"Bearer {_token('m002')}"}
            async with httpx.AsyncClient(timeout=30) as http:
                if graphql:
                    query = "{ homeFeed(first: 30) { source edges { cursor } } }"
                    response = await http.post(
                        stack.api_url_of("api1") + "/graphql", json={"query": query}, headers=headers
                    )
                else:
                    response = await http.get(
                        stack.api_url_of("api1") + "/userfeed/home", params={"limit": 30}, headers=headers
                    )
            code = ""
            try:
                body = response.json()
                code = (
                    str(((body.get("errors") or [{}])[0].get("extensions") or {}).get("code", ""))
                    if graphql
                    else str(body.get("error", {}).get("code", ""))
                )
            except ValueError:
                pass
            return response.status_code, code, time.monotonic() - started

        flights = [asyncio.create_task(in_flight(False)), asyncio.create_task(in_flight(True))]

        async def not_ready() -> bool:
            async with httpx.AsyncClient(timeout=5) as http:
                try:
                    return (await http.get(stack.api_url_of("api1") + "/readyz")).status_code != 200
                except httpx.HTTPError:
                    return True

        fig["s until /readyz fails"] = await _until(not_ready, 30, "/readyz failing")
        (rest_status, rest_code, rest_took), (gql_status, gql_code, gql_took) = await asyncio.gather(*flights)
        fig["in-flight REST request"] = f"{rest_status} {rest_code} after {rest_took:.1f}s"
        fig["in-flight GraphQL request"] = f"{gql_status} {gql_code} after {gql_took:.1f}s"
        if (rest_status, rest_code) != (503, "service.unavailable") or gql_code != "SERVICE_UNAVAILABLE":
            fig["FAILED"] = "an in-flight request did not end with SERVICE_UNAVAILABLE"
        elif max(rest_took, gql_took) > 5.0 + 2.0:
            fig["FAILED"] = "an in-flight request outlived the request timeout"
        await asyncio.sleep(max(0.0, 6.0 - (time.monotonic() - cut_pg)))
        stack.net.heal()
        return "api1 cut from every Redis node for 4 s, healed; then from both Postgres hosts for 6 s, healed"

    return await _run(p, "4-api-cut-redis-then-postgres", inject)


# -- 5 ----------------------------------------------------------------------------


async def relay_and_worker_cut(p: Params) -> Result:
    async def inject(stack: Stack, client: Client, fig: dict[str, Any]) -> str:
        stack.net.cut_pair("relay", "broker")
        await asyncio.sleep(5.0)
        stack.net.heal()
        await asyncio.sleep(2.0)
        for r in REDIS_HOSTS:
            stack.net.cut_pair("worker", r)
        await asyncio.sleep(5.0)
        stack.net.heal()
        return "relay cut from the broker for 5 s mid-batch, healed; worker cut from every Redis node for 5 s, healed"

    return await _run(p, "5-relay-broker-worker-redis-cut", inject, env={"FANOUT_BATCH_SIZE": "2"})


# -- 6 ----------------------------------------------------------------------------


async def worker_cut_from_postgres(p: Params) -> Result:
    async def inject(stack: Stack, client: Client, fig: dict[str, Any]) -> str:
        for pg in ("pg1", "pg2"):
            stack.net.cut_pair("worker", pg)
        await asyncio.sleep(8.0)
        stack.net.heal()
        return "worker cut from both Postgres hosts for 8 s while it still reached the broker, healed"

    return await _run(p, "6-worker-cut-from-postgres", inject)


# -- 7 ----------------------------------------------------------------------------

HOME_SUB = "subscription($since: String) { homeTimeline(since: $since) { cursor post { id } } }"


class Subscriber:
    """A homeTimeline subscription (graphql-transport-ws) that moves to the other instance when its socket
    goes quiet (WebSocket pings every second, 2 s to answer) and resumes there with `since:` its last cursor."""

    def __init__(self, stack: Stack, who: str, since: str) -> None:
        self.urls = [stack.api_url_of("api1"), stack.api_url_of("api2")]
        self.token = issue_token(SECRET, who, ttl=7200)
        self.since = since
        self.received: list[str] = []
        self.reconnects = 0
        self.subscribed_at: list[float] = []
        self.on = 0

    async def run(self, stop: asyncio.Event) -> None:
        from websockets.asyncio.client import connect

        while not stop.is_set():
            url = self.urls[self.on].replace("http://", "ws://") + "/graphql"
            try:
                async with connect(
                    url,
                    subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
                    ping_interval=1,
                    ping_timeout=2,
                    open_timeout=3,
                    close_timeout=1,  # a socket no packet reaches closes at once, not after 10 s
                ) as ws:
                    await ws.send(
                        json.dumps({"type": "connection_init", "payload": {"authorization": f"Bearer {self.token}"}})
                    )
                    ack = json.loads(await asyncio.wait_for(ws.recv(), 5))
                    if ack.get("type") != "connection_ack":
                        raise RuntimeError(f"no ack: {ack}")
                    await ws.send(
                        json.dumps(
                            {
                                "id": "1",
                                "type": "subscribe",
                                "payload": {"query": HOME_SUB, "variables": {"since": self.since}},
                            }
                        )
                    )
                    self.subscribed_at.append(time.monotonic())
                    while not stop.is_set():
                        try:
                            raw = await asyncio.wait_for(ws.recv(), 0.5)
                        except TimeoutError:
                            continue
                        message = json.loads(raw)
                        if message.get("type") == "next":
                            item = message["payload"]["data"]["homeTimeline"]
                            self.received.append(item["post"]["id"])
                            self.since = item["cursor"]
                        elif message.get("type") == "ping":
                            await ws.send(json.dumps({"type": "pong"}))
                        elif message.get("type") in ("error", "complete"):
                            raise RuntimeError(str(message)[:200])
                    return
            except Exception:  # noqa: BLE001 - the socket died or never opened: the other instance
                self.reconnects += 1
                self.on = 1 - self.on
                await asyncio.sleep(0.2)


async def subscriber_across_partition(p: Params) -> Result:
    holder: dict[str, Any] = {}

    async def inject(stack: Stack, client: Client, fig: dict[str, Any]) -> str:
        who = "m005"
        first = await retrying(lambda: client.home(who))
        since = first[0] if first else None
        sub = Subscriber(stack, who, since or "")
        stop = asyncio.Event()
        task = asyncio.create_task(sub.run(stop))
        await asyncio.sleep(3.0)
        cut_at = time.monotonic()
        stack.net.cut_host("api1")
        await asyncio.sleep(6.0)
        stack.net.heal()
        holder.update(cut_at=cut_at, sub=sub, stop=stop, task=task, who=who, since=since)
        return "a homeTimeline subscriber's instance (api1) cut off for 6 s; the client resumes on api2 with since:"

    async def check(stack: Stack, verdict: checker.Verdict, fig: dict[str, Any]) -> None:
        sub: Subscriber = holder["sub"]
        conn = await asyncpg.connect(stack.database_url)
        try:
            member = await conn.fetchval("SELECT id FROM members WHERE external_id = $1", holder["who"])
            since = holder["since"]
            rows = await posts_db.home_page(conn, member, None, 1000)
            expected = {str(r.id) for r in rows if since is None or str(r.id) > since}
        finally:
            await conn.close()
        deadline = time.monotonic() + 15
        while not expected <= set(sub.received) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        holder["stop"].set()
        await holder["task"]
        got = set(sub.received)
        verdict.lost["live items missing after resume"] = len(expected - got)
        verdict.duplicated["live items received twice"] = len(sub.received) - len(got)
        fig["live items"] = len(sub.received)
        # Live items reach a socket in the order their events reach its instance, not in cursor order; a
        # client resuming from its last cursor rather than its newest gets the newer ones again.
        fig["received after a newer one"] = sum(1 for a, b in zip(sub.received, sub.received[1:]) if b < a)
        fig["reconnects"] = sub.reconnects
        resumed = [t for t in sub.subscribed_at if t > holder["cut_at"]]
        fig["s from cut to resumed on api2"] = resumed[0] - holder["cut_at"] if resumed else -1.0

    return await _run(p, "7-subscriber-across-partition", inject, extra_check=check)


# -- 8 ----------------------------------------------------------------------------


async def redis_flushed(p: Params) -> Result:
    async def inject(stack: Stack, client: Client, fig: dict[str, Any]) -> str:
        masters = _master_hosts(stack, stack.redis_nodes[0])
        pg_before = await _pg_busy(stack)
        reads_before = len(reader_reads(stack))
        flushed = time.monotonic()
        for m in masters:
            await asyncio.to_thread(stack.redis_cli, "flushall", node=f"{stack.addr(m)}:{REDIS_PORT}")
        fig["_flushed"] = flushed
        await asyncio.sleep(p.load_s / 2)
        reads = len(reader_reads(stack)) - reads_before
        fig["postgres active ms per reader page meanwhile (all work)"] = (await _pg_busy(stack) - pg_before) / max(
            reads, 1
        )
        fig["postgres reads from"] = (flushed, time.monotonic())
        return "FLUSHALL on every Redis master under load"

    result = await _run(p, "8-redis-flushed", inject)
    return result


def reader_reads(stack: Stack) -> list[tuple[float, str, float]]:
    return READERS[stack.name].report.timeline


READERS: dict[str, Reader] = {}


async def _pg_busy(stack: Stack) -> float:
    conn = await asyncpg.connect(stack.database_url)
    try:
        return float(await conn.fetchval("SELECT coalesce(sum(active_time), 0) FROM pg_stat_database"))
    finally:
        await conn.close()


CASES: dict[str, Callable[[Params], Awaitable[Result]]] = {
    "1": redis_master_cut,
    "2": postgres_failover,
    "3": standby_cut,
    "4": api_cut_from_redis_then_postgres,
    "5": relay_and_worker_cut,
    "6": worker_cut_from_postgres,
    "7": subscriber_across_partition,
    "8": redis_flushed,
}


async def run_cases(names: list[str], runs: int, short: bool, root: Path) -> list[Result]:
    """Every named case `runs` times in a row, each reported as it ends."""
    from faults.network import terminating_cleanly

    results: list[Result] = []
    with terminating_cleanly():
        for run_no in range(1, runs + 1):
            for name in names:
                case_root = root / f"run-{run_no}"
                try:
                    result = await CASES[name](Params(short, case_root))
                except Exception as exc:  # noqa: BLE001 - a case that cannot finish is a failure, reported
                    verdict = checker.Verdict(verify_status=-1, verify_output=f"{type(exc).__name__}: {exc}")
                    verdict.lost["case did not finish"] = 1
                    result = Result(name, f"did not finish: {type(exc).__name__}: {exc}", verdict, ReaderReport(), 0)
                print(f"run {run_no}/{runs} " + result.report(), flush=True)
                results.append(result)
    return results
