"""Migrations apply once, and two runs at once (two hosts) are safe."""

import asyncio

import asyncpg
from feedfabric.core.ids import new_id
from feedfabric.db.migrate import migrate, migration_files

from tests.conftest import _server_url


async def test_two_concurrent_migrations_apply_each_file_once(stack) -> None:  # type: ignore[no-untyped-def]
    admin = await asyncpg.connect(_server_url(stack.postgres.url, "postgres"))
    try:
        await admin.execute("DROP DATABASE IF EXISTS migrate_race WITH (FORCE)")
        await admin.execute("CREATE DATABASE migrate_race")
    finally:
        await admin.close()
    url = _server_url(stack.postgres.url, "migrate_race")
    first, second = await asyncio.gather(migrate(url), migrate(url))
    names = [name for _, name, _ in migration_files()]
    assert sorted(first + second) == sorted(names)
    assert await migrate(url) == []


async def test_notifications_written_before_groups_existed_are_grouped_by_the_migration(stack) -> None:  # type: ignore[no-untyped-def]
    admin = await asyncpg.connect(_server_url(stack.postgres.url, "postgres"))
    try:
        await admin.execute("DROP DATABASE IF EXISTS migrate_groups WITH (FORCE)")
        await admin.execute("CREATE DATABASE migrate_groups")
    finally:
        await admin.close()
    url = _server_url(stack.postgres.url, "migrate_groups")
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, name, sql in migration_files():
            if version < 260:
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name)
        ava, bob, cal = (new_id() for _ in range(3))
        for member, name in ((ava, "ava"), (bob, "bob"), (cal, "cal")):
            await conn.execute(
                "INSERT INTO members (id, external_id, username, display_name) VALUES ($1, $2, $2, $2)", member, name
            )
        post = new_id()
        await conn.execute("INSERT INTO posts (id, author_id, content) VALUES ($1, $2, 'old')", post, ava)
        old = [  # (kind, actor, read): two unread likes and a read one, a follow, two mentions
            ("like", bob, False),
            ("like", cal, False),
            ("like", bob, True),
            ("follow", bob, False),
            ("mention", bob, False),
            ("mention", cal, False),
        ]
        for event, (kind, actor, read) in enumerate(old, 1):
            await conn.execute(
                """INSERT INTO notifications (id, recipient_id, kind, actor_id, post_id, event_id, read_at)
                   VALUES ($1, $2, $3, $4, CASE WHEN $3 = 'follow' THEN NULL ELSE $5::uuid END, $6,
                           CASE WHEN $7 THEN now() END)""",
                new_id(),
                ava,
                kind,
                actor,
                post,
                event,
                read,
            )
    finally:
        await conn.close()

    assert "260_notification_groups.sql" in await migrate(url)
    conn = await asyncpg.connect(url)
    try:
        groups = await conn.fetch(
            """SELECT kind, read_at IS NOT NULL AS read, actor_count, notification_count FROM notification_groups
               ORDER BY kind, read, actor_count"""
        )
        assert [tuple(g) for g in groups] == [
            ("follow", False, 1, 1),
            ("like", False, 2, 2),
            ("like", True, 1, 1),
            ("mention", False, 1, 1),
            ("mention", False, 1, 1),
        ]
        assert await conn.fetchval("SELECT count(*) FROM notifications WHERE group_id IS NULL") == 0
        assert await conn.fetchval("SELECT count(*) FROM notification_group_actors") == 6
    finally:
        await conn.close()
