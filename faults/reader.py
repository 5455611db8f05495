"""A reader of the home feed through both API instances, checking the monotonic property as it goes.

The monotonic property, per member: a first page never lacks a post an
earlier first page showed that still falls inside its range (the feed never
goes backwards), and never lacks one of the member's own posts acknowledged
before the read began (own posts stay visible). The workload never deletes,
so any such absence is a violation.

Reads alternate between the instances; a read refused at connect (the
instance cut off) is retried on the other at once, as a balancer does. The
report counts failed attempts, failed reads (both instances failed), the
longest time without a successful read, and where pages came from.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import httpx
from feedfabric.core.auth import issue_token

LIMIT = 30


@dataclass
class ReaderReport:
    reads: int = 0
    attempts_failed: int = 0
    reads_failed: int = 0
    backwards: int = 0
    own_missing: int = 0
    own_posts: int = 0
    longest_unavailable_s: float = 0.0
    sources: Counter[str] = field(default_factory=Counter)
    timeline: list[tuple[float, str, float]] = field(default_factory=list)  # (time, source, seconds)
    examples: list[str] = field(default_factory=list)

    @property
    def error_rate(self) -> float:
        attempts = self.reads + self.reads_failed
        return self.reads_failed / attempts if attempts else 0.0

    def line(self) -> str:
        return (
            f"reader: {self.reads} reads, error rate {self.error_rate:.1%} ({self.attempts_failed} attempts failed),"
            f" longest unavailable {self.longest_unavailable_s:.2f}s, backwards {self.backwards},"
            f" own posts missing {self.own_missing} of {self.own_posts}, sources {dict(self.sources)}"
        )

    def seconds_from(self, source: str, since: float, until: float) -> float:
        """Seconds between the first and last page served from `source` in the window."""
        hits = [t for t, s, _ in self.timeline if s == source and since <= t <= until]
        return hits[-1] - hits[0] if hits else 0.0


class Reader:
    def __init__(self, urls: list[str], members: list[str], secret: str, post_every_s: float = 0.7) -> None:
        self.urls = urls
        self.members = members
        self.tokens = {m: issue_token(secret, m, ttl=7200) for m in members}
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(4.0, connect=2.0))
        self.report = ReaderReport()
        self.seen: dict[str, set[uuid.UUID]] = {m: set() for m in members}
        self.own: dict[str, list[tuple[float, uuid.UUID]]] = {m: [] for m in members}
        self.post_every_s = post_every_s
        self._turn = 0

    async def _request(self, method: str, path: str, member: str, **kw: object) -> httpx.Response | None:
        """One instance, then the other when the first failed; None when both failed."""
        self._turn += 1
        order = [self.urls[(self._turn + i) % len(self.urls)] for i in range(len(self.urls))]
        for url in order:
            try:
                response = await self.http.request(
                    method, url + path, headers={"Authorization": f"Bearer {self.tokens[member]}"}, **kw
                )  # type: ignore[arg-type]
                if response.status_code < 500:
                    return response
            except httpx.HTTPError:
                pass
            self.report.attempts_failed += 1
        return None

    async def _post(self, member: str, n: int) -> None:
        query = "mutation($c: String!) { createPost(input: {content: $c}) { id } }"
        response = await self._request(
            "POST", "/graphql", member, json={"query": query, "variables": {"c": f"own {n}"}}
        )
        if response is None or response.status_code != 200:
            return
        body = response.json()
        if body.get("errors") or not body.get("data"):
            return
        self.own[member].append((time.monotonic(), uuid.UUID(body["data"]["createPost"]["id"])))
        self.report.own_posts += 1

    async def writer(self, stop: asyncio.Event) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            await self._post(self.members[n % len(self.members)], n)
            await asyncio.sleep(self.post_every_s)

    async def run(self, stop: asyncio.Event) -> ReaderReport:
        writer = asyncio.create_task(self.writer(stop))
        last_ok = time.monotonic()
        i = 0
        while not stop.is_set():
            member = self.members[i % len(self.members)]
            i += 1
            started = time.monotonic()
            response = await self._request("GET", "/userfeed/home", member, params={"limit": LIMIT})
            now = time.monotonic()
            if response is None or response.status_code != 200:
                self.report.reads_failed += 1
                self.report.longest_unavailable_s = max(self.report.longest_unavailable_s, now - last_ok)
                await asyncio.sleep(0.05)
                continue
            self.report.longest_unavailable_s = max(self.report.longest_unavailable_s, now - last_ok)
            last_ok = now
            self.report.reads += 1
            body = response.json()
            source = str(body.get("source", "?"))
            self.report.sources[source] += 1
            self.report.timeline.append((now, source, now - started))
            self._check(member, [uuid.UUID(p["id"]) for p in body["posts"]], started)
            await asyncio.sleep(0.02)
        await writer
        await self.http.aclose()
        return self.report

    def _check(self, member: str, ids: list[uuid.UUID], started: float) -> None:
        floor = min(ids) if len(ids) >= LIMIT else None
        page = set(ids)
        seen = self.seen[member]
        gone = [s for s in seen if (floor is None or s >= floor) and s not in page]
        if gone:
            self.report.backwards += len(gone)
            if len(self.report.examples) < 5:
                self.report.examples.append(f"{member}: {len(gone)} seen posts missing, e.g. {gone[0]}")
        own = [p for t, p in self.own[member] if t < started and (floor is None or p >= floor) and p not in page]
        if own:
            self.report.own_missing += len(own)
            if len(self.report.examples) < 5:
                self.report.examples.append(f"{member}: own post {own[0]} missing")
        seen |= page
        if floor is not None:
            self.seen[member] = {s for s in seen if s >= floor}
            self.own[member] = [(t, p) for t, p in self.own[member] if p >= floor]
