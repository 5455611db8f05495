"""Demo data for `feedfabric dev --demo`: members, follows, favourites and a few hundred posts.

Written through the domain layer, so every row has its outbox event and the
relay and workers fill timelines exactly as they would for real traffic.
One member is a celebrity (followed by everyone, pulled at read time when
the threshold is low) and one has been away long enough to count as inactive.
Loading twice adds nothing: an existing demo is left as it is.
"""

from __future__ import annotations

import random
import sys
import uuid
from datetime import timedelta

from feedfabric.core.models import Member
from feedfabric.core.settings import Settings
from feedfabric.db import members as members_db
from feedfabric.db.pool import create_pool, transaction
from feedfabric.feeds import members as members_svc
from feedfabric.feeds import posts as posts_svc
from feedfabric.feeds import reactions

__all__ = ["ADMIN", "CELEBRITY", "CELEBRITY_FOLLOWER_THRESHOLD", "INACTIVE", "load_demo"]

PEOPLE = [
    ("demo-maya", "maya_runs", "Maya Runs"),
    ("demo-theo", "theo_cooks", "Theo Cooks"),
    ("demo-ava", "ava_shoots", "Ava Shoots"),
    ("demo-noah", "noah_codes", "Noah Codes"),
    ("demo-lena", "lena_travels", "Lena Travels"),
    ("demo-omar", "omar_plays", "Omar Plays"),
    ("demo-iris", "iris_reads", "Iris Reads"),
    ("demo-star", "stella_star", "Stella Star"),
    ("demo-sleepy", "sleepy_sam", "Sleepy Sam"),
]
CELEBRITY = "demo-star"
# `feedfabric dev --demo` uses this CELEBRITY_FOLLOWER_THRESHOLD (unless it is set): demo-star is
# followed by all 8 other members, nobody else by more than 7 (seed 7), so it is the one author
# whose posts are pulled at read time, and its followers' home feeds say REDIS_POSTGRES.
CELEBRITY_FOLLOWER_THRESHOLD = 7
INACTIVE = "demo-sleepy"
ADMIN = "demo-admin"

TOPICS = {
    "maya_runs": [
        "Easy 10k along the river this morning #running",
        "Tempo intervals done, legs are jelly #running #fitness",
        "New trail shoes, first muddy loop #trail",
        "Long run Sunday: 21 km at conversational pace #running",
    ],
    "theo_cooks": [
        "Slow-braised short ribs with miso #cooking",
        "Sourdough attempt number 12 #baking",
        "Weeknight ramen in 20 minutes #cooking",
        "Charred leeks, hazelnut butter #food",
    ],
    "ava_shoots": [
        "Golden hour on the harbour #photography",
        "Film scans from the weekend #photography #film",
        "Trying a 35mm prime for street work #photography",
    ],
    "noah_codes": [
        "Shipped keyset pagination today, no more OFFSET #tech",
        "Profiling a hot loop with py-spy #python",
        "Postgres advisory locks are underrated #postgres #tech",
    ],
    "lena_travels": [
        "Night train to Vienna #travel",
        "Street food tour in Lisbon #travel #food",
        "Packing light: one bag for two weeks #travel",
    ],
    "omar_plays": [
        "Late-night ranked grind #gaming",
        "Local derby tonight, what a goal #football",
        "Speedrun PB finally #gaming",
    ],
    "iris_reads": [
        "Halfway through a 900-page novel #books",
        "Poetry that hits on a Tuesday #books",
        "Library haul: six new reads #reading",
    ],
    "stella_star": ["Thank you all for 10k! #music", "New single out Friday #music", "Tour dates announced #music"],
    "sleepy_sam": ["Anyone still here? #random"],
}


def _progress(done: int, total: int, label: str) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    sys.stderr.write(f"\r  {label:<10} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


async def load_demo(settings: Settings, *, posts_per_member: int = 30, seed: int = 7) -> bool:
    """Loads the demo once; returns False when it was already there."""
    rng = random.Random(seed)
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=4)
    try:
        if await members_db.by_external_id(pool, PEOPLE[0][0]) is not None:
            print("  demo data already loaded", file=sys.stderr)
            return False
        members: dict[str, Member] = {}
        async with transaction(pool) as conn:
            for external_id, username, display in [*PEOPLE, (ADMIN, "demo_admin", "Demo Admin")]:
                members[external_id] = await members_svc.upsert_profile(conn, external_id, username, display, None)
        people = [members[e] for e, _, _ in PEOPLE]
        async with transaction(pool) as conn:
            for member in people:
                for other in people:
                    if other.id != member.id and (other.external_id == CELEBRITY or rng.random() < 0.5):
                        await members_svc.follow(conn, settings, member, other.external_id)
            for member in people[:3]:
                for other in rng.sample([p for p in people if p.id != member.id], 3):
                    await members_svc.add_favourite(conn, settings, member, other.external_id)
            await conn.execute(
                "UPDATE members SET last_seen_at = now() - $2::interval WHERE external_id = $1",
                INACTIVE,
                timedelta(days=settings.inactive_after_days + 7),
            )
        total = posts_per_member * len(people)
        written: list[uuid.UUID] = []
        for i in range(total):
            author = people[i % len(people)]
            lines = TOPICS[author.username]
            text = rng.choice(lines)
            if rng.random() < 0.2:
                mention = rng.choice([p for p in people if p.id != author.id])
                text += f" with @{mention.username}"
            async with transaction(pool) as conn:
                if written and rng.random() < 0.08:
                    post = await posts_svc.repost(conn, settings, author, rng.choice(written))
                else:
                    post = await posts_svc.create_post(conn, settings, author, text)
                    written.append(post.id)
                if rng.random() < 0.3:
                    liker = rng.choice(people)
                    await reactions.like(conn, settings, liker, post.id)
            if i % 10 == 0 or i == total - 1:
                _progress(i + 1, total, "posts")
        return True
    finally:
        await pool.close()
