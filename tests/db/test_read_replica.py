"""DATABASE_READ_URL: feed pages, hydration and lists read from a real streaming replica (pg_basebackup -R of
the test stack's Postgres), a member always sees their own writes, and a replica down or lagging past the
bound is not read. Replay is paused (pg_wal_replay_pause) to make the replica visibly stale."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.settings import Settings
from feedfabric.db.replica import ReadRouting, replayed_position, wal_position
from feedfabric.ops import devstack

from tests.pipeline_support import eventually
from tests.support import Api, GraphQLErrors, make_api

MEMBER_POSTS = """query($u: String!) { member(username: $u) { posts(first: 20) { edges { node { content } } } } }"""
POST = """query($id: ID!) { post(id: $id) { likeCount viewerHasLiked } }"""


@dataclass
class Replica:
    primary: devstack.Service
    data_dir: Path
    service: devstack.Service

    @property
    def server(self) -> str:
        return self.service.url.rpartition("/")[0]

    def stop(self) -> None:
        self.service.stop()

    def start(self) -> None:
        port = int(self.server.rpartition(":")[2])
        self.service = devstack.start_replica(self.primary, self.data_dir, port=port)


@pytest.fixture(scope="session")
def replica(stack: devstack.DevStack) -> Iterator[Replica]:
    """Started once, only for the tests that ask for it: a clone takes well under a second."""
    data_dir = Path(tempfile.mkdtemp(prefix="feedfabric-replica-"))
    made = Replica(stack.postgres, data_dir, devstack.start_replica(stack.postgres, data_dir))
    try:
        yield made
    finally:
        made.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
async def replica_url(replica: Replica, database_url: str) -> AsyncIterator[str]:
    """The test's database on the replica, once the replica has replayed its creation."""
    url = f"{replica.server}/{database_url.rpartition('/')[2]}"

    async def exists() -> bool:
        try:
            conn = await asyncpg.connect(url)
        except (asyncpg.InvalidCatalogNameError, OSError, asyncpg.CannotConnectNowError):
            return False
        await conn.close()
        return True

    await eventually(exists)
    yield url
    await set_replay(replica, paused=False)


async def set_replay(replica: Replica, *, paused: bool) -> None:
    conn = await asyncpg.connect(f"{replica.server}/postgres")
    try:
        await conn.execute("SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()")
        if paused:
            for _ in range(200):
                if await conn.fetchval("SELECT pg_get_wal_replay_pause_state()") == "paused":
                    break
                await asyncio.sleep(0.01)
    finally:
        await conn.close()


async def caught_up(database_url: str, replica_url: str) -> None:
    """Until the replica has replayed everything the primary had written when this was called."""
    primary = await asyncpg.connect(database_url)
    standby = await asyncpg.connect(replica_url)
    try:
        target = await wal_position(primary)
        await eventually(lambda: _replayed_past(standby, target))
    finally:
        await primary.close()
        await standby.close()


async def _replayed_past(conn: asyncpg.Connection, target: int) -> bool:
    return await replayed_position(conn) >= target


async def contents(api: Api, token: str, username: str) -> list[str]:
    data = await api.gql(MEMBER_POSTS, {"u": username}, token=token)
    return [e["node"]["content"] for e in data["member"]["posts"]["edges"]]


def with_replica(settings: Settings, replica_url: str, max_lag_ms: int = 60_000) -> Settings:
    return settings.model_copy(update={"database_read_url": replica_url, "read_replica_max_lag_ms": max_lag_ms})


async def test_others_read_the_lagging_replica_while_the_writer_sees_their_post_follow_and_like(
    settings: Settings, database_url: str, replica_url: str, replica: Replica
) -> None:
    async with make_api(with_replica(settings, replica_url)) as api:
        writer, reader = await api.member("writer"), await api.member("reader")
        other = await api.member("other")
        theirs = await api.post(other, "other's post")
        await caught_up(database_url, replica_url)
        await eventually(lambda: _sees(api, reader, "other", "other's post"))
        await set_replay(replica, paused=True)

        await api.post(writer, "my own post")
        await api.follow(writer, "other")
        await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": theirs}, token=writer)

        assert await contents(api, writer, "writer") == ["my own post"]
        assert (await api.gql(POST, {"id": theirs}, token=writer))["post"] == {"likeCount": 1, "viewerHasLiked": True}
        home = (await api.rest("GET", "/userfeed/home", token=writer)).json()
        assert [p["content"] for p in home["posts"]] == ["my own post", "other's post"]
        # Everyone else reads the replica, which has not replayed any of it: from the monitor's next look, as
        # one look that outran its timeout on a loaded machine sends every read to the primary until then.
        await eventually(lambda: _reads_none_of_it(api, reader, theirs))

        await set_replay(replica, paused=False)
        await eventually(lambda: _sees(api, reader, "writer", "my own post"))


async def test_a_new_member_sees_their_profile_and_first_post_at_once(
    settings: Settings, database_url: str, replica_url: str, replica: Replica
) -> None:
    async with make_api(with_replica(settings, replica_url)) as api:
        someone = await api.member("someone")
        await caught_up(database_url, replica_url)
        await set_replay(replica, paused=True)
        newcomer = await api.member("newcomer")  # no member existed when this write began
        assert await contents(api, newcomer, "newcomer") == []  # found: their profile, read from the primary
        await api.post(newcomer, "hello")
        assert await contents(api, newcomer, "newcomer") == ["hello"]
        # Someone else reads the replica, where the newcomer does not exist yet (once the router's monitor
        # has seen the replica replay someone's own profile write: it polls).

        async def newcomer_missing() -> bool:
            return (await api.gql(MEMBER_POSTS, {"u": "newcomer"}, token=someone))["member"] is None

        await eventually(newcomer_missing)


async def _reads_none_of_it(api: Api, reader: str, theirs: str) -> bool:
    """The reader sees neither the writer's post nor their like of `theirs`."""
    post = (await api.gql(POST, {"id": theirs}, token=reader))["post"]
    return await contents(api, reader, "writer") == [] and post == {"likeCount": 0, "viewerHasLiked": False}


async def _sees(api: Api, token: str, username: str, content: str) -> bool:
    try:
        return content in await contents(api, token, username)
    except GraphQLErrors:
        return False  # a read sent to the replica as it died, before the monitor noticed (one poll)


async def test_a_replica_lagging_past_the_bound_is_not_read(
    settings: Settings, database_url: str, replica_url: str, replica: Replica
) -> None:
    async with make_api(with_replica(settings, replica_url, max_lag_ms=300)) as api:
        writer, reader = await api.member("writer"), await api.member("reader")
        await caught_up(database_url, replica_url)
        await set_replay(replica, paused=True)
        await api.post(writer, "news")
        # Replay stays paused: only the lag bound can send the reader to the primary.
        await eventually(lambda: _sees(api, reader, "writer", "news"))
        assert await replica_is_behind(database_url, replica_url)


async def replica_is_behind(database_url: str, replica_url: str) -> bool:
    primary, standby = await asyncpg.connect(database_url), await asyncpg.connect(replica_url)
    try:
        return await replayed_position(standby) < await wal_position(primary)
    finally:
        await primary.close()
        await standby.close()


async def test_reads_go_to_the_primary_while_the_replica_is_down_and_back_when_it_returns(
    settings: Settings, database_url: str, replica_url: str, replica: Replica
) -> None:
    async with make_api(with_replica(settings, replica_url)) as api:
        writer, reader = await api.member("writer"), await api.member("reader")
        await api.post(writer, "before")
        replica.stop()
        try:
            await api.post(writer, "while down")
            await eventually(lambda: _sees(api, reader, "writer", "while down"))
            for _ in range(5):  # once noticed, every read is served
                assert await contents(api, reader, "writer") == ["while down", "before"]
        finally:
            replica.start()
        await caught_up(database_url, replica_url)
        await set_replay(replica, paused=True)
        await api.post(writer, "after")
        # Back on the replica (paused): the reader no longer sees new posts, the writer does.
        await eventually(lambda: _not_sees(api, reader, "writer", "after"))
        assert "after" in await contents(api, writer, "writer")


async def _not_sees(api: Api, token: str, username: str, content: str) -> bool:
    return content not in await contents(api, token, username)


async def test_a_write_mark_is_shared_through_redis_and_ends_when_the_replica_replays_the_write(
    database_url: str, replica_url: str, replica: Replica, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    """Two routers stand for two API instances: the writer wrote through one, reads through the other."""
    standby = await asyncpg.create_pool(replica_url, min_size=1, max_size=2)
    one, two = (ReadRouting(pool, standby, redis, max_lag_s=60, marked_for_s=30) for _ in range(2))
    writer, someone = f"w-{uuid.uuid4()}", f"s-{uuid.uuid4()}"
    try:
        await caught_up(database_url, replica_url)
        for router in (one, two):
            await router.measure()
        await set_replay(replica, paused=True)
        await pool.execute("CREATE TABLE written (x int)")
        await one.wrote(writer)
        await two.measure()
        assert await two.pool_for(writer) is pool
        assert await two.pool_for(someone) is standby
        assert await two.pool_for(None) is standby
        await set_replay(replica, paused=False)

        async def back_on_replica() -> bool:
            await two.measure()
            return await two.pool_for(writer) is standby

        await eventually(back_on_replica)
    finally:
        await standby.close()


async def test_the_api_starts_and_serves_from_the_primary_when_the_replica_never_answers(
    settings: Settings, database_url: str
) -> None:
    nowhere = f"postgresql://postgres@127.0.0.1:{devstack.free_port()}/{database_url.rpartition('/')[2]}"
    async with make_api(with_replica(settings, nowhere)) as api:
        writer, reader = await api.member("writer"), await api.member("reader")
        await api.post(writer, "served")
        assert await contents(api, reader, "writer") == ["served"]
        assert (await api.rest("GET", "/userfeed", token=writer)).status_code == 200
