"""member_stats counts followers per statement: exact for bulk statements and under concurrent writers."""

import asyncio
import random
import uuid

import asyncpg
from feedfabric.core.ids import new_id
from feedfabric.db import follows


async def _members(pool: asyncpg.Pool, n: int) -> list[uuid.UUID]:
    ids = [new_id() for _ in range(n)]
    await pool.execute(
        "INSERT INTO members (id, external_id, username, display_name)"
        " SELECT id, 'x-' || id::text, 'u' || replace(id::text, '-', ''), 'M' FROM unnest($1::uuid[]) AS id",
        ids,
    )
    return ids


async def _stats(pool: asyncpg.Pool) -> dict[uuid.UUID, tuple[int, int]]:
    """(followers, following) as readers get them: followers kept by the trigger, following counted."""
    ids = [r["id"] for r in await pool.fetch("SELECT id FROM members")]
    return {m: counts for m, counts in (await follows.member_stats(pool, ids)).items() if any(counts)}


async def _recount(pool: asyncpg.Pool) -> dict[uuid.UUID, tuple[int, int]]:
    rows = await pool.fetch(
        """SELECT m.id,
                  (SELECT count(*) FROM follows f WHERE f.target_type = 'member' AND f.target_id = m.id::text) AS a,
                  (SELECT count(*) FROM follows f WHERE f.target_type = 'member' AND f.follower_id = m.id) AS b
           FROM members m"""
    )
    return {r["id"]: (r["a"], r["b"]) for r in rows if r["a"] or r["b"]}


async def test_one_statement_of_many_follows_counts_each_member_once_per_row(pool: asyncpg.Pool) -> None:
    author, *fans = await _members(pool, 201)
    await pool.execute(
        "INSERT INTO follows (follower_id, target_type, target_id)"
        " SELECT id, 'member', $2 FROM unnest($1::uuid[]) AS id"
        " UNION ALL SELECT id, 'tag', 'python' FROM unnest($1::uuid[]) AS id",
        fans,
        str(author),
    )
    stats = await _stats(pool)
    assert stats[author] == (200, 0)
    assert all(stats[f] == (0, 1) for f in fans)
    await pool.execute(
        "DELETE FROM follows WHERE target_id = $1 AND follower_id = ANY($2::uuid[])", str(author), fans[:50]
    )
    assert (await _stats(pool))[author] == (150, 0)
    assert await _stats(pool) == await _recount(pool)


async def test_copy_is_counted_like_insert(pool: asyncpg.Pool) -> None:
    author, *fans = await _members(pool, 31)
    async with pool.acquire() as conn:
        await conn.copy_records_to_table(
            "follows",
            records=[(f, "member", str(author)) for f in fans],
            columns=["follower_id", "target_type", "target_id"],
        )
    assert (await _stats(pool))[author] == (30, 0)


async def test_counts_stay_exact_under_concurrent_follows_and_unfollows(pool: asyncpg.Pool) -> None:
    members = await _members(pool, 12)
    rng = random.Random(23)

    async def writer(seed: int) -> None:
        local = random.Random(seed)
        for _ in range(60):
            a, b = local.sample(members, 2)
            async with pool.acquire() as conn:
                if local.random() < 0.6:
                    # In ID order, as every bulk writer must: two statements inserting one follower's
                    # rows in opposite orders wait on each other's rows and one is aborted as a deadlock.
                    targets = sorted(local.sample([m for m in members if m != a], local.randint(1, 4)))
                    await conn.execute(
                        "INSERT INTO follows (follower_id, target_type, target_id)"
                        " SELECT $1, 'member', t::text FROM unnest($2::uuid[]) AS t ON CONFLICT DO NOTHING",
                        a,
                        targets,
                    )
                else:
                    await conn.execute(
                        "DELETE FROM follows WHERE (follower_id = $1 AND target_id = $4)"
                        " OR (follower_id = $2 AND target_id = $3)",
                        a,
                        b,
                        str(a),
                        str(b),
                    )

    await asyncio.gather(*(writer(rng.randrange(1 << 30)) for _ in range(6)))
    recount = await _recount(pool)
    assert recount, "the writers followed no one"
    assert await _stats(pool) == recount


async def test_a_bulk_load_of_one_author_writes_one_stats_row(pool: asyncpg.Pool) -> None:
    # Followers' own counts are read from follows, so a load's cost in member_stats does not grow with it.
    author, *fans = await _members(pool, 101)
    await pool.execute(
        "INSERT INTO follows (follower_id, target_type, target_id) SELECT id, 'member', $2 FROM unnest($1::uuid[]) AS id",
        fans,
        str(author),
    )
    assert await pool.fetch("SELECT member_id, followers FROM member_stats") == [(author, 100)]
    assert (await follows.member_stats(pool, [fans[0], author]))[fans[0]] == (0, 1)
