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
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg  # noqa: E402
from feedfabric.core.ids import new_id  # noqa: E402

from bench._stack import drop_database, fresh_database, services  # noqa: E402

SINGLES = 2_000
ROUNDS = 3

# Migration 215's trigger (every follower's `following` upserted too), put back in a database of its own
# for the side-by-side figures.
PREVIOUS_TRIGGER = """
ALTER TABLE member_stats ADD COLUMN following integer NOT NULL DEFAULT 0;
CREATE OR REPLACE FUNCTION follows_member_stats() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO member_stats AS s (member_id, followers, following)
        SELECT member, sum(d_followers), sum(d_following)
        FROM (SELECT target_id::uuid AS member, 1 AS d_followers, 0 AS d_following
              FROM inserted WHERE target_type = 'member'
              UNION ALL
              SELECT follower_id, 0, 1 FROM inserted WHERE target_type = 'member') d
        GROUP BY member
        ORDER BY member
        ON CONFLICT (member_id) DO UPDATE
           SET followers = s.followers + EXCLUDED.followers,
               following = s.following + EXCLUDED.following;
    END IF;
    RETURN NULL;
END
$$;
"""


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
        await conn.execute("CHECKPOINT")  # the previous load's dirty pages are written before this one starts
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


VARIANTS = ("now (migration 280)", "before (migration 215)", "no counting trigger")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    seconds: dict[tuple[str, int], list[float]] = {}
    single: dict[str, list[float]] = {}
    with services() as env:
        # Fresh databases each round (tables of the same size at each size); the variants alternate at each
        # size, so the shared machine's drift reaches all of them alike, and each starts after a CHECKPOINT.
        for round_ in range(ROUNDS):
            dbs = [fresh_database(env["DATABASE_URL"]) for _ in VARIANTS]
            asyncio.run(_execute(dbs[1], PREVIOUS_TRIGGER))
            asyncio.run(_execute(dbs[2], "ALTER TABLE follows DISABLE TRIGGER USER"))
            # Each round starts with another variant: the one after a big load pays for its autovacuum.
            order = [(VARIANTS[(round_ + i) % len(VARIANTS)], dbs[(round_ + i) % len(VARIANTS)]) for i in range(3)]
            for size in sizes:
                for name, db in order:
                    seconds.setdefault((name, size), []).append(asyncio.run(bulk(db, size, counted=db != dbs[2])))
            for name, db in order:
                single.setdefault(name, []).append(asyncio.run(singles(db)))
            for db in dbs:
                base, _, name = db.rpartition("/")
                drop_database(base, name)
    print(f"bulk follows of one author, one INSERT ... SELECT each; median of {ROUNDS} rounds (each round's figures)")
    for name in VARIANTS:
        print(f"  {name}:")
        for size in sizes:
            runs = seconds[(name, size)]
            median = statistics.median(runs)
            each = ", ".join(f"{r:.2f}" for r in runs)
            print(f"  {size:>9,} follows: {median:7.2f} s  {median / size * 1e6:6.1f} µs/row   ({each})")
    print(f"  single follows ({SINGLES:,} one-row INSERTs each round):")
    for name in VARIANTS:
        runs = single[name]
        each = ", ".join(f"{r * 1e6:.0f}" for r in runs)
        print(f"    {name}: {statistics.median(runs) * 1e6:,.0f} µs   ({each})")


async def _execute(db: str, sql: str) -> None:
    conn = await asyncpg.connect(db)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


if __name__ == "__main__":
    main()
