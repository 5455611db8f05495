"""worker-embeddings: every post's MiniLM vector and inferred topics, refreshed on edit.

`prepare` embeds the texts of a whole poll in one model call (batching is
where the throughput is); `handle` then reads the post again inside its
transaction and uses the prepared vector only if the text is still the one
that was embedded, else encodes it alone, so a race with an edit can never
store a stale vector.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import asyncpg

from feedfabric.core import events
from feedfabric.core.events import Event
from feedfabric.db import post_text
from feedfabric.feeds import embeddings as post_embeddings
from feedfabric.feeds import minilm as embeddings
from feedfabric.workers.base import GroupSpec, PermanentError, WorkerContext

__all__ = ["EMBEDDER", "GROUP", "PREPARED"]

EMBEDDER = "embedder"
PREPARED = "embeddings.prepared"
# Prepared vectors whose handle never ran (an already-processed redelivery) are dropped past this.
_PREPARED_CAP = 4096
_EMBED_TYPES = frozenset({"PostCreated", "PostUpdated"})


def _post_id(event: Event) -> uuid.UUID:
    try:
        return uuid.UUID(str(event.data["postId"]))
    except (KeyError, ValueError) as exc:
        raise PermanentError(f"{event.type} {event.event_id}: bad payload ({exc})") from None


async def setup(ctx: WorkerContext) -> None:
    ctx.resources[EMBEDDER] = await asyncio.to_thread(embeddings.load_embedder, ctx.settings.embedding_replicas)
    ctx.resources[PREPARED] = {}


async def prepare(ctx: WorkerContext, batch: Sequence[Event]) -> None:
    wanted = {
        _post_id(e)
        for e in batch
        if e.type in _EMBED_TYPES and not (e.type == "PostCreated" and e.data.get("repostOf"))
    }
    if not wanted:
        return
    posts = [p for p in (await post_text.texts(ctx.pool, list(wanted))).values() if post_embeddings.embeddable(p)]
    if not posts:
        return
    vectors = await post_embeddings.encode(ctx.resources[EMBEDDER], [p.content for p in posts])
    prepared: dict[tuple[uuid.UUID, str], object] = ctx.resources.setdefault(PREPARED, {})
    for post, vector in zip(posts, vectors):
        prepared[(post.id, post.content)] = vector
    while len(prepared) > _PREPARED_CAP:
        del prepared[next(iter(prepared))]


async def handle(ctx: WorkerContext, conn: asyncpg.Connection, event: Event) -> None:
    if event.type not in _EMBED_TYPES and event.type != "PostDeleted":
        return
    post_id = _post_id(event)
    post = (await post_text.texts(conn, [post_id])).get(post_id)
    if post is None:
        raise PermanentError(f"{event.type} {event.event_id}: post {post_id} does not exist")
    if event.type == "PostDeleted" or not post_embeddings.embeddable(post):
        await post_embeddings.forget(conn, ctx.redis, post_id)
        return
    embedder = ctx.resources[EMBEDDER]
    vector = ctx.resources.setdefault(PREPARED, {}).pop((post.id, post.content), None)
    if vector is None:
        vector = (await post_embeddings.encode(embedder, [post.content]))[0]
    await post_embeddings.store(conn, ctx.redis, embedder, post, vector)


GROUP = GroupSpec(
    name="worker-embeddings",
    topics=(events.POSTS,),
    event_types=frozenset({"PostCreated", "PostUpdated", "PostDeleted"}),
    handle=handle,
    prepare=prepare,
    setup=setup,
)
