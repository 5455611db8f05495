"""What a relay batch costs, and that a relay with rows waiting never sleeps its idle wait (issue 50).

Counted, not timed: the relay's statements through a query logger on its connection, its produce requests
through its producer's client. The idle wait is set to a minute, so a relay that slept it with rows waiting
would stall the test past its bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import asyncpg
from aiokafka import AIOKafkaProducer
from feedfabric.core.settings import Settings
from feedfabric.db.outbox import add_event
from feedfabric.db.pipeline import OutboxRow
from feedfabric.workers.relay import Relay, RelayTimings, make_producer

from tests.pipeline_support import FAST, eventually, running

_INTROSPECTION = ("typeinfo_tree", "current_setting('jit')", "set_config('jit'")


class Tally:
    """The relay's statements on its own connection, and its producer's produce requests."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self.args: list[tuple[object, ...]] = []
        self.produce_requests = 0

    def log(self, record: asyncpg.connection.LoggedQuery) -> None:
        # asyncpg's type introspection runs once per connection, when it first meets a type: not the batch's.
        if not any(mark in record.query for mark in _INTROSPECTION):
            self.statements.append(" ".join(record.query.split()))
            self.args.append(tuple(record.args or ()))

    async def attach(self, conn: asyncpg.Connection) -> None:
        conn.add_query_logger(self.log)

    def producer(self, settings: Settings) -> AIOKafkaProducer:
        """The relay's own producer, its client's requests counted on their way to the broker."""
        producer = make_producer(settings)
        send = producer.client.send

        async def counted(node_id: int, request: object, *args: object, **kwargs: object) -> object:
            if type(request).__name__.startswith("ProduceRequest"):
                self.produce_requests += 1
            return await send(node_id, request, *args, **kwargs)

        producer.client.send = counted  # type: ignore[method-assign]
        return producer

    def outbox_round_trips(self) -> list[tuple[str, list[int]]]:
        """Each claim ("claim", the IDs it stamped) and each stamp alone ("stamp", its IDs), in order."""
        out: list[tuple[str, list[int]]] = []
        for statement, args in zip(self.statements, self.args):
            if statement.startswith("WITH stamped AS (UPDATE outbox"):
                out.append(("claim", list(args[2])))  # type: ignore[call-overload]
            elif statement.startswith("UPDATE outbox SET published_at"):
                out.append(("stamp", list(args[0])))  # type: ignore[call-overload]
        return out

    def transactions(self) -> list[str]:
        return [s for s in self.statements if s in ("BEGIN", "COMMIT", "ROLLBACK") or s.endswith("COMMIT")]


def _relay(settings: Settings, tally: Tally, **kwargs: object) -> Relay:
    kwargs.setdefault("timings", FAST)
    return Relay(
        settings,
        on_connect=tally.attach,
        producer_factory=tally.producer,
        **kwargs,  # type: ignore[arg-type]
    )


async def _unpublished(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL"))


async def _write(pool: asyncpg.Pool, settings: Settings, count: int, keys: int = 40) -> None:
    async with pool.acquire() as conn, conn.transaction():
        for i in range(count):
            await add_event(conn, "PostUpdated", f"key-{i % keys}", {"n": i}, shards=settings.outbox_shards)


async def test_a_backlog_goes_out_in_full_batches_of_one_postgres_and_one_produce_round_trip_each(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    settings = settings.model_copy(update={"outbox_batch_size": 100, "outbox_idle_ms": 60_000})
    # Hot keys on purpose: ten keys, so some partition gets far more than aiokafka's default 16 kB batch.
    async with pool.acquire() as conn, conn.transaction():
        for i in range(250):
            payload = {"n": i, "pad": "x" * 400}
            await add_event(conn, "PostUpdated", f"hot-{i % 10}", payload, shards=settings.outbox_shards)
    ids = [r[0] for r in await pool.fetch("SELECT id FROM outbox ORDER BY id")]
    tally = Tally()
    # No shard, health or prune pass after the first: each would stamp what is pending before it runs.
    relay = _relay(settings, tally, timings=RelayTimings(shard_check_s=600, health_check_s=600, prune_every_s=3600))
    async with running(relay.run):
        await eventually(lambda: _is_zero(pool))
    assert relay.published == 250
    assert relay.batches == 3  # 100, 100, 50
    # Each claim stamps the batch before it; the last batch, short, is stamped alone before the idle wait.
    assert tally.outbox_round_trips() == [
        ("claim", []),
        ("claim", ids[:100]),
        ("claim", ids[100:200]),
        ("stamp", ids[200:]),
    ]
    assert tally.transactions() == []
    # One produce request a batch, beside the one of the relay's marker record at its start.
    assert tally.produce_requests == relay.batches + 1
    assert relay.idle_timeouts == 0


async def _is_zero(pool: asyncpg.Pool) -> bool:
    return await _unpublished(pool) == 0


async def test_rows_committed_during_a_batch_are_claimed_next_without_the_idle_wait(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """Each batch's produce commits the next row: 40 batches chained, each claimed only if the relay went on
    without sleeping its minute-long idle wait."""
    settings = settings.model_copy(update={"outbox_idle_ms": 60_000})
    chained = 40
    done = asyncio.Event()
    batches = 0

    async def write_the_next(rows: Sequence[OutboxRow]) -> None:
        nonlocal batches
        batches += 1
        if batches < chained:
            await _write(pool, settings, 1)
        else:
            done.set()

    tally = Tally()
    relay = _relay(settings, tally, after_produce=write_the_next)
    async with running(relay.run):
        await _write(pool, settings, 1)
        await asyncio.wait_for(done.wait(), 30)
    assert relay.published == chained
    assert relay.idle_timeouts == 0


async def test_a_steady_stream_from_many_writers_never_waits_out_the_idle_wait(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    settings = settings.model_copy(update={"outbox_idle_ms": 60_000})
    tally = Tally()
    relay = _relay(settings, tally)

    async def writer(seed: int) -> None:
        for _ in range(30):
            await _write(pool, settings, 1 + seed % 3)

    async with running(relay.run):
        await asyncio.gather(*(writer(i) for i in range(8)))
        await eventually(lambda: _is_zero(pool))
    assert relay.published == sum(30 * (1 + i % 3) for i in range(8))
    assert relay.idle_timeouts == 0
    # Every row stamped once, by a claim or alone; at most two round trips a batch, no transaction.
    trips = tally.outbox_round_trips()
    stamped = [i for _, ids in trips for i in ids]
    assert sorted(stamped) == [r[0] for r in await pool.fetch("SELECT id FROM outbox ORDER BY id")]
    assert len(trips) <= 2 * relay.batches + 1
    assert tally.transactions() == []


def test_a_notify_for_a_row_the_relay_already_claimed_does_not_wake_it_but_any_other_does(settings: Settings) -> None:
    """NOTIFY reaches the relay only when its claim transaction ends, often for rows that claim already took:
    those must not cost an empty claim; a new row's, a replay's, or one of an older payload form still wake it."""
    relay = Relay(settings)
    rows = [OutboxRow(i, "feedfabric.posts", f"key-{i}", "PostUpdated", 1, {}) for i in (17, 18)]
    relay._note_claimed(rows)  # noqa: SLF001 -- the bookkeeping the claim does
    assert relay._claimed_already("3:17") and relay._claimed_already("5:18")  # noqa: SLF001
    for payload in ("3:19", "replay", "3", "", "3:x"):
        assert not relay._claimed_already(payload), payload  # noqa: SLF001


def test_the_relay_remembers_a_bounded_number_of_claimed_rows(settings: Settings) -> None:
    relay = Relay(settings)
    size = relay._recently_claimed.maxlen or 0  # noqa: SLF001
    relay._note_claimed(  # noqa: SLF001
        [OutboxRow(i, "feedfabric.posts", "k", "PostUpdated", 1, {}) for i in range(size + 10)]
    )
    assert len(relay._recent_set) == size  # noqa: SLF001
    assert not relay._claimed_already(f"0:{0}") and relay._claimed_already(f"0:{size + 9}")  # noqa: SLF001
