"""Shared fixtures: one real Postgres, Redis and Kafka-protocol broker per test session.

Every test gets its own database (a copy of a migrated template), an empty
Redis database and its own topic prefix, so tests never see each other's data.

A test marked `redis_cluster` runs twice: on the one Redis, and on a real
3-master Redis Cluster (started once per session, the first time a test asks
for it) with REDIS_CLUSTER on, through the same `redis_url`, `settings` and
`redis` fixtures.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.settings import Settings
from feedfabric.db.migrate import migrate
from feedfabric.db.pool import create_pool
from feedfabric.db.redisclient import create_redis
from feedfabric.ops import devstack

if TYPE_CHECKING:
    from tests.support import Api

TEMPLATE = "feedfabric_template"


@pytest.fixture(scope="session")
def stack() -> Iterator[devstack.DevStack]:
    data_dir = Path(tempfile.mkdtemp(prefix="feedfabric-test-"))
    running = devstack.start(data_dir)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def service_dir() -> Iterator[Path]:
    """A directory for services a test starts itself, outside pytest's tmp_path: as root, Postgres runs as an
    unprivileged user who must traverse the path, and every pytest session started on the machine resets
    /tmp/pytest-of-<user> to 0700 (initdb then failed now and then when another suite started beside ours)."""
    made = Path(tempfile.mkdtemp(prefix="feedfabric-test-case-"))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def _server_url(database_url: str, database: str) -> str:
    base, _, _ = database_url.rpartition("/")
    return f"{base}/{database}"


@pytest.fixture(scope="session")
def template_db(stack: devstack.DevStack) -> str:
    async def build() -> str:
        admin = await asyncpg.connect(_server_url(stack.postgres.url, "postgres"))
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {TEMPLATE}")
            await admin.execute(f"CREATE DATABASE {TEMPLATE}")
        finally:
            await admin.close()
        url = _server_url(stack.postgres.url, TEMPLATE)
        await migrate(url)
        return url

    return asyncio.run(build())


@pytest.fixture
async def database_url(stack: devstack.DevStack, template_db: str) -> AsyncIterator[str]:
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(_server_url(stack.postgres.url, "postgres"))
    try:
        await admin.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    finally:
        await admin.close()
    yield _server_url(stack.postgres.url, name)
    admin = await asyncpg.connect(_server_url(stack.postgres.url, "postgres"))
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await admin.close()


_redis_db_counter = iter(range(1, 10_000))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "redis_cluster: run on one Redis and on a 3-master Redis Cluster")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("redis_cluster") and "redis_mode" in metafunc.fixturenames:
        metafunc.parametrize("redis_mode", ["single", "cluster"], indirect=True)


@pytest.fixture
def redis_mode(request: pytest.FixtureRequest) -> str:
    """ "single" unless the test is marked `redis_cluster` (then both, one run each)."""
    return str(getattr(request, "param", "single"))


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[devstack.RedisClusterNodes]:
    data_dir = Path(tempfile.mkdtemp(prefix="feedfabric-test-cluster-"))
    cluster = devstack.start_redis_cluster(data_dir)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
async def redis_url(stack: devstack.DevStack, redis_mode: str, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A freshly flushed Redis logical database (16 exist; tests take them in turn), or the flushed cluster."""
    if redis_mode == "cluster":
        cluster: devstack.RedisClusterNodes = request.getfixturevalue("redis_cluster")
        for node in cluster.nodes:
            client = aioredis.from_url(node.url)
            await client.flushall()
            await client.aclose()
        yield cluster.url
        return
    index = next(_redis_db_counter) % 16
    base, _, _ = stack.redis.url.rpartition("/")
    url = f"{base}/{index}"
    client = aioredis.from_url(url)
    await client.flushdb()
    await client.aclose()
    yield url


@pytest.fixture
def settings(database_url: str, redis_url: str, redis_mode: str, stack: devstack.DevStack, tmp_path: Path) -> Settings:
    return Settings(
        database_url=database_url,
        redis_url=redis_url,
        redis_cluster=redis_mode == "cluster",
        kafka_bootstrap_servers=stack.kafka.url,
        feedfabric_jwt_secret="test-secret-" + uuid.uuid4().hex,
        kafka_topic_prefix=f"t{uuid.uuid4().hex[:10]}.",
        feedfabric_data_dir=tmp_path,
        outbox_idle_ms=50,
        # /readyz must read a live dependency as up however loaded the test machine is; a dead one is refused
        # at once whatever the timeout.
        readiness_check_timeout_seconds=30.0,
    )


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    created = await create_pool(database_url, min_size=1, max_size=10)
    yield created
    await created.close()


@pytest.fixture
async def redis(redis_url: str, redis_mode: str) -> AsyncIterator[aioredis.Redis]:
    client = create_redis(Settings(redis_url=redis_url, redis_cluster=redis_mode == "cluster"))
    yield client
    await client.aclose()


os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    from tests.support import make_api

    async with make_api(settings) as client:
        yield client
