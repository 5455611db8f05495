"""The feed log: served pages become one row per post, batched off the request path."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time, timedelta

import asyncpg
import pytest
from feedfabric.core.models import FeedPage, Page, Post
from feedfabric.core.settings import Settings
from feedfabric.db import feed_log as feed_log_db
from feedfabric.db import post_extras
from feedfabric.db.feed_log import ServedPage
from feedfabric.feeds import feed_log as feed_log_svc
from feedfabric.feeds.feed_log import FeedLog
from feedfabric.feeds.feed_posts import feed_posts

from tests.support import Api


async def _posts(api: Api, pool: asyncpg.Pool, count: int) -> list[Post]:
    author = await api.member("author")
    ids = [uuid.UUID(await api.post(author, f"post {i}")) for i in range(count)]
    rows = await pool.fetch("SELECT * FROM posts WHERE id = ANY($1::uuid[]) ORDER BY id DESC", ids)
    return [Post.of(r) for r in rows]


async def test_pages_of_one_batch_are_logged_one_row_per_post_at_its_position(api: Api, pool: asyncpg.Pool) -> None:
    posts = await _posts(api, pool, 5)
    maya, theo = uuid.uuid4(), uuid.uuid4()
    log = FeedLog(pool)
    log.record(maya, "following", Page(posts[:3], None, "redis"))
    log.record(theo, "favourites", Page(posts[3:], None, "postgres"))
    log.record(theo, "following", Page([], None, "redis"))
    assert await log.flush() == 2
    rows = await pool.fetch("SELECT member_id, feed, post_id, position, source FROM feed_log ORDER BY feed, position")
    assert [(r["member_id"], r["feed"], r["post_id"], r["position"], r["source"]) for r in rows] == [
        (theo, "favourites", posts[3].id, 0, "postgres"),
        (theo, "favourites", posts[4].id, 1, "postgres"),
        (maya, "following", posts[0].id, 0, "redis"),
        (maya, "following", posts[1].id, 1, "redis"),
        (maya, "following", posts[2].id, 2, "redis"),
    ]


async def test_a_full_queue_drops_pages_and_counts_their_rows(api: Api, pool: asyncpg.Pool) -> None:
    posts = await _posts(api, pool, 3)
    log = FeedLog(pool, max_queue=1)
    log.record(uuid.uuid4(), "following", Page(posts, None, "redis"))
    log.record(uuid.uuid4(), "following", Page(posts[:2], None, "redis"))
    assert log.dropped == 2
    assert await log.flush() == 1
    assert await pool.fetchval("SELECT count(*) FROM feed_log") == 3


async def test_each_row_carries_the_viewers_signals_for_the_post_it_logs(api: Api, pool: asyncpg.Pool) -> None:
    """Affinity with the author, interest in the post's topics, whether the author is a favourite, and
    the post's age when served; a repost gets those of its original."""
    await api.member("maya")
    author = await api.member("author")
    other = await api.member("other")
    original_id = uuid.UUID(await api.post(author, "up the hill #trail"))
    plain_id = uuid.UUID(await api.post(other, "nothing tagged"))
    repost = await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": str(original_id)}, token=other)
    ids = {
        name: await pool.fetchval("SELECT id FROM members WHERE external_id = $1", name)
        for name in ("maya", "author", "other")
    }
    await pool.execute(
        "INSERT INTO author_affinity (member_id, author_id, score) VALUES ($1, $2, 0.75)", ids["maya"], ids["author"]
    )
    await pool.execute("INSERT INTO topic_interest (member_id, tag, score) VALUES ($1, 'trail', 0.5)", ids["maya"])
    await pool.execute("INSERT INTO favourites (member_id, favourite_id) VALUES ($1, $2)", ids["maya"], ids["author"])
    rows = await pool.fetch(
        "SELECT * FROM posts WHERE id = ANY($1::uuid[])", [original_id, plain_id, uuid.UUID(repost["repost"]["id"])]
    )
    posts = {r["id"]: Post.of(r) for r in rows}
    original, plain = posts.pop(original_id), posts.pop(plain_id)
    [reposted] = posts.values()
    log = FeedLog(pool)
    log.record(ids["maya"], "following", Page([reposted, plain], None, "redis"))
    assert await log.flush() == 1
    logged = await pool.fetch(
        "SELECT feed, post_id, position, affinity, interest, favourite, age_seconds,"
        "       served_at - (SELECT created_at FROM posts WHERE id = post_id) AS age"
        " FROM feed_log ORDER BY position"
    )
    assert [(r["feed"], r["post_id"], r["position"], r["affinity"], r["interest"], r["favourite"]) for r in logged] == [
        ("following", original.id, 0, 0.75, 0.5, True),
        ("following", plain.id, 1, 0.0, 0.0, False),
    ]
    for r in logged:
        assert r["age_seconds"] == pytest.approx(r["age"].total_seconds(), abs=1e-3)
        assert r["age_seconds"] >= 0


async def test_engagement_is_logged_as_a_rate_of_what_the_reader_was_served_before(
    api: Api, pool: asyncpg.Pool
) -> None:
    """Affinity per post of the author served before, interest per post of the tag served before; each
    logged page adds to the counts, which the page's own rows do not see yet."""
    maya = await api.member("maya")
    author = await api.member("author")
    post_id = uuid.UUID(await api.post(author, "up the hill #trail"))
    ids = {n: await pool.fetchval("SELECT id FROM members WHERE external_id = $1", n) for n in ("maya", "author")}
    await pool.execute(
        "INSERT INTO author_affinity (member_id, author_id, score) VALUES ($1, $2, 0.75)", ids["maya"], ids["author"]
    )
    await pool.execute("INSERT INTO topic_interest (member_id, tag, score) VALUES ($1, 'trail', 0.5)", ids["maya"])
    post = Post.of(await pool.fetchrow("SELECT * FROM posts WHERE id = $1", post_id))
    for _ in range(3):
        await feed_log_svc.log_pages(
            pool, [ServedPage(ids["maya"], "following", (post.id,), "redis", datetime.now(UTC))]
        )
    rows = await pool.fetch("SELECT affinity_rate, interest_rate FROM feed_log ORDER BY served_at")
    assert [(r["affinity_rate"], r["interest_rate"]) for r in rows] == [
        (0.75, 0.5),
        (pytest.approx(0.75 / 2), pytest.approx(0.5 / 2)),
        (pytest.approx(0.75 / 3), pytest.approx(0.5 / 3)),
    ]
    assert await pool.fetchval("SELECT served FROM author_exposure WHERE member_id = $1", ids["maya"]) == 3
    assert (
        await pool.fetchval("SELECT served FROM topic_exposure WHERE member_id = $1 AND tag = 'trail'", ids["maya"])
        == 3
    )
    assert maya


async def test_a_post_the_reader_already_liked_is_not_counted_as_exposure(api: Api, pool: asyncpg.Pool) -> None:
    """Following pages serve a liked post again and again; counting those would lower the rate of the
    authors and tags the reader likes most."""
    author = await api.member("author")
    liked = uuid.UUID(await api.post(author, "liked #trail"))
    fresh = uuid.UUID(await api.post(author, "fresh #trail"))
    maya = await api.member("maya")
    await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": str(liked)}, token=maya)
    reader = await pool.fetchval("SELECT id FROM members WHERE external_id = 'maya'")
    for _ in range(2):
        await feed_log_svc.log_pages(
            pool, [ServedPage(reader, "following", (liked, fresh), "redis", datetime.now(UTC))]
        )
    assert await pool.fetchval("SELECT served FROM author_exposure WHERE member_id = $1", reader) == 2
    assert await pool.fetchval("SELECT served FROM topic_exposure WHERE member_id = $1", reader) == 2
    assert await pool.fetchval("SELECT count(*) FROM feed_log WHERE member_id = $1", reader) == 4


async def test_a_repost_whose_original_no_longer_exists_is_not_logged(api: Api, pool: asyncpg.Pool) -> None:
    posts = await _posts(api, pool, 1)
    gone = Post(uuid.uuid4(), posts[0].author_id, "gone", uuid.uuid4(), "live", posts[0].created_at, None)
    log = FeedLog(pool)
    log.record(uuid.uuid4(), "following", Page([posts[0], gone], None, "redis"))
    assert await log.flush() == 1
    assert [r["post_id"] for r in await pool.fetch("SELECT post_id FROM feed_log")] == [posts[0].id]


async def test_rows_of_a_day_without_a_partition_are_logged_into_a_new_one(api: Api, pool: asyncpg.Pool) -> None:
    posts = await _posts(api, pool, 2)
    served_at = datetime.now(UTC) - timedelta(days=40)
    await feed_log_svc.log_pages(
        pool, [ServedPage(uuid.uuid4(), "following", tuple(p.id for p in posts), "redis", served_at)]
    )
    assert served_at.date() in await feed_log_db.partition_days(pool)
    assert await pool.fetchval("SELECT count(*) FROM feed_log WHERE served_at = $1", served_at) == 2


async def test_retention_drops_the_partitions_of_days_past_it_and_keeps_the_rest(api: Api, pool: asyncpg.Pool) -> None:
    posts = await _posts(api, pool, 1)
    today = datetime.now(UTC).date()
    member = uuid.uuid4()
    for days_ago in (31, 30, 29, 0):
        at = datetime.combine(today - timedelta(days=days_ago), time(12), UTC)
        await feed_log_svc.log_pages(pool, [ServedPage(member, "following", (posts[0].id,), "redis", at)])
    dropped = await feed_log_db.apply_retention(pool, 30, today=today)
    assert dropped == [today - timedelta(days=31)]
    kept = await pool.fetch("SELECT served_at FROM feed_log ORDER BY served_at")
    assert [(today - r["served_at"].date()).days for r in kept] == [30, 29, 0]
    days = await feed_log_db.partition_days(pool)
    assert today - timedelta(days=31) not in days
    assert {today + timedelta(days=1), today + timedelta(days=2)} <= set(days)
    assert await feed_log_db.apply_retention(pool, 30, today=today) == []


async def _finished(pool: asyncpg.Pool, viewer: uuid.UUID, post_ids: list[uuid.UUID]) -> FeedPage:
    """The page as the API finishes it: the posts with their extras, read now (resolvers.pages)."""
    rows = await pool.fetch("SELECT * FROM posts WHERE id = ANY($1::uuid[]) ORDER BY id DESC", post_ids)
    posts = [Post.of(r) for r in rows]
    extras = await post_extras.page_extras(pool, [p.id for p in posts], viewer)
    return FeedPage(feed_posts(posts, extras), None, "redis")


async def _like(api: Api, token: str, post_id: uuid.UUID) -> None:
    await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": str(post_id)}, token=token)


async def test_popularity_is_what_the_page_showed_a_like_after_serving_does_not_count(
    api: Api, pool: asyncpg.Pool
) -> None:
    """The row's popularity is the like and comment count the served page read (likes + 3 x comments),
    and whether the reader had liked it is as of serving too: a like made between serving and the
    batch being written changes neither, so the post still counts as served to an unengaged reader."""
    author = await api.member("author")
    post_id = uuid.UUID(await api.post(author, "up the hill #trail"))
    fans = [await api.member(f"fan{n}") for n in range(3)]
    for fan in fans[:2]:
        await _like(api, fan, post_id)
    maya = await api.member("maya")
    reader = await pool.fetchval("SELECT id FROM members WHERE external_id = 'maya'")
    log = FeedLog(pool)
    log.record(reader, "following", await _finished(pool, reader, [post_id]))
    await _like(api, fans[2], post_id)  # after serving, before the batch is written
    await _like(api, maya, post_id)
    assert await pool.fetchval("SELECT likes FROM post_stats WHERE post_id = $1", post_id) == 4
    assert await log.flush() == 1
    assert await pool.fetchval("SELECT popularity FROM feed_log WHERE member_id = $1", reader) == 2.0
    assert await pool.fetchval("SELECT served FROM author_exposure WHERE member_id = $1", reader) == 1
    # A page served now shows four likes, and the reader's own: not counted as exposure any more.
    log.record(reader, "following", await _finished(pool, reader, [post_id]))
    assert await log.flush() == 1
    rows = await pool.fetch("SELECT popularity FROM feed_log WHERE member_id = $1 ORDER BY served_at", reader)
    assert [r["popularity"] for r in rows] == [2.0, 4.0]
    assert await pool.fetchval("SELECT served FROM author_exposure WHERE member_id = $1", reader) == 1


async def test_a_page_logged_later_by_its_ids_counts_only_the_likes_made_by_its_serving_time(
    api: Api, pool: asyncpg.Pool
) -> None:
    """Tools and the simulation log pages at a serving time of their own: popularity and the reader's
    like are read as of that time, not as of the write."""
    author = await api.member("author")
    post_id = uuid.UUID(await api.post(author, "a post"))
    fans = [await api.member(f"fan{n}") for n in range(3)]
    for fan in fans:
        await _like(api, fan, post_id)
    fan_ids = [await pool.fetchval("SELECT id FROM members WHERE external_id = $1", f"fan{n}") for n in range(3)]
    served_at = datetime.now(UTC) - timedelta(minutes=10)
    await pool.execute(
        "UPDATE likes SET created_at = $1 WHERE post_id = $2 AND member_id = ANY($3::uuid[])",
        served_at - timedelta(minutes=1),
        post_id,
        fan_ids[:1],
    )
    await pool.execute(
        "UPDATE likes SET created_at = $1 WHERE post_id = $2 AND member_id = ANY($3::uuid[])",
        served_at + timedelta(minutes=1),
        post_id,
        fan_ids[1:],
    )
    await feed_log_svc.log_pages(pool, [ServedPage(fan_ids[2], "following", (post_id,), "redis", served_at)])
    row = await pool.fetchrow("SELECT popularity FROM feed_log")
    assert row["popularity"] == 1.0
    # fan2's like came after serving: the post counts as served to a reader who could still like it.
    assert await pool.fetchval("SELECT served FROM author_exposure WHERE member_id = $1", fan_ids[2]) == 1


async def test_exposure_is_counted_in_memory_and_folded_once_a_batch_by_pair(api: Api, pool: asyncpg.Pool) -> None:
    """Three pages of one reader in one batch: each page's rows see the pages before it (not their
    own), and the fold adds the batch's counts in one statement, bumping the reader's version once."""
    author = await api.member("author")
    ids = [uuid.UUID(await api.post(author, f"walk {n} #trail #hill")) for n in range(2)]
    await api.member("maya")
    reader = await pool.fetchval("SELECT id FROM members WHERE external_id = 'maya'")
    author_id = await pool.fetchval("SELECT id FROM members WHERE external_id = 'author'")
    await pool.execute(
        "INSERT INTO author_affinity (member_id, author_id, score) VALUES ($1, $2, 6)", reader, author_id
    )
    await pool.execute("INSERT INTO topic_interest (member_id, tag, score) VALUES ($1, 'trail', 3)", reader)
    version = await pool.fetchval("SELECT version FROM member_signal_versions WHERE member_id = $1", reader)
    log = FeedLog(pool)
    for _ in range(3):
        log.record(reader, "following", await _finished(pool, reader, ids))
    assert await log.flush() == 3
    rows = await pool.fetch(
        "SELECT affinity_rate, interest_rate FROM feed_log WHERE member_id = $1 ORDER BY served_at, position", reader
    )
    # Two posts a page, each of the author and of #trail: 0, 2 and 4 served before each page.
    assert [(r["affinity_rate"], r["interest_rate"]) for r in rows] == [
        (6.0, 3.0),
        (6.0, 3.0),
        (2.0, 1.0),
        (2.0, 1.0),
        (pytest.approx(6 / 5), pytest.approx(3 / 5)),
        (pytest.approx(6 / 5), pytest.approx(3 / 5)),
    ]
    exposure = await pool.fetch("SELECT tag, served FROM topic_exposure WHERE member_id = $1 ORDER BY tag", reader)
    assert [(r["tag"], r["served"]) for r in exposure] == [("hill", 6), ("trail", 6)]
    assert await pool.fetchval("SELECT served FROM author_exposure WHERE member_id = $1", reader) == 6
    assert await pool.fetchval("SELECT version FROM member_signal_versions WHERE member_id = $1", reader) == version + 1
    # The writer kept the reader current through its own fold: the next batch reads nothing again.
    loads = log.book.loads
    log.record(reader, "following", await _finished(pool, reader, ids[:1]))
    assert await log.flush() == 1
    assert log.book.loads == loads
    assert await pool.fetchval("SELECT served FROM author_exposure WHERE member_id = $1", reader) == 7


async def test_a_change_to_the_readers_signals_is_seen_by_the_next_batch(api: Api, pool: asyncpg.Pool) -> None:
    """The kept signals are checked against the reader's version every batch: new affinity, a new
    favourite, or another API process's exposure fold are all read before the next rows are made."""
    author = await api.member("author")
    post_id = uuid.UUID(await api.post(author, "a post"))
    await api.member("maya")
    reader = await pool.fetchval("SELECT id FROM members WHERE external_id = 'maya'")
    author_id = await pool.fetchval("SELECT id FROM members WHERE external_id = 'author'")
    first, second = FeedLog(pool), FeedLog(pool)  # two API processes
    first.record(reader, "following", await _finished(pool, reader, [post_id]))
    assert await first.flush() == 1
    await pool.execute(
        "INSERT INTO author_affinity (member_id, author_id, score) VALUES ($1, $2, 4)", reader, author_id
    )
    await pool.execute("INSERT INTO favourites (member_id, favourite_id) VALUES ($1, $2)", reader, author_id)
    second.record(reader, "following", await _finished(pool, reader, [post_id]))
    assert await second.flush() == 1
    first.record(reader, "following", await _finished(pool, reader, [post_id]))
    assert await first.flush() == 1
    rows = await pool.fetch(
        "SELECT affinity, favourite, affinity_rate FROM feed_log WHERE member_id = $1 ORDER BY served_at", reader
    )
    assert [(r["affinity"], r["favourite"], r["affinity_rate"]) for r in rows] == [
        (0.0, False, 0.0),
        (4.0, True, 2.0),  # one served before (the first process's)
        (4.0, True, pytest.approx(4 / 3)),  # two served before, one of them by the other process
    ]


async def test_a_comment_makes_the_post_no_longer_count_as_exposure(api: Api, pool: asyncpg.Pool) -> None:
    author = await api.member("author")
    post_id = uuid.UUID(await api.post(author, "a post"))
    maya = await api.member("maya")
    reader = await pool.fetchval("SELECT id FROM members WHERE external_id = 'maya'")
    log = FeedLog(pool)
    log.record(reader, "following", await _finished(pool, reader, [post_id]))
    assert await log.flush() == 1
    await api.gql(
        'mutation($p: ID!) { addComment(postId: $p, content: "nice") { id } }',
        {"p": str(post_id)},
        token=maya,
    )
    log.record(reader, "following", await _finished(pool, reader, [post_id]))
    assert await log.flush() == 1
    assert await pool.fetchval("SELECT count(*) FROM feed_log WHERE member_id = $1", reader) == 2
    assert await pool.fetchval("SELECT served FROM author_exposure WHERE member_id = $1", reader) == 1


def test_logging_cannot_be_turned_off_in_production() -> None:
    with pytest.raises(ValueError, match="FEED_LOG_ENABLED"):
        Settings(feedfabric_production=True, feed_log_enabled=False)
    assert not Settings(feed_log_enabled=False).feed_log_enabled


async def test_exposure_folded_on_a_schedule_is_in_the_rows_at_once_and_in_postgres_at_the_fold(
    api: Api, pool: asyncpg.Pool
) -> None:
    """With a fold schedule, batches are written without folding: the rows still count what was served
    before them (the writer's own counts), Postgres gets one upsert per pair at the fold, and stopping
    the log folds what is left."""
    author = await api.member("author")
    post_id = uuid.UUID(await api.post(author, "a walk #trail"))
    await api.member("maya")
    reader = await pool.fetchval("SELECT id FROM members WHERE external_id = 'maya'")
    author_id = await pool.fetchval("SELECT id FROM members WHERE external_id = 'author'")
    await pool.execute(
        "INSERT INTO author_affinity (member_id, author_id, score) VALUES ($1, $2, 6)", reader, author_id
    )
    version = await pool.fetchval("SELECT version FROM member_signal_versions WHERE member_id = $1", reader)
    log = FeedLog(pool, fold_every_s=300)
    for _ in range(2):  # two batches, neither folds
        log.record(reader, "following", await _finished(pool, reader, [post_id]))
        assert await log.flush() == 1
    assert await pool.fetchval("SELECT count(*) FROM author_exposure WHERE member_id = $1", reader) == 0
    # One author and one tag pair, each counted twice, waiting in memory for the fold.
    assert (log.book.unfolded_authors, log.book.unfolded_tags) == ({reader: {author_id: 2}}, {reader: {"trail": 2}})
    log.record(reader, "following", await _finished(pool, reader, [post_id]))
    await log.stop()
    rates = await pool.fetch("SELECT affinity_rate FROM feed_log WHERE member_id = $1 ORDER BY served_at", reader)
    assert [r["affinity_rate"] for r in rates] == [6.0, 3.0, 2.0]
    assert await pool.fetchval("SELECT served FROM author_exposure WHERE member_id = $1", reader) == 3
    assert await pool.fetchval("SELECT served FROM topic_exposure WHERE member_id = $1", reader) == 3
    assert await pool.fetchval("SELECT version FROM member_signal_versions WHERE member_id = $1", reader) == version + 1


async def test_a_fold_is_due_once_enough_pairs_wait_whatever_the_schedule(api: Api, pool: asyncpg.Pool) -> None:
    """The unfolded counts are bounded: past `max_unfolded` pairs the next batch folds them."""
    author = await api.member("author")
    post_id = uuid.UUID(await api.post(author, "a walk"))
    await api.member("maya")
    reader = await pool.fetchval("SELECT id FROM members WHERE external_id = 'maya'")
    log = FeedLog(pool, fold_every_s=300, max_unfolded=2)
    log.record(reader, "following", await _finished(pool, reader, [post_id]))
    assert await log.flush() == 1
    assert await pool.fetchval("SELECT count(*) FROM author_exposure WHERE member_id = $1", reader) == 0
    log.record(reader, "following", await _finished(pool, reader, [post_id]))
    assert await log.flush() == 1
    assert await pool.fetchval("SELECT served FROM author_exposure WHERE member_id = $1", reader) == 2
    assert log.book.unfolded_pairs == 0


async def test_rows_encoded_for_copy_read_back_exactly_as_made(pool: asyncpg.Pool) -> None:
    """The writer encodes rows itself (db.feed_log.LogRows, binary COPY): every column reads back as
    made, text beyond ASCII and NULLs included, timestamps to the microsecond, each day's rows in
    that day's partition (made when missing)."""
    reader, post = uuid.uuid4(), uuid.uuid4()
    today = datetime(2026, 12, 7, 23, 59, 59, 999_999, tzinfo=UTC)
    tomorrow = datetime(2026, 12, 8, 0, 0, 0, 1, tzinfo=UTC)
    rows = feed_log_db.LogRows()
    prefix, out = rows.page(reader, "foryou", "candidates", today, "découverte")
    rows.add(prefix, out, post, 7, 1.5, -2.25, True, 0.0, 0.875, 12.0, 0.75, 1e-9, -0.5, 3.25, "tag:café")
    prefix, out = rows.page(reader, "following", "redis", tomorrow, None)
    rows.add(prefix, out, post, 0, 0.0, 0.0, False, 86_400.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None)
    assert rows.count == 2
    async with pool.acquire() as conn:
        await feed_log_db.copy_rows(conn, rows)
    got = await pool.fetch(
        "SELECT tableoid::regclass::text AS part, member_id, feed, source, served_at, preset, post_id, position,"
        " affinity, interest, favourite, age_seconds, similarity, popularity, affinity_rate, interest_rate,"
        " author_effect, topic_effect, reason FROM feed_log WHERE member_id = $1 ORDER BY served_at",
        reader,
    )
    assert [tuple(r.values()) for r in got] == [
        ("feed_log_20261207", reader, "foryou", "candidates", today, "découverte", post, 7,
         1.5, -2.25, True, 0.0, 0.875, 12.0, 0.75, 1e-9, -0.5, 3.25, "tag:café"),
        ("feed_log_20261208", reader, "following", "redis", tomorrow, None, post, 0,
         0.0, 0.0, False, 86_400.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None),
    ]  # fmt: skip
