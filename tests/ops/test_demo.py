"""`feedfabric dev --demo`: a few hundred posts, one celebrity, one inactive member, loaded once."""

from __future__ import annotations

import asyncpg
from feedfabric.core.settings import Settings
from feedfabric.ops import demo


async def test_demo_has_posts_one_celebrity_and_one_inactive_member(settings: Settings, pool: asyncpg.Pool) -> None:
    assert await demo.load_demo(settings) is True
    assert 200 <= await pool.fetchval("SELECT count(*) FROM posts") <= 500
    celebrities = await pool.fetch(
        """SELECT m.external_id FROM members m JOIN follows f ON f.target_type = 'member' AND f.target_id = m.id::text
           GROUP BY m.external_id HAVING count(*) > $1""",
        demo.CELEBRITY_FOLLOWER_THRESHOLD,
    )
    assert [r["external_id"] for r in celebrities] == [demo.CELEBRITY]
    inactive = await pool.fetch(
        "SELECT external_id FROM members WHERE last_seen_at < now() - make_interval(days => $1)",
        settings.inactive_after_days,
    )
    assert [r["external_id"] for r in inactive] == [demo.INACTIVE]
    assert await pool.fetchval("SELECT count(*) FROM members WHERE external_id = $1", demo.ADMIN) == 1
    assert await demo.load_demo(settings) is False  # loading twice adds nothing
