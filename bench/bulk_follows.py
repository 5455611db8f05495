"""Bulk follow loads: 10k, 100k and 1M follows of one author, each in one statement.

The follows_member_stats triggers count per statement and per target only
(migrations 215 and 280: a load of one author writes one member_stats row), so
the time should grow linearly with the number of rows. Prints seconds and rows
per second per size, with and without the counting trigger, checks the counts,
and the single-follow cost (one INSERT per statement) beside it.

    PYTHONPATH=$PWD python bench/bulk_follows.py [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
from feedfabric.ids import new_id  # noqa: E402

from bench._stack import fresh_database, services  # noqa: E402

SINGLES = 2_000


async def members(conn: asyncpg.Connection, n: int) -> list:
    ids = [new_id() for _ in range(n)]
    await conn.copy_records_to_table(
        "members",
        records=[(i, f"b-{i}", f"b{i.hex}", "B") for i in ids],
        columns=["id", "external_id", "username", "display_name"],
    )
    return ids


async def bulk(db: str, size: int, counted: bool = True) -> float:
    conn = await asyncpg.connect(db)
    try:
        author, *fans = await members(conn, size + 1)
        started = time.perf_counter()
        await conn.execute(
            "INSERT INTO follows (follower_id, target_type, target_id)"
            " SELECT id, 'member', $2 FROM unnest($1::uuid[]) AS id",
            fans,
            str(author),
        )
        elapsed = time.perf_counter() - started
        if counted:
            followers = await conn.fetchval("SELECT followers FROM member_stats WHERE member_id = $1", author)
            assert followers == size, (followers, size)
        return elapsed
    finally:
        await conn.close()


async def singles(db: str) -> float:
    """Seconds per follow, one INSERT statement (and transaction) each, as the API does."""
    conn = await asyncpg.connect(db)
    try:
        author, *fans = await members(conn, SINGLES + 1)
        statement = await conn.prepare(
            "INSERT INTO follows (follower_id, target_type, target_id) VALUES ($1, 'member', $2)"
        )
        started = time.perf_counter()
        for fan in fans:
            await statement.fetch(fan, str(author))
        return (time.perf_counter() - started) / SINGLES
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    with services() as env:
        db = fresh_database(env["DATABASE_URL"])
        bare = fresh_database(env["DATABASE_URL"])
        asyncio.run(_execute(bare, "ALTER TABLE follows DISABLE TRIGGER USER"))
        results = [(size, asyncio.run(bulk(db, size))) for size in sizes]
        bare_results = [(size, asyncio.run(bulk(bare, size, counted=False))) for size in sizes]
        single = asyncio.run(singles(db))
        bare_single = asyncio.run(singles(bare))
    print("bulk follows of one author, one INSERT ... SELECT each")
    print("  per-statement trigger (now):")
    for size, seconds in results:
        print(f"  {size:>9,} follows: {seconds:7.2f} s   {size / seconds:>9,.0f} rows/s")
    print("  no counting trigger at all (the insert's own cost), same run:")
    for size, seconds in bare_results:
        print(f"  {size:>9,} follows: {seconds:7.2f} s   {size / seconds:>9,.0f} rows/s")
    print(
        f"  single follows ({SINGLES:,} one-row INSERTs): {single * 1e6:,.0f} µs each,"
        f" {bare_single * 1e6:,.0f} µs without the counting trigger"
    )


async def _execute(db: str, sql: str) -> None:
    conn = await asyncpg.connect(db)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


if __name__ == "__main__":
    main()
