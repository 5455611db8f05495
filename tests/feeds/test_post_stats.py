"""Like and comment counts are kept by triggers (migration 110) and always equal a recount of the rows."""

import asyncio
import uuid

import asyncpg

from tests.support import Api

LIKE = "mutation($p: ID!) { likePost(postId: $p) { id } }"
UNLIKE = "mutation($p: ID!) { unlikePost(postId: $p) { id } }"
COMMENT = "mutation($p: ID!, $c: String!) { addComment(postId: $p, content: $c) { id } }"
COUNTS = "query($p: ID!) { post(id: $p) { likeCount commentCount } }"

# What the reads counted before the counters: every like, and comments by active members.
_DRIFT = """
SELECT p.id, coalesce(s.likes, 0) AS kept_likes, coalesce(s.comments, 0) AS kept_comments,
       (SELECT count(*) FROM likes l WHERE l.post_id = p.id) AS likes,
       (SELECT count(*) FROM comments c JOIN members m ON m.id = c.author_id
         WHERE c.post_id = p.id AND m.status = 'active') AS comments
FROM posts p LEFT JOIN post_stats s ON s.post_id = p.id
"""


async def drift(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    rows = await pool.fetch(_DRIFT)
    return [r for r in rows if (r["kept_likes"], r["kept_comments"]) != (r["likes"], r["comments"])]


async def counts(api: Api, post_id: str, token: str) -> tuple[int, int]:
    post = (await api.gql(COUNTS, {"p": post_id}, token=token))["post"]
    return post["likeCount"], post["commentCount"]


async def member_id(pool: asyncpg.Pool, external_id: str) -> uuid.UUID:
    return await pool.fetchval("SELECT id FROM members WHERE external_id = $1", external_id)  # type: ignore[no-any-return]


async def test_likes_and_unlikes_move_the_like_count(api: Api, pool: asyncpg.Pool) -> None:
    author, ann, bob = await api.member("author"), await api.member("ann"), await api.member("bob")
    post = await api.post(author, "like me")
    await api.gql(LIKE, {"p": post}, token=ann)
    await api.gql(LIKE, {"p": post}, token=bob)
    await api.gql(LIKE, {"p": post}, token=bob)  # liking twice is one like
    assert await counts(api, post, author) == (2, 0)
    await api.gql(UNLIKE, {"p": post}, token=ann)
    assert await counts(api, post, author) == (1, 0)
    assert await drift(pool) == []


async def test_a_suspended_members_comments_leave_the_counts_until_they_return(api: Api, pool: asyncpg.Pool) -> None:
    author, ann, bob = await api.member("author"), await api.member("ann"), await api.member("bob")
    admin = await api.member("admin", admin=True)
    first, second = await api.post(author, "one"), await api.post(author, "two")
    for post in (first, second):
        await api.gql(COMMENT, {"p": post, "c": "from ann"}, token=ann)
    await api.gql(COMMENT, {"p": first, "c": "again from ann"}, token=ann)
    await api.gql(COMMENT, {"p": first, "c": "from bob"}, token=bob)
    assert [await counts(api, p, author) for p in (first, second)] == [(0, 3), (0, 1)]

    await api.gql('mutation { suspendMember(externalUserId: "ann") { status } }', token=admin)
    assert [await counts(api, p, author) for p in (first, second)] == [(0, 1), (0, 0)]
    assert await drift(pool) == []

    await api.gql('mutation { unsuspendMember(externalUserId: "ann") { status } }', token=admin)
    assert [await counts(api, p, author) for p in (first, second)] == [(0, 3), (0, 1)]
    assert await drift(pool) == []


async def test_a_comment_written_while_its_author_is_suspended_counts_once_they_return(
    api: Api, pool: asyncpg.Pool
) -> None:
    author, _ann = await api.member("author"), await api.member("ann")
    post = await api.post(author, "quiet")
    ann = await member_id(pool, "ann")
    await pool.execute("UPDATE members SET status = 'suspended' WHERE id = $1", ann)
    await pool.execute(
        "INSERT INTO comments (id, post_id, author_id, content) VALUES ($1, $2, $3, 'hidden')",
        uuid.uuid4(),
        uuid.UUID(post),
        ann,
    )
    assert await counts(api, post, author) == (0, 0)
    await pool.execute("UPDATE members SET status = 'active' WHERE id = $1", ann)
    assert await counts(api, post, author) == (0, 1)
    assert await drift(pool) == []


async def test_counts_stay_exact_while_comments_race_status_changes(api: Api, pool: asyncpg.Pool) -> None:
    """Comments commit while their authors are suspended and reinstated: neither side's view of the
    other may be lost (the comment trigger share-locks its author), and two members changing at once
    lock the posts they share in the same order (no deadlock)."""
    author = await api.member("author")
    posts = [uuid.UUID(await api.post(author, f"post {i}")) for i in range(4)]
    for name in ("ann", "bob"):
        await api.member(name)
    ann, bob = await member_id(pool, "ann"), await member_id(pool, "bob")

    async def comment(member: uuid.UUID, n: int) -> None:
        for i in range(n):
            await pool.execute(
                "INSERT INTO comments (id, post_id, author_id, content) VALUES ($1, $2, $3, 'x')",
                uuid.uuid4(),
                posts[i % len(posts)],
                member,
            )

    async def toggle(member: uuid.UUID, n: int) -> None:
        for i in range(n):
            status = "suspended" if i % 2 == 0 else "active"
            await pool.execute("UPDATE members SET status = $2 WHERE id = $1", member, status)

    await asyncio.gather(comment(ann, 60), comment(ann, 60), comment(bob, 60), toggle(ann, 15), toggle(bob, 15))
    assert await drift(pool) == []
