"""importBlocks at 10,000 and 100,000 lines: seconds and cost per line, the two side by side.

Targets (issue 48): 100,000 lines in at most 10 s, and the cost per line at 100,000 within 1.3x of
that at 10,000 (the import is a fixed number of set-based statements, so it should scale linearly).

Each round runs what the resolver runs once the upload is read: the file parsed, then one
transaction of feeds.block_import.import_blocks, against one members table of fixed size (so a
smaller import does not look cheaper for a smaller table). The list names half its members by
username and half by external ID, with 1 % of lines naming nobody, and a tenth of the members
follow the importer and are followed back (those follows end, each with its event). Rounds are
interleaved by size, and the blocks, follows and outbox rows are reset between rounds.

    PYTHONPATH=$PWD python bench/safety_import.py [--sizes 10000,100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
from feedfabric.core.ids import new_id  # noqa: E402
from feedfabric.core.models import Member  # noqa: E402
from feedfabric.core.settings import Settings  # noqa: E402
from feedfabric.db import members as members_db  # noqa: E402
from feedfabric.db.pool import init_connection  # noqa: E402
from feedfabric.feeds import block_import  # noqa: E402

from bench._stack import fresh_database, services  # noqa: E402

UNKNOWN_EVERY = 100
FOLLOW_EVERY = 10


async def add_members(conn: asyncpg.Connection, n: int, prefix: str) -> list[Member]:
    ids = [new_id() for _ in range(n)]
    await conn.copy_records_to_table(
        "members",
        records=[(i, f"{prefix}-{n}-{k}", f"{prefix}{k}_{i.hex[:8]}", "Bench") for k, i in enumerate(ids)],
        columns=["id", "external_id", "username", "display_name"],
    )
    found = await members_db.by_ids(conn, ids)
    return [found[i] for i in ids]


def file_of(targets: list[Member]) -> bytes:
    lines = []
    for k, member in enumerate(targets):
        if k % UNKNOWN_EVERY == 0:
            lines.append(f"nobody-{k}@elsewhere.example")
        lines.append(member.username if k % 2 else member.external_id)
    return ("\n".join(lines) + "\n").encode()


async def reset(conn: asyncpg.Connection, importer: Member, targets: list[Member]) -> None:
    await conn.execute("DELETE FROM blocks WHERE blocker_id = $1", importer.id)
    await conn.execute("DELETE FROM outbox")
    followers = [m.id for k, m in enumerate(targets) if k % FOLLOW_EVERY == 0]
    await conn.execute(
        """INSERT INTO follows (follower_id, target_type, target_id)
           SELECT f, 'member', $2 FROM unnest($1::uuid[]) AS f
           UNION ALL SELECT $3, 'member', f::text FROM unnest($1::uuid[]) AS f
           ON CONFLICT DO NOTHING""",
        followers,
        str(importer.id),
        importer.id,
    )
    await conn.execute("VACUUM ANALYZE blocks")
    await conn.execute("CHECKPOINT")


def cpu_seconds(pid: int) -> float:
    """User and system CPU a process has used (/proc), so a figure can leave out the time spent waiting for
    one of two cores shared with other work."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_round(
    conn: asyncpg.Connection, settings: Settings, importer: Member, data: bytes
) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of Postgres's backend and this process together, lines blocked)."""
    backend = int(await conn.fetchval("SELECT pg_backend_pid()"))
    server, client = cpu_seconds(backend), time.process_time()
    started = time.perf_counter()
    async with conn.transaction():
        done = await block_import.import_blocks(conn, settings, importer, data)
    elapsed = time.perf_counter() - started
    return elapsed, cpu_seconds(backend) - server + time.process_time() - client, done.blocked


def main(sizes: list[int], rounds: int) -> None:
    with services() as env:
        db = fresh_database(env["DATABASE_URL"])
        times, cpus = asyncio.run(measure(db, sizes, rounds))
    report(times, cpus, sizes, rounds)


async def measure(db: str, sizes: list[int], rounds: int) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
    settings = Settings(database_url=db)
    conn = await asyncpg.connect(db)
    await init_connection(conn)
    try:
        # One table of fixed size for every size: the largest import's members, and the others' among them.
        pool = await add_members(conn, max(sizes), "bench")
        await add_members(conn, max(sizes), "filler")
        await conn.execute("ANALYZE members")
        importers = {size: (await add_members(conn, 1, f"importer{size}"))[0] for size in sizes}
        files = {size: file_of(pool[:size]) for size in sizes}
        times: dict[int, list[float]] = {size: [] for size in sizes}
        cpus = {size: [] for size in sizes}
        # How fast this machine is right now (two cores shared): the same pure-CPU statement, timed.
        started = time.perf_counter()
        await conn.fetchval("SELECT count(*) FROM generate_series(1, 3000000)")
        times[0] = [time.perf_counter() - started]
        for _ in range(rounds):
            for size in sizes:
                await reset(conn, importers[size], pool[:size])
                elapsed, cpu, blocked = await one_round(conn, settings, importers[size], files[size])
                assert blocked == size, (blocked, size)
                times[size].append(elapsed)
                cpus[size].append(cpu)
    finally:
        await conn.close()
    return times, cpus


def report(times: dict[int, list[float]], cpus: dict[int, list[float]], sizes: list[int], rounds: int) -> None:
    print(f"load: a 3,000,000-row count in Postgres took {times[0][0]:.2f} s of wall time during this run")
    print(f"importBlocks, median of {rounds} rounds (the resolver's parse and transaction; 1 % unknown lines)")
    per_line: dict[int, float] = {}
    cpu_line: dict[int, float] = {}
    for size in sizes:
        best, cpu = statistics.median(times[size]), statistics.median(cpus[size])
        per_line[size], cpu_line[size] = best / size * 1e6, cpu / size * 1e6
        rounds_text = ", ".join(f"{t:.2f}" for t in times[size])
        print(
            f"  {size:>7,} lines: {best:6.2f} s wall ({per_line[size]:6.1f} µs a line), {cpu:6.2f} s CPU of Postgres"
            f" and the client ({cpu_line[size]:6.1f} µs a line); wall rounds {rounds_text}"
        )
    small, large = min(sizes), max(sizes)
    if small != large:
        print(
            f"  cost per line at {large:,} / at {small:,}: {per_line[large] / per_line[small]:.2f}x wall,"
            f" {cpu_line[large] / cpu_line[small]:.2f}x CPU (target <= 1.3x)"
        )
    print(
        f"  {large:,} lines in {statistics.median(times[large]):.2f} s wall, {statistics.median(cpus[large]):.2f} s CPU"
        " (target <= 10 s)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    main([int(s) for s in args.sizes.split(",")], args.rounds)
