"""`make load`: members post, follow, like and read for a set time with the relay and workers running.

Runs `feedfabric api`, `relay` and `worker` (worker-events, -notifications,
-engagement) as processes on embedded services (bench/_stack-style, fresh
database), drives them over HTTP, then lets the pipeline drain, runs
`feedfabric verify` and the fault suite's checker. Prints throughput, p50/p99
of home-feed reads and of post-to-timeline latency (client send until the
post is in a follower's Redis timeline, sampled), and the lost count.

    python bench/load.py [--seconds 60] [--members 200] [--writers 16] [--readers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis.asyncio as aioredis  # noqa: E402
from faults import checker  # noqa: E402
from faults.harness import Client, Record, open_case, quiesce, retrying, setup_graph  # noqa: E402
from feedfabric.feeds.timelines import encode_member, feed_key  # noqa: E402
from feedfabric.ops import devstack  # noqa: E402


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def load(seconds: float, members: int, writers: int, readers: int, root: Path, pg_url: str) -> int:
    case = await open_case("load", root, pg_url)
    client = Client(case.api_url)
    assert case.redis is not None
    redis = aioredis.from_url(case.redis.url)
    try:
        names = await setup_graph(client, members, 10)
        ids = {n: await retrying(lambda n=n: _member_id(case, n)) for n in names}
        followers: dict[str, set[str]] = {n: set() for n in names}
        conn = await __import__("asyncpg").connect(case.database_url)
        for r in await conn.fetch(
            "SELECT f.follower_id::text, m.external_id FROM follows f"
            " JOIN members m ON m.id::text = f.target_id WHERE f.target_type = 'member'"
        ):
            followers[r[1]].add(r[0])
        await conn.close()
        record = Record()
        counts = {"post": 0, "like": 0, "follow": 0, "read": 0}
        latencies: list[float] = []
        deadline = time.monotonic() + seconds
        rng = random.Random(11)

        async def writer() -> None:
            while time.monotonic() < deadline:
                who = rng.choice(names)
                roll = rng.random()
                try:
                    if roll < 0.05:
                        target = rng.choice(names)
                        if target != who:
                            await client.follow(who, target)
                            followers[target].add(ids[who])
                            counts["follow"] += 1
                    elif roll < 0.35 and record.posts:
                        post_id = rng.choice(list(record.posts)[-200:])
                        await client.like(who, post_id)
                        record.likes.add((who, post_id))
                        counts["like"] += 1
                    else:
                        sent = time.monotonic()
                        post_id = await client.post(who, f"load post by {who}")
                        record.posts[post_id] = who
                        counts["post"] += 1
                        if counts["post"] % 5 == 0 and followers[who]:
                            asyncio.ensure_future(sample(post_id, rng.choice(sorted(followers[who])), sent))
                except Exception as exc:  # noqa: BLE001 - counted as indeterminate
                    record.fail(type(exc).__name__)

        async def sample(post_id: str, follower: str, sent: float) -> None:
            while time.monotonic() - sent < 30:
                if await redis.zscore(feed_key(follower), encode_member(post_id)) is not None:
                    latencies.append(time.monotonic() - sent)
                    return
                await asyncio.sleep(0.002)

        async def reader() -> None:
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    await client.home(rng.choice(names), 20)
                    record.reads.append(time.perf_counter() - started)
                    counts["read"] += 1
                except Exception as exc:  # noqa: BLE001
                    record.fail("read " + type(exc).__name__)

        began = time.monotonic()
        await asyncio.gather(*(writer() for _ in range(writers)), *(reader() for _ in range(readers)))
        elapsed = time.monotonic() - began
        drain = await quiesce(case, timeout=300)
        verdict = await checker.check(case, record, client, sample_pages=0)
        writes = counts["post"] + counts["like"] + counts["follow"]
        print(
            f"load: {seconds:.0f}s, {members} members, {writers} writers, {readers} readers"
            f" (load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs)"
        )
        print(
            f"  writes {writes / elapsed:.0f}/s (posts {counts['post']}, likes {counts['like']},"
            f" follows {counts['follow']}), reads {counts['read'] / elapsed:.0f}/s, failed requests {record.failed}"
        )
        print(
            f"  home-feed read p50 {pct(record.reads, 0.5) * 1000:.1f} ms, p99 {pct(record.reads, 0.99) * 1000:.1f} ms"
        )
        print(
            f"  post-to-timeline p50 {pct(latencies, 0.5) * 1000:.1f} ms, p99 {pct(latencies, 0.99) * 1000:.1f} ms"
            f" ({len(latencies)} sampled; mean {statistics.fmean(latencies) * 1000 if latencies else float('nan'):.1f} ms)"
        )
        print(f"  pipeline drained {drain:.1f}s after the load; {verdict.line()}")
        print(
            f"  lost {verdict.lost_total}; verify exit {verdict.verify_status}: {verdict.verify_output.splitlines()[-1]}"
        )
        return 0 if verdict.lost_total == 0 and verdict.duplicated_total == 0 and verdict.verify_status == 0 else 1
    finally:
        await redis.aclose()
        await client.aclose()
        case.stop()


async def _member_id(case: object, who: str) -> str:
    from faults.harness import _member_id as lookup

    return await lookup(case, who)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--members", type=int, default=200)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--readers", type=int, default=4)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="feedfabric-load-"))
    pg = devstack.start_postgres(root / "pg", database="postgres")
    try:
        status = asyncio.run(load(args.seconds, args.members, args.writers, args.readers, root, pg.url))
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
