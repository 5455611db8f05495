"""Writing posts: entities parsed from text, limits, ownership, and the outbox row in the same transaction."""

import asyncio
import uuid

import asyncpg
from feedfabric.feeds.posts import MAX_HASHTAGS_PER_POST

from tests.support import Api

POST_FIELDS = "id content tags mentions { username } status repostOf { id } author { username }"


async def outbox(pool: asyncpg.Pool) -> list[tuple[str, str]]:
    rows = await pool.fetch("SELECT event_type, key FROM outbox ORDER BY id")
    return [(r["event_type"], r["key"]) for r in rows]


async def test_a_post_parses_hashtags_and_mentions(api: Api) -> None:
    maya = await api.member("maya")
    await api.member("theo")
    data = await api.gql(
        f'mutation {{ createPost(input: {{content: "Long run with @Theo #Running #trail #running"}}) {{ {POST_FIELDS} }} }}',
        token=maya,
    )
    post = data["createPost"]
    assert post["tags"] == ["running", "trail"]
    assert post["mentions"] == [{"username": "theo"}]
    assert post["status"] == "LIVE"


async def test_a_suspended_member_is_left_out_of_post_mentions_as_of_sample_actors(api: Api) -> None:
    """One rule for a suspended member: `follow` answers not found, `sampleActors` hides them, and so
    does `post.mentions` (it listed them with `status: SUSPENDED`); unsuspended, they show again."""
    admin = await api.member("root", admin=True)
    maya = await api.member("maya")
    await api.member("theo")
    await api.member("ines")
    post_id = await api.post(maya, "with @theo and @ines")
    query = "query($id: ID!) { post(id: $id) { mentions { username status } } }"
    shown = (await api.gql(query, {"id": post_id}, token=maya))["post"]["mentions"]
    assert sorted(m["username"] for m in shown) == ["ines", "theo"]
    await api.gql('mutation { suspendMember(externalUserId: "theo") { status } }', token=admin)
    shown = (await api.gql(query, {"id": post_id}, token=maya))["post"]["mentions"]
    assert shown == [{"username": "ines", "status": "ACTIVE"}]
    await api.gql('mutation { unsuspendMember(externalUserId: "theo") { status } }', token=admin)
    shown = (await api.gql(query, {"id": post_id}, token=maya))["post"]["mentions"]
    assert sorted(m["username"] for m in shown) == ["ines", "theo"]


async def test_creating_a_post_writes_its_event_in_the_same_transaction(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    post_id = await api.post(maya, "hello")
    assert await outbox(pool) == [("PostCreated", post_id)]
    payload = await pool.fetchval("SELECT payload FROM outbox")
    assert payload["postId"] == post_id and set(payload) >= {"authorId", "createdAtMs"}


async def test_an_over_long_post_is_refused_and_writes_nothing(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    too_long = "x" * (api.settings.post_max_length + 1)
    codes = await api.error_codes(
        "mutation($c: String!) { createPost(input: {content: $c}) { id } }", {"c": too_long}, token=maya
    )
    assert codes == ["BAD_USER_INPUT"]
    assert await pool.fetchval("SELECT count(*) FROM posts") == 0
    assert await outbox(pool) == []


async def test_a_nul_byte_in_a_post_is_bad_input(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    codes = await api.error_codes(
        "mutation($c: String!) { createPost(input: {content: $c}) { id } }", {"c": "a\x00b"}, token=maya
    )
    assert codes == ["BAD_USER_INPUT"]
    assert await pool.fetchval("SELECT count(*) FROM posts") == 0


async def test_a_post_with_more_hashtags_than_the_cap_is_refused_and_writes_nothing(
    api: Api, pool: asyncpg.Pool
) -> None:
    maya = await api.member("maya")
    create = "mutation($c: String!) { createPost(input: {content: $c}) { id } }"
    too_many = " ".join(f"#tag{i}" for i in range(MAX_HASHTAGS_PER_POST + 1))
    assert await api.error_codes(create, {"c": too_many}, token=maya) == ["BAD_USER_INPUT"]
    assert await pool.fetchval("SELECT count(*) FROM posts") == 0
    assert await outbox(pool) == []
    within = " ".join(f"#tag{i}" for i in range(MAX_HASHTAGS_PER_POST))
    post_id = await api.post(maya, within)
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM post_tags WHERE post_id = $1 AND source = 'hashtag'", uuid.UUID(post_id)
        )
        == MAX_HASHTAGS_PER_POST
    )


async def test_only_the_author_may_edit_and_an_edit_reparses_tags(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    post_id = await api.post(maya, "#one")
    edit = "mutation($id: ID!, $c: String!) { updatePost(id: $id, content: $c) { content tags updatedAt } }"
    assert await api.error_codes(edit, {"id": post_id, "c": "mine now"}, token=theo) == ["FORBIDDEN"]
    data = await api.gql(edit, {"id": post_id, "c": "#two"}, token=maya)
    assert data["updatePost"]["tags"] == ["two"] and data["updatePost"]["updatedAt"]
    assert [e for e, _ in await outbox(pool)] == ["PostCreated", "PostUpdated"]


async def test_a_deleted_post_is_gone_for_everyone(api: Api) -> None:
    maya = await api.member("maya")
    post_id = await api.post(maya, "oops")
    assert (await api.gql("mutation($id: ID!) { deletePost(id: $id) }", {"id": post_id}, token=maya))["deletePost"]
    assert (await api.gql("query($id: ID!) { post(id: $id) { id } }", {"id": post_id}, token=maya))["post"] is None
    codes = await api.error_codes("mutation($id: ID!) { deletePost(id: $id) }", {"id": post_id}, token=maya)
    assert codes == ["NOT_FOUND"]


async def test_a_repost_shares_the_original_once(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    original = await api.post(maya, "share me")
    repost = "mutation($id: ID!) { repost(postId: $id) { id repostOf { id content } } }"
    first = (await api.gql(repost, {"id": original}, token=theo))["repost"]
    assert first["repostOf"] == {"id": original, "content": "share me"}
    again = (await api.gql(repost, {"id": first["id"]}, token=theo))["repost"]
    assert again["id"] == first["id"]
    payload = await pool.fetchval("SELECT payload FROM outbox WHERE key = $1", first["id"])
    assert payload["repostOf"] == original


async def test_concurrent_shares_of_one_post_make_one_repost(api: Api, pool: asyncpg.Pool) -> None:
    maya, theo = await api.member("maya"), await api.member("theo")
    original = await api.post(maya, "share me")
    shares = await asyncio.gather(
        *(api.raw("mutation($id: ID!) { repost(postId: $id) { id } }", {"id": original}, token=theo) for _ in range(20))
    )
    assert all("errors" not in share for share in shares), shares
    assert len({share["data"]["repost"]["id"] for share in shares}) == 1
    assert await pool.fetchval("SELECT count(*) FROM posts WHERE repost_of = $1", uuid.UUID(original)) == 1


async def test_a_like_comment_or_share_waits_for_a_deletion_under_way_and_finds_the_post_gone(
    api: Api, pool: asyncpg.Pool
) -> None:
    maya, theo = await api.member("maya"), await api.member("theo")
    acts = (
        "mutation($p: ID!) { likePost(postId: $p) { id } }",
        'mutation($p: ID!) { addComment(postId: $p, content: "hi") { id } }',
        "mutation($p: ID!) { repost(postId: $p) { id } }",
    )
    for act in acts:
        post = await api.post(maya, "going")
        async with pool.acquire() as conn:
            deleting = conn.transaction()
            await deleting.start()
            await conn.execute("UPDATE posts SET status = 'deleted' WHERE id = $1", uuid.UUID(post))
            acting = asyncio.create_task(api.error_codes(act, {"p": post}, token=theo))
            await asyncio.sleep(0.3)
            assert not acting.done(), act
            await deleting.commit()
        assert await acting == ["NOT_FOUND"], act
    assert await pool.fetchval("SELECT count(*) FROM likes") == 0
    assert await pool.fetchval("SELECT count(*) FROM comments") == 0
    assert await pool.fetchval("SELECT count(*) FROM posts WHERE repost_of IS NOT NULL") == 0


async def test_a_malformed_id_is_bad_input(api: Api) -> None:
    maya = await api.member("maya")
    for query in ('{ post(id: "not-a-uuid") { id } }', 'mutation { likePost(postId: "x") { id } }'):
        assert await api.error_codes(query, token=maya) == ["BAD_USER_INPUT"]


async def test_likes_and_comments_count_and_write_events(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    post_id = await api.post(maya, "like me")
    like = "mutation($id: ID!) { likePost(postId: $id) { likeCount viewerHasLiked } }"
    assert (await api.gql(like, {"id": post_id}, token=theo))["likePost"] == {"likeCount": 1, "viewerHasLiked": True}
    assert (await api.gql(like, {"id": post_id}, token=theo))["likePost"]["likeCount"] == 1
    await api.gql(
        'mutation($id: ID!) { addComment(postId: $id, content: "nice @maya") { id } }', {"id": post_id}, token=theo
    )
    data = await api.gql(
        "query($id: ID!) { post(id: $id) { commentCount comments { edges { node { content author { username } } } } } }",
        {"id": post_id},
        token=maya,
    )
    assert data["post"]["commentCount"] == 1
    assert data["post"]["comments"]["edges"][0]["node"] == {"content": "nice @maya", "author": {"username": "theo"}}
    unlike = "mutation($id: ID!) { unlikePost(postId: $id) { likeCount viewerHasLiked } }"
    assert (await api.gql(unlike, {"id": post_id}, token=theo))["unlikePost"] == {
        "likeCount": 0,
        "viewerHasLiked": False,
    }
    assert [e for e, _ in await outbox(pool)] == ["PostCreated", "PostLiked", "CommentCreated", "PostUnliked"]


async def test_a_new_posts_event_is_written_by_its_own_statement_with_its_mentions_and_wakes_the_relays(
    api: Api, pool: asyncpg.Pool
) -> None:
    """createPost writes the post, its entities and its PostCreated in one statement (issue 50): the row
    carries the key's first version, the payload names the mentioned members in ID order (the suspended and
    the author left out), and its NOTIFY says `shard:id`, as add_event's does."""
    from feedfabric.core.ids import id_millis
    from feedfabric.db.outbox import NOTIFY_CHANNEL, shard_of

    maya = await api.member("maya")
    for name in ("theo", "ines", "zed"):
        await api.member(name)
    await pool.execute("UPDATE members SET status = 'suspended' WHERE username = 'zed'")
    ids = {r["username"]: str(r["id"]) for r in await pool.fetch("SELECT id, username FROM members")}
    heard: list[str] = []

    def listen(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        heard.append(payload)

    async with pool.acquire() as listener:
        await listener.add_listener(NOTIFY_CHANNEL, listen)
        post_id = await api.post(maya, "hi @theo @ines @zed @maya")
        await listener.execute("SELECT 1")  # the NOTIFY came with the commit, before this answer
        await listener.remove_listener(NOTIFY_CHANNEL, listen)
    row = await pool.fetchrow(
        "SELECT id, key, shard, aggregate_version, payload FROM outbox WHERE event_type = 'PostCreated'"
    )
    assert row["key"] == post_id and row["aggregate_version"] == 1 and row["shard"] == shard_of(post_id)
    assert row["payload"] == {
        "postId": post_id,
        "authorId": ids["maya"],
        "createdAtMs": id_millis(uuid.UUID(post_id)),
        "repostOf": None,
        "mentionedIds": sorted([ids["theo"], ids["ines"]], key=uuid.UUID),
    }
    assert heard == [f"{row['shard']}:{row['id']}"]
