"""worker-embeddings: vectors in Redis, inferred topics in post_tags, similarPosts."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from feedfabric.core.errors import BadInput
from feedfabric.db import tags
from feedfabric.feeds import embeddings as post_embeddings
from feedfabric.feeds import minilm as embeddings
from feedfabric.workers import embeddings as worker
from feedfabric.workers.base import WorkerContext

from tests import db_reads
from tests import factories_ml as f


@pytest.fixture(scope="session")
def embedder() -> embeddings.Embedder:
    return f.shared_embedder()


@pytest.fixture
def ctx(settings, pool, redis, embedder) -> WorkerContext:
    return WorkerContext(settings=settings, pool=pool, redis=redis, resources={worker.EMBEDDER: embedder})


def created(post_id, author_id, repost_of=None):
    return f.event(
        "PostCreated",
        post_id,
        {"postId": post_id, "authorId": author_id, "createdAtMs": 0, "repostOf": repost_of},
    )


def updated(post_id, author_id):
    return f.event("PostUpdated", post_id, {"postId": post_id, "authorId": author_id})


async def _inferred(pool, post_id) -> list[str]:
    async with pool.acquire() as conn:
        return await db_reads.inferred_tags(conn, post_id)


async def test_a_running_post_gets_a_running_topic_and_a_stored_vector(ctx, pool, redis):
    author = await f.member(pool)
    post = await f.post(pool, author, "Went for a 10k run this morning, legs are dead but feeling great")
    assert await f.deliver(ctx, worker.GROUP, [created(post, author)]) == 1

    assert {"running", "fitness"} & set(await _inferred(pool, post))
    raw = await redis.get(post_embeddings.vector_key(post))
    vector = embeddings.from_bytes(raw)
    assert vector.shape == (384,) and vector.dtype == np.float32
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-4
    assert await pool.fetchval("SELECT vector FROM post_embeddings WHERE post_id = $1", post) == raw
    assert ctx.resources[worker.PREPARED] == {}


async def test_hashtags_stay_and_an_edit_re_tags(ctx, pool):
    author = await f.member(pool)
    post = await f.post(pool, author, "Half marathon done! #proud", hashtags=["proud"])
    await f.deliver(ctx, worker.GROUP, [created(post, author)])
    assert "running" in await _inferred(pool, post)

    await f.edit_post(pool, post, "Made lasagna from scratch tonight, recipe in the comments #proud")
    await f.deliver(ctx, worker.GROUP, [updated(post, author)])
    after = await _inferred(pool, post)
    assert "cooking" in after and "running" not in after
    async with pool.acquire() as conn:
        assert "proud" in await tags.tags_of_post(conn, post)


async def test_near_duplicates_are_each_others_nearest_neighbours(ctx, pool, redis):
    author = await f.member(pool)
    texts = [
        "Just finished my first marathon in under four hours!",
        "Finished my first marathon in under 4 hours today!!",
        "Made lasagna from scratch tonight, the sauce took three hours",
        "Tonight I made lasagna from scratch; the sauce took 3 hours",
        "Our team shipped the new release of the mobile app",
        "Voting today, please go vote",
        "Sunset at the beach with my new 35mm lens",
    ]
    ids = [await f.post(pool, author, t) for t in texts]
    assert await f.deliver(ctx, worker.GROUP, [created(i, author) for i in ids]) == len(ids)

    for a, b in ((0, 1), (2, 3)):
        assert (await post_embeddings.similar_posts(redis, pool, ids[a], 1))[0] == ids[b]
        assert (await post_embeddings.similar_posts(redis, pool, ids[b], 1))[0] == ids[a]
    everything = await post_embeddings.similar_posts(redis, pool, ids[0], 100)
    assert len(everything) == len(ids) - 1 and ids[0] not in everything


async def test_similar_posts_hides_what_the_viewer_may_not_see(ctx, pool, redis):
    author, viewer = await f.member(pool), await f.member(pool)
    base = await f.post(pool, author, "Morning run by the lake, 8 km easy pace")
    held = await f.post(pool, author, "Morning run around the lake, 8km at an easy pace")
    other = await f.post(pool, author, "Easy 5 mile jog this morning")
    await f.deliver(ctx, worker.GROUP, [created(i, author) for i in (base, held, other)])
    await pool.execute("UPDATE posts SET status = 'held' WHERE id = $1", held)

    assert await post_embeddings.similar_posts(redis, pool, base, 5, viewer_id=viewer) == [other]
    assert (await post_embeddings.similar_posts(redis, pool, base, 5, viewer_id=author))[0] == held
    with pytest.raises(BadInput):
        await post_embeddings.similar_posts(redis, pool, base, 0)


async def test_reposts_and_deleted_posts_are_not_indexed(ctx, pool, redis):
    author = await f.member(pool)
    original = await f.post(pool, author, "Trail running in the hills today")
    repost = await f.post(pool, author, "", repost_of=original)
    await f.deliver(ctx, worker.GROUP, [created(original, author), created(repost, author, repost_of=original)])
    assert await redis.exists(post_embeddings.vector_key(repost)) == 0
    assert await redis.exists(post_embeddings.vector_key(original)) == 1

    await pool.execute("UPDATE posts SET status = 'deleted' WHERE id = $1", original)
    await f.deliver(ctx, worker.GROUP, [f.event("PostDeleted", original, {"postId": original, "authorId": author})])
    assert await redis.exists(post_embeddings.vector_key(original)) == 0
    assert await pool.fetchval("SELECT count(*) FROM post_embeddings WHERE post_id = $1", original) == 0
    assert await post_embeddings.similar_posts(redis, pool, original, 5) == []


async def test_redelivery_is_absorbed(ctx, pool, redis):
    author = await f.member(pool)
    post = await f.post(pool, author, "Leg day at the gym, new squat PR")
    event = created(post, author)
    assert await f.deliver(ctx, worker.GROUP, [event]) == 1
    before = await _inferred(pool, post)
    assert await f.deliver(ctx, worker.GROUP, [event]) == 0
    assert await _inferred(pool, post) == before
    # The duplicate's prepared vector is dropped at the cap instead of piling up.
    assert len(ctx.resources[worker.PREPARED]) <= 4096


async def test_similar_posts_survive_a_flushed_or_absent_redis(ctx, pool, redis):
    import redis.asyncio as aioredis
    from feedfabric.ops.devstack import free_port

    author = await f.member(pool)
    a = await f.post(pool, author, "Baked sourdough bread this weekend, finally a good crust")
    b = await f.post(pool, author, "Finally got a good crust on my sourdough bread this weekend")
    c = await f.post(pool, author, "The election debate last night was a mess")
    await f.deliver(ctx, worker.GROUP, [created(i, author) for i in (a, b, c)])
    await redis.flushdb()
    assert await post_embeddings.similar_posts(redis, pool, a, 2) == [b, c]

    gone = aioredis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.2)
    try:
        assert await post_embeddings.similar_posts(gone, pool, b, 1) == [a]
    finally:
        await gone.aclose()


async def test_setup_loads_the_model_into_the_context(settings, pool, redis, monkeypatch):
    monkeypatch.setattr(embeddings, "load_embedder", lambda replicas: f.shared_embedder())
    fresh = WorkerContext(settings=settings, pool=pool, redis=redis)
    await worker.GROUP.setup(fresh)
    assert fresh.resources[worker.EMBEDDER] is f.shared_embedder()
    assert fresh.resources[worker.PREPARED] == {}
    assert worker.GROUP.name == "worker-embeddings" and "PostUpdated" in worker.GROUP.event_types


async def test_replicas_encode_chunks_in_order(embedder):
    assert embeddings.split([], 2) == []
    assert embeddings.split(["a"] * 10, 2) == [["a"] * 10]
    assert [len(c) for c in embeddings.split([str(i) for i in range(33)], 2)] == [17, 16]
    texts = [f"post number {i} about {'running' if i % 2 else 'cooking'}" for i in range(40)]
    together = await post_embeddings.encode(embedder, texts)
    alone = embeddings.encode(embedder.models[0], texts)
    assert together.shape == (40, 384) and len(embedder.models) == 2
    assert np.allclose(together, alone, atol=1e-5)


async def test_similar_posts_of_a_post_the_viewer_may_not_see_are_as_of_an_unknown_id(ctx, pool, redis):
    author, shady, viewer = await f.member(pool), await f.member(pool), await f.member(pool)
    held = await f.post(pool, author, "Morning run by the lake, 8 km easy pace")
    by_shady = await f.post(pool, shady, "Morning run around the lake, 8km at an easy pace")
    other = await f.post(pool, author, "Easy 5 mile jog this morning")
    await f.deliver(ctx, worker.GROUP, [created(i, a) for i, a in ((held, author), (by_shady, shady), (other, author))])
    await pool.execute("UPDATE posts SET status = 'held' WHERE id = $1", held)
    await pool.execute("UPDATE members SET status = 'suspended' WHERE id = $1", shady)

    assert await post_embeddings.similar_posts(redis, pool, uuid.uuid4(), 5, viewer_id=viewer) == []
    for hidden in (held, by_shady):
        assert await post_embeddings.similar_posts(redis, pool, hidden, 5, viewer_id=viewer) == []
    assert await post_embeddings.similar_posts(redis, pool, held, 5, viewer_id=author) == [other]


async def test_graphql_similar_posts_of_a_held_or_suspended_authors_post_is_empty(ctx, api):
    viewer = await api.member("viewer")
    admin = await api.member("mod", admin=True)
    writer, shady = await api.member("writer"), await api.member("shady")
    ids = {}
    for name, token, text in (
        ("held", writer, "Morning run by the lake, 8 km easy pace"),
        ("shady", shady, "Morning run around the lake, 8km at an easy pace"),
        ("shown", writer, "Easy 5 mile jog this morning"),
        ("also", writer, "Jogged an easy five miles this morning"),
    ):
        author = (await api.gql("{ viewer { id } }", token=token))["viewer"]["id"]
        ids[name] = await api.post(token, text)
        await f.deliver(ctx, worker.GROUP, [created(uuid.UUID(ids[name]), uuid.UUID(author))])
    await api.gql("mutation($id: ID!) { holdPost(id: $id) { id } }", {"id": ids["held"]}, token=admin)
    await api.gql('mutation { suspendMember(externalUserId: "shady") { id } }', token=admin)
    similar = "query($id: ID!) { similarPosts(postId: $id) { id } }"

    assert (await api.gql(similar, {"id": str(uuid.uuid4())}, token=viewer))["similarPosts"] == []
    assert (await api.gql(similar, {"id": ids["held"]}, token=viewer))["similarPosts"] == []
    assert (await api.gql(similar, {"id": ids["shady"]}, token=viewer))["similarPosts"] == []
    # the control: a post the viewer may see has neighbours, and the held post has them for its author
    assert (await api.gql(similar, {"id": ids["shown"]}, token=viewer))["similarPosts"] == [{"id": ids["also"]}]
    assert len((await api.gql(similar, {"id": ids["held"]}, token=writer))["similarPosts"]) == 2
