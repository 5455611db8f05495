"""A feed page's extras come from one statement (db.post_extras) and answer as a plain query for each kind does."""

import uuid

import asyncpg
from feedfabric.core.auth import TokenCache
from feedfabric.core.models import FeedPost, Member, Post
from feedfabric.db import post_extras
from feedfabric.db.pool import create_pool
from feedfabric.feeds.viewer import resolve_viewer
from feedfabric.resolvers import reads
from feedfabric.resolvers.context import build_context
from feedfabric.resolvers.pages import feed_posts_of
from feedfabric.resources import Resources

from tests.support import Api


async def _world(api: Api, pool: asyncpg.Pool) -> str:
    reader = await api.member("reader")
    author = await api.member("author")
    other = await api.member("other")
    await api.follow(reader, "author")
    await api.follow(reader, "other")
    first = await api.post(author, "hello #news #zoo")
    await api.post(author, "plain")
    held = await api.post(reader, "my own, held")
    await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": first}, token=reader)
    await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": first}, token=other)
    await api.gql(
        "mutation($p: ID!, $c: String!) { addComment(postId: $p, content: $c) { id } }",
        {"p": first, "c": "nice"},
        token=other,
    )
    await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": first}, token=other)
    await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": held}, token=author)
    await pool.execute("UPDATE posts SET status = 'held' WHERE id = $1", uuid.UUID(held))  # visible to its author only
    owner = await pool.fetchval("SELECT author_id FROM posts WHERE id = $1", uuid.UUID(first))
    for position, status in enumerate(("ready", "pending", "ready")):
        media_id = uuid.uuid4()
        await pool.execute(
            "INSERT INTO media (id, owner_id, status, content_type, width, height, byte_size, score)"
            " VALUES ($1, $2, $3, 'image/png', 640, 480, 1234, 0.1 + $4::float8 / 3)",
            media_id,
            owner,
            status,
            position,
        )
        await pool.execute(
            "INSERT INTO post_media (post_id, media_id, position) VALUES ($1, $2, $3)",
            uuid.UUID(first),
            media_id,
            position,
        )
    return reader


async def _by_kind(
    pool: asyncpg.Pool, row: Post, viewer_id: uuid.UUID | None, *, with_original: bool = True
) -> FeedPost:
    """The feed post assembled one kind at a time, each by the plainest query for it: the one statement
    must agree with every one of them."""
    author = await pool.fetchrow("SELECT * FROM members WHERE id = $1", row.author_id)
    tags = await pool.fetchval(
        "SELECT coalesce(array_agg(tag ORDER BY tag), '{}') FROM post_tags WHERE post_id = $1", row.id
    )
    media = await pool.fetch(
        "SELECT pm.post_id, pm.position, m.id, m.owner_id, m.status, m.content_type, m.width, m.height,"
        " m.byte_size, m.score, m.reason, m.created_at, m.updated_at FROM post_media pm JOIN media m ON m.id = pm.media_id"
        " WHERE pm.post_id = $1 AND m.status = 'ready' ORDER BY pm.position",
        row.id,
    )
    likes = await pool.fetchval("SELECT count(*) FROM likes WHERE post_id = $1", row.id)
    comments = await pool.fetchval(
        "SELECT count(*) FROM comments c JOIN members m ON m.id = c.author_id AND m.status = 'active'"
        " WHERE c.post_id = $1",
        row.id,
    )
    liked = viewer_id is not None and await pool.fetchval(
        "SELECT EXISTS (SELECT 1 FROM likes WHERE post_id = $1 AND member_id = $2)", row.id, viewer_id
    )
    original_row = (
        await pool.fetchrow("SELECT * FROM visible_posts($2) WHERE id = $1", row.repost_of, viewer_id)
        if with_original and row.repost_of
        else None
    )
    original = Post.of(original_row) if original_row is not None else None
    return FeedPost(
        row=row,
        author=Member.of(author) if author is not None else None,
        tags=list(tags),
        media=[dict(m) for m in media],
        like_count=int(likes),
        comment_count=int(comments),
        viewer_liked=bool(liked),
        original=await _by_kind(pool, original, viewer_id, with_original=False) if original is not None else None,
    )


async def test_one_statement_answers_as_a_query_for_each_kind(api: Api, database_url: str, pool: asyncpg.Pool) -> None:
    reader = await _world(api, pool)
    statements: list[str] = []

    async def attach(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(lambda record: statements.append(record.query))

    counted = await create_pool(database_url, min_size=1, max_size=4, on_connect=attach, lean_reset=True)
    reposts = 0
    try:
        for token in (reader, api.token("author"), None):
            viewer = await resolve_viewer(counted, api.settings, TokenCache(), f"Bearer {token}" if token else None)
            ctx = build_context(Resources(settings=api.settings, pool=counted), viewer)
            if token is None:
                rows = [p.row for p in (await reads.tag_feed(ctx, "news", 10, None)).posts]
            else:
                rows = [p.row for p in (await reads.home_feed(ctx, 10, None)).posts]
            assert rows
            member = viewer.viewer.member
            viewer_id = member.id if member else None
            by_kind = [await _by_kind(pool, row, viewer_id) for row in rows]
            statements.clear()
            built = await feed_posts_of(ctx, rows)
            assert len(statements) == 1
            assert built == by_kind
            reposts += sum(p.original is not None for p in by_kind)
        assert reposts == 2  # the reader sees both (the held original is its own); the author neither
    finally:
        await counted.close()


async def test_extras_of_a_page(api: Api, pool: asyncpg.Pool) -> None:
    reader = await _world(api, pool)
    reader_id = await pool.fetchval("SELECT id FROM members WHERE external_id = $1", "reader")
    first = await pool.fetchval("SELECT id FROM posts WHERE content = 'hello #news #zoo'")
    repost = await pool.fetchval("SELECT id FROM posts WHERE repost_of = $1", first)
    loaded = await post_extras.page_extras(pool, [repost], reader_id)
    assert set(loaded.extras) == {repost, first} and set(loaded.originals) == {first}
    extras = loaded.extras[first]
    assert (extras.tags, extras.like_count, extras.comment_count, extras.viewer_liked) == (["news", "zoo"], 2, 1, True)
    assert [m["status"] for m in extras.media] == ["ready", "ready"]
    assert [m["position"] for m in extras.media] == [0, 2]
    assert extras.author is not None and extras.author.username == "author"
    signed_out = await post_extras.page_extras(pool, [repost], None)
    assert not signed_out.extras[first].viewer_liked
    assert await post_extras.page_extras(pool, [], reader_id) == post_extras.PageExtras({}, {})
    assert reader
