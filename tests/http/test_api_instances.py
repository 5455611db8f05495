"""Several API instances on one Postgres, Redis and broker, as docs/operations.md runs them behind a balancer.

Two real `feedfabric api` processes (different FEEDFABRIC_INSTANCE), one relay: each instance's realtime
consumer (`realtime-<instance>`) reads every partition, so a post reaches subscribers on both, a client that reconnects to the other instance
resumes with `since`, and the rate limit and persisted queries are one per cluster (Redis), not per process.
Nothing a client does needs to stick to an instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from feedfabric.core.settings import Settings
from feedfabric.core.topics import ensure_topics
from feedfabric.ops.devstack import free_port

from tests.pipeline_support import relay, running
from tests.realtime_support import HOME_SUB, TRANSPORT_WS, WsClient, ws_client
from tests.support import Api

RATE_LIMIT = 12


@dataclass
class Instance:
    name: str
    url: str
    api: Api

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/graphql"


def _env(settings: Settings, instance: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": settings.database_url or "",
        "REDIS_URL": settings.redis_url or "",
        "KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers or "",
        "KAFKA_TOPIC_PREFIX": settings.kafka_topic_prefix,
        "FEEDFABRIC_JWT_SECRET": settings.jwt_secret,
        "FEEDFABRIC_INSTANCE": instance,
        "FEEDFABRIC_DATA_DIR": str(settings.feedfabric_data_dir),
        "RATE_LIMIT_OPERATIONS": str(RATE_LIMIT),
        "LOG_LEVEL": "WARNING",
    }


@contextlib.asynccontextmanager
async def instances(settings: Settings, names: tuple[str, ...]) -> AsyncIterator[list[Instance]]:
    """`feedfabric api` processes, one per name, each on its own port; stopped (SIGTERM) on exit."""
    procs: list[subprocess.Popen[bytes]] = []
    started: list[Instance] = []
    try:
        async with contextlib.AsyncExitStack() as stack:
            for name in names:
                port = free_port()
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "feedfabric", "api", "--port", str(port)],
                        env=_env(settings, name),
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
                url = f"http://127.0.0.1:{port}"
                client = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=10))
                started.append(Instance(name, url, Api(client, settings)))
            for instance, proc in zip(started, procs, strict=True):
                await _healthy(instance, proc)
            yield started
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def _healthy(instance: Instance, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{instance.name} exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if (await instance.api.client.get("/healthz")).status_code == 200:
                return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{instance.name} did not start")


async def _next_post(ws: WsClient, timeout: float = 10.0) -> tuple[str, str]:
    data = await ws.next_data(timeout)
    item = data["homeTimeline"]
    return item["post"]["content"], item["cursor"]


async def _until_live(author: Api, token: str, sockets: list[WsClient]) -> None:
    """Each instance's realtime consumer reads from the latest offset once it has joined: probe posts until
    every socket has seen one, so what follows is delivered live rather than lost to positioning."""
    waiting = set(range(len(sockets)))
    for n in range(60):
        await author.post(token, f"probe {n}")
        for i in list(waiting):
            with contextlib.suppress(TimeoutError):
                await sockets[i].next_data(0.5)
                waiting.discard(i)
        if not waiting:
            return
    raise AssertionError("realtime never became live on every instance")


async def _drain(ws: WsClient) -> None:
    with contextlib.suppress(TimeoutError):
        while True:
            await ws.next_data(1.0)


async def test_two_instances_share_realtime_resume_rate_limits_and_persisted_queries(settings: Settings) -> None:
    await ensure_topics(settings)
    async with instances(settings, ("api-a", "api-b")) as (a, b), running(relay(settings).run):
        alice = await a.api.member("alice")
        bob, carol = await b.api.member("bob"), await a.api.member("carol")
        await b.api.follow(bob, "alice")
        await a.api.follow(carol, "alice")

        async with ws_client(a, TRANSPORT_WS, bob) as on_a, ws_client(b, TRANSPORT_WS, carol) as on_b:
            await on_a.subscribe(HOME_SUB)
            await on_b.subscribe(HOME_SUB)
            await _until_live(a.api, alice, [on_a, on_b])
            await _drain(on_a)
            await _drain(on_b)

            # Each instance reads every partition itself (realtime-<instance>, assigned by hand, never sharing
            # a group's partitions): a post made through either reaches subscribers on both.
            await b.api.post(alice, "to everyone")
            assert (await _next_post(on_a))[0] == "to everyone"
            seen, cursor = await _next_post(on_b)
            assert seen == "to everyone"

        # Carol was on b; while she is away alice posts; she reconnects to a and resumes from her cursor.
        await a.api.post(alice, "while away")
        async with ws_client(a, TRANSPORT_WS, carol) as back:
            await back.subscribe(HOME_SUB, {"since": cursor})
            assert (await _next_post(back))[0] == "while away"
            await b.api.post(alice, "live again")
            assert (await _next_post(back))[0] == "live again"

        # One rate limit per member across instances: alternate, and the cluster's limit is reached.
        dave = await a.api.member("dave")
        answers = []
        for n in range(RATE_LIMIT + 1):
            instance = (a, b)[n % 2]
            answers.append(await instance.api.error_codes("{ viewer { id } }", token=dave))
        spent_by_profile = 1
        assert answers[: RATE_LIMIT - spent_by_profile] == [[]] * (RATE_LIMIT - spent_by_profile)
        assert answers[-1] == ["RATE_LIMITED"]

        # A query persisted through one instance runs by its hash on the other.
        query = "query Me { viewer { username } }"
        digest = hashlib.sha256(query.encode()).hexdigest()
        persisted = {"persistedQuery": {"version": 1, "sha256Hash": digest}}
        erin = await b.api.member("erin")
        headers = {"Authorization": f"Bearer {erin}"}
        first = await a.api.client.post("/graphql", json={"query": query, "extensions": persisted}, headers=headers)
        assert first.json()["data"] == {"viewer": {"username": "erin"}}
        by_hash = await b.api.client.post("/graphql", json={"extensions": persisted}, headers=headers)
        assert by_hash.json()["data"] == {"viewer": {"username": "erin"}}
        assert not by_hash.json().get("errors")
