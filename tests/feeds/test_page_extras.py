"""A feed page's extras come from one statement (db.post_extras) and answer as the per-kind loaders do."""

import asyncio
import uuid
from typing import Any

import asyncpg
from feedfabric.core.models import FeedPost, Post
from feedfabric.db import post_extras
from feedfabric.db.pool import create_pool
from feedfabric.feeds.viewer import resolve_viewer
from feedfabric.resolvers import reads
from feedfabric.resolvers.context import Resources, build_context
from feedfabric.resolvers.page_loads import load_feed_posts

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


async def _by_loaders(ctx: Any, row: Post, *, with_original: bool = True) -> FeedPost:
    """The feed post assembled field by field through the per-kind DataLoaders (what GraphQL does outside
    a feed page): the one statement must agree with it."""
    loaders = ctx.loaders
    author, tags, media, likes, comments, liked = await asyncio.gather(
        loaders.member.load(row.author_id),
        loaders.tags.load(row.id),
        loaders.media.load(row.id),
        loaders.like_count.load(row.id),
        loaders.comment_count.load(row.id),
        loaders.viewer_liked.load(row.id),
    )
    original = await loaders.visible_post.load(row.repost_of) if with_original and row.repost_of else None
    return FeedPost(
        row=row,
        author=author,
        tags=list(tags),
        media=[dict(m) for m in media if m["status"] == "ready"],
        like_count=int(likes),
        comment_count=int(comments),
        viewer_liked=bool(liked),
        original=await _by_loaders(ctx, original, with_original=False) if original is not None else None,
    )


async def test_one_statement_answers_as_the_loaders(api: Api, database_url: str, pool: asyncpg.Pool) -> None:
    reader = await _world(api, pool)
    statements: list[str] = []

    async def attach(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(lambda record: statements.append(record.query))

    counted = await create_pool(database_url, min_size=1, max_size=4, on_connect=attach, lean_reset=True)
    reposts = 0
    try:
        for token in (reader, api.token("author"), None):
            viewer = await resolve_viewer(counted, api.settings, f"Bearer {token}" if token else None)
            ctx = build_context(Resources(settings=api.settings, pool=counted), viewer)
            if token is None:
                page = await reads.tag_feed(ctx, "news", 10, None)
            else:
                page = await reads.home_feed(ctx, 10, None)
            assert page.items
            by_loaders = [await _by_loaders(ctx, p) for p in page.items]
            statements.clear()
            built = await load_feed_posts(ctx, page)
            assert len(statements) == 1
            assert built == by_loaders
            reposts += sum(p.original is not None for p in by_loaders)
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
