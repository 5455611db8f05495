"""Blocks, mutes and muted words: the writes, their errors, and what they change on the next read."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.db.pool import transaction
from feedfabric.feeds import timelines

from tests.pipeline_support import eventually
from tests.support import HOME, Api

BLOCK = "mutation($e: String!) { block(externalUserId: $e) { id username viewerBlocks viewerMutes } }"
UNBLOCK = "mutation($e: String!) { unblock(externalUserId: $e) { id viewerBlocks } }"
MUTE = """mutation($e: String!, $n: Boolean, $x: Int) {
  mute(externalUserId: $e, notifications: $n, expiresInSeconds: $x) { id viewerMutes }
}"""
UNMUTE = "mutation($e: String!) { unmute(externalUserId: $e) { id viewerMutes } }"
WORD = """mutation($p: String!, $w: Boolean, $c: [FilterContext!], $x: Int) {
  addMutedWord(phrase: $p, wholeWord: $w, contexts: $c, expiresInSeconds: $x) { id phrase wholeWord contexts expiresAt }
}"""


async def home_ids(api: Api, token: str, first: int = 50) -> list[str]:
    data = await api.gql(HOME, {"first": first}, token=token)
    return [e["node"]["id"] for e in data["homeFeed"]["edges"]]


async def test_block_hides_both_ways_ends_follows_and_is_private(api: Api, pool: asyncpg.Pool) -> None:
    alice, bob = await api.member("alice"), await api.member("bob")
    await api.follow(alice, "bob")
    await api.follow(bob, "alice")
    await api.gql('mutation { addFavourite(externalUserId: "bob") { id } }', token=alice)
    from_bob, from_alice = await api.post(bob, "bob says"), await api.post(alice, "alice says")
    assert from_bob in await home_ids(api, alice)

    blocked = (await api.gql(BLOCK, {"e": "bob"}, token=alice))["block"]
    assert blocked["username"] == "bob" and blocked["viewerBlocks"] is True
    assert from_bob not in await home_ids(api, alice)
    assert from_alice not in await home_ids(api, bob)
    q = "query($id: ID!) { post(id: $id) { id } }"
    assert (await api.gql(q, {"id": from_bob}, token=alice))["post"] is None
    assert (await api.gql(q, {"id": from_alice}, token=bob))["post"] is None
    # follows and favourites ended both ways
    assert await pool.fetchval("SELECT count(*) FROM follows WHERE target_type = 'member'") == 0
    assert await pool.fetchval("SELECT count(*) FROM favourites") == 0
    # member(...) still answers; bob cannot learn who blocked whom from viewerBlocks
    seen = await api.gql('{ member(username: "alice") { username viewerBlocks } }', token=bob)
    assert seen["member"] == {"username": "alice", "viewerBlocks": False}
    listed = await api.gql("{ blockedMembers { edges { node { username } } } }", token=bob)
    assert listed["blockedMembers"]["edges"] == []
    listed = await api.gql("{ blockedMembers { edges { node { username } } } }", token=alice)
    assert [e["node"]["username"] for e in listed["blockedMembers"]["edges"]] == ["bob"]
    # an event for every API instance's live filters
    events = await pool.fetch("SELECT event_type, key FROM outbox WHERE event_type = 'MemberBlocked'")
    assert len(events) == 1

    await api.gql(UNBLOCK, {"e": "bob"}, token=alice)
    assert from_bob not in await home_ids(api, alice)  # restores no follow
    assert (await api.gql(q, {"id": from_bob}, token=alice))["post"] == {"id": from_bob}
    await api.follow(alice, "bob")
    assert from_bob in await home_ids(api, alice)


async def test_every_interaction_between_a_blocked_pair_is_blocked(api: Api) -> None:
    alice, bob = await api.member("alice"), await api.member("bob")
    post = await api.post(bob, "hello")
    own = await api.post(alice, "mine")
    await api.gql(BLOCK, {"e": "bob"}, token=alice)
    attempts = [
        (alice, 'mutation { follow(externalUserId: "bob") { id } }', {}),
        (bob, 'mutation { follow(externalUserId: "alice") { id } }', {}),
        (alice, 'mutation { addFavourite(externalUserId: "bob") { id } }', {}),
        (bob, 'mutation { addFavourite(externalUserId: "alice") { id } }', {}),
        (alice, "mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": post}),
        (bob, "mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": own}),
        (alice, 'mutation($p: ID!) { addComment(postId: $p, content: "x") { id } }', {"p": post}),
        (bob, 'mutation($p: ID!) { addComment(postId: $p, content: "x") { id } }', {"p": own}),
        (alice, "mutation($p: ID!) { repost(postId: $p) { id } }", {"p": post}),
        (bob, "mutation($p: ID!) { repost(postId: $p) { id } }", {"p": own}),
    ]
    for token, query, variables in attempts:
        assert await api.error_codes(query, variables, token=token) == ["BLOCKED"], query
    response = await api.rest("PUT", "/follows/alice", token=bob)
    assert response.status_code == 403 and response.json()["error"]["code"] == "member.blocked"


async def test_bad_input(api: Api) -> None:
    alice = await api.member("alice")
    await api.member("bob")
    assert await api.error_codes(BLOCK, {"e": "alice"}, token=alice) == ["BAD_USER_INPUT"]
    assert await api.error_codes(MUTE, {"e": "alice"}, token=alice) == ["BAD_USER_INPUT"]
    assert await api.error_codes(BLOCK, {"e": "nobody"}, token=alice) == ["NOT_FOUND"]
    assert await api.error_codes(MUTE, {"e": "nobody"}, token=alice) == ["NOT_FOUND"]
    assert await api.error_codes(MUTE, {"e": "bob", "x": 0}, token=alice) == ["BAD_USER_INPUT"]
    assert await api.error_codes(WORD, {"p": "   "}, token=alice) == ["BAD_USER_INPUT"]
    assert await api.error_codes(WORD, {"p": "x" * 101}, token=alice) == ["BAD_USER_INPUT"]
    assert await api.error_codes(WORD, {"p": "ok", "x": -5}, token=alice) == ["BAD_USER_INPUT"]
    assert await api.error_codes(BLOCK, {"e": "bob"}) == ["UNAUTHENTICATED"]
    assert await api.error_codes('mutation { removeMutedWord(id: "nope") }', token=alice) == ["BAD_USER_INPUT"]
    response = await api.rest("PUT", "/blocks/alice", token=alice)
    assert response.status_code == 400
    response = await api.rest("PUT", "/mutes/bob", token=alice, content=b'{"expiresInSeconds": "soon"}')
    assert response.status_code == 400
    # nothing was written by any of it
    assert (await api.gql("{ mutedWords { id } blockedMembers { edges { cursor } } }", token=alice)) == {
        "mutedWords": [],
        "blockedMembers": {"edges": []},
    }


async def test_muted_words_cap_is_limit_reached(api: Api, pool: asyncpg.Pool) -> None:
    alice = await api.member("alice")
    member_id = await pool.fetchval("SELECT id FROM members WHERE username = 'alice'")
    await pool.execute(
        """INSERT INTO muted_words (id, member_id, phrase)
           SELECT gen_random_uuid(), $1, 'w' || g FROM generate_series(1, 999) g""",
        member_id,
    )
    await api.gql(WORD, {"p": "the thousandth"}, token=alice)
    assert await api.error_codes(WORD, {"p": "one too many"}, token=alice) == ["LIMIT_REACHED"]
    # an expired word does not hold a place
    await pool.execute("UPDATE muted_words SET expires_at = now() - interval '1 second' WHERE phrase = 'w1'")
    await api.gql(WORD, {"p": "in its place"}, token=alice)


async def test_mute_hides_feeds_not_the_post_and_ends_by_itself(api: Api, pool: asyncpg.Pool) -> None:
    alice, bob, carol = await api.member("alice"), await api.member("bob"), await api.member("carol")
    await api.follow(alice, "bob")
    await api.follow(alice, "carol")
    post = await api.post(bob, "bob here #topic")
    repost = (await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": post}, token=carol))["repost"][
        "id"
    ]
    shown = await home_ids(api, alice)
    assert post in shown and repost in shown
    muted = await api.gql(MUTE, {"e": "bob", "x": 3600}, token=alice)
    assert muted["mute"]["viewerMutes"] is True
    shown = await home_ids(api, alice)
    assert post not in shown and repost not in shown
    tag = await api.gql('{ tagFeed(tag: "topic") { edges { node { id } } } }', token=alice)
    assert tag["tagFeed"]["edges"] == []
    # a mute keeps bob out of the feeds; it does not hide him
    assert (await api.gql("query($id: ID!) { post(id: $id) { id } }", {"id": post}, token=alice))["post"]
    # bob may still interact
    await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": repost}, token=bob)
    # the expiry passes (moved into the past, as time would)
    await pool.execute("UPDATE mutes SET expires_at = now() - interval '1 second'")
    await pool.execute("UPDATE members SET relations_version = relations_version + 1 WHERE username = 'alice'")
    shown = await home_ids(api, alice)
    assert post in shown and repost in shown
    listed = await api.gql("{ mutedMembers { edges { node { username viewerMutes } } } }", token=alice)
    assert listed["mutedMembers"]["edges"] == []


async def test_an_expiry_ends_the_mute_without_a_write(api: Api) -> None:
    alice, bob = await api.member("alice"), await api.member("bob")
    await api.follow(alice, "bob")
    post = await api.post(bob, "soon back")
    await api.gql(MUTE, {"e": "bob", "x": 1}, token=alice)
    assert post not in await home_ids(api, alice)

    async def back() -> bool:
        return post in await home_ids(api, alice)

    await eventually(back)
    who = await api.gql('{ member(username: "bob") { viewerMutes } }', token=alice)
    assert who["member"]["viewerMutes"] is False


@pytest.mark.parametrize(
    ("phrase", "whole", "content", "hidden"),
    [
        ("spoiler", True, "big #spoiler inside", True),
        ("spoiler", True, "no SPOILERS here", False),
        ("spoiler", False, "no SPOILERS here", True),
        ("Straße", True, "die STRASSE ist lang", True),
        ("new york", True, "off to #NewYork", True),
        ("ｃａｔ", True, "a cat!", True),
        ("cat", True, "concatenate", False),
        ("café", True, "un CAFÉ noir", True),
    ],
)
async def test_muted_word_matching(api: Api, phrase: str, whole: bool, content: str, hidden: bool) -> None:
    alice, bob = await api.member("alice"), await api.member("bob")
    await api.follow(alice, "bob")
    post = await api.post(bob, content)
    control = await api.post(bob, "nothing to see")
    await api.gql(WORD, {"p": phrase, "w": whole}, token=alice)
    shown = await home_ids(api, alice)
    assert control in shown
    assert (post not in shown) is hidden


async def test_muted_word_contexts_own_posts_reposts_and_removal(api: Api) -> None:
    alice, bob, carol = await api.member("alice"), await api.member("bob"), await api.member("carol")
    await api.follow(alice, "bob")
    await api.follow(alice, "carol")
    original = await api.post(carol, "plot twist #tv")
    repost = (await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": original}, token=bob))["repost"][
        "id"
    ]
    mine = await api.post(alice, "my own plot twist #tv")
    word = (await api.gql(WORD, {"p": "plot twist", "c": ["TAGS"]}, token=alice))["addMutedWord"]
    assert word["contexts"] == ["TAGS"] and word["wholeWord"] is True
    home = await home_ids(api, alice)
    assert original in home and repost in home  # not muted in HOME
    tag = await api.gql('{ tagFeed(tag: "tv") { edges { node { id } } } }', token=alice)
    assert [e["node"]["id"] for e in tag["tagFeed"]["edges"]] == [mine]  # own posts never hidden
    await api.gql("mutation($id: ID!) { removeMutedWord(id: $id) }", {"id": word["id"]}, token=alice)
    await api.gql(WORD, {"p": "plot twist"}, token=alice)  # all contexts
    home = await home_ids(api, alice)
    assert original not in home and repost not in home and mine in home
    words = await api.gql("{ mutedWords { phrase contexts } }", token=alice)
    assert words["mutedWords"][0]["phrase"] == "plot twist" and len(words["mutedWords"][0]["contexts"]) == 7


async def test_a_page_stays_full_when_words_hide_most_of_it(api: Api) -> None:
    alice, bob = await api.member("alice"), await api.member("bob")
    await api.follow(alice, "bob")
    posts = []
    for n in range(30):
        posts.append(await api.post(bob, f"post {n} {'secret' if n % 5 else 'open'}"))
    await api.gql(WORD, {"p": "secret"}, token=alice)
    shown_first = await api.gql(HOME, {"first": 3}, token=alice)
    first = [e["node"]["id"] for e in shown_first["homeFeed"]["edges"]]
    open_posts = [p for n, p in enumerate(posts) if n % 5 == 0][::-1]
    assert first == open_posts[:3]
    after = shown_first["homeFeed"]["pageInfo"]["endCursor"]
    rest = await api.gql(HOME, {"first": 10, "after": after}, token=alice)
    assert [e["node"]["id"] for e in rest["homeFeed"]["edges"]] == open_posts[3:]
    assert rest["homeFeed"]["pageInfo"]["hasNextPage"] is False


async def test_two_instances_applying_one_block_at_once_agree(api: Api, pool: asyncpg.Pool) -> None:
    alice = await api.member("alice")
    await api.member("bob")
    await api.follow(alice, "bob")
    results = await asyncio.gather(*(api.raw(BLOCK, {"e": "bob"}, token=alice) for _ in range(6)))
    assert all("errors" not in r for r in results)
    assert await pool.fetchval("SELECT count(*) FROM blocks") == 1
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE event_type = 'MemberBlocked'") == 1
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE event_type = 'MemberUnfollowed'") == 1


async def test_a_follow_racing_a_block_never_outlives_it(api: Api, pool: asyncpg.Pool) -> None:
    alice, bob = await api.member("alice"), await api.member("bob")
    for _ in range(5):
        outcome = await asyncio.gather(
            api.raw('mutation { follow(externalUserId: "alice") { id } }', token=bob),
            api.raw(BLOCK, {"e": "bob"}, token=alice),
        )
        assert "errors" not in outcome[1]
        assert await pool.fetchval("SELECT count(*) FROM follows") == 0
        await api.gql(UNBLOCK, {"e": "bob"}, token=alice)


async def test_rest_blocks_and_mutes(api: Api) -> None:
    alice = await api.member("alice")
    await api.member("bob")
    await api.member("carol")
    assert (await api.rest("PUT", "/blocks/bob", token=alice)).json()["blocked"] is True
    assert (await api.rest("PUT", "/blocks/carol", token=alice)).status_code == 200
    page = (await api.rest("GET", "/blocks?limit=1", token=alice)).json()
    assert [m["username"] for m in page["members"]] == ["carol"] and page["nextCursor"]
    page = (await api.rest("GET", f"/blocks?limit=1&cursor={page['nextCursor']}", token=alice)).json()
    assert [m["username"] for m in page["members"]] == ["bob"] and page["nextCursor"] is None
    assert (await api.rest("DELETE", "/blocks/bob", token=alice)).json()["blocked"] is False
    body = b'{"notifications": false, "expiresInSeconds": 3600}'
    assert (await api.rest("PUT", "/mutes/bob", token=alice, content=body)).json()["muted"] is True
    assert (await api.rest("PUT", "/mutes/carol", token=alice)).status_code == 200
    page = (await api.rest("GET", "/mutes", token=alice)).json()
    assert [m["username"] for m in page["members"]] == ["carol", "bob"]
    assert (await api.rest("DELETE", "/mutes/carol", token=alice)).json()["muted"] is False
    page = (await api.rest("GET", "/mutes", token=alice)).json()
    assert [m["username"] for m in page["members"]] == ["bob"]


async def test_a_block_racing_a_fan_out_in_flight_hides_what_it_pushes(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis
) -> None:
    """A fan-out batch that read the followers before the block commits pushes after it: the entry lands
    in the timeline and stays there (nothing purges), and every read leaves it out."""
    alice, bob = await api.member("alice"), await api.member("bob")
    await api.follow(alice, "bob")
    first = await api.post(bob, "before")
    rows = await pool.fetch("SELECT payload FROM outbox WHERE event_type = 'PostCreated' ORDER BY id")
    async with transaction(pool) as conn:
        await timelines.fan_out(conn, redis, api.settings, uuid.UUID(rows[0]["payload"]["postId"]))
    alice_id = str(await pool.fetchval("SELECT id FROM members WHERE username = 'alice'"))
    assert first in await timelines.timeline_ids(redis, alice_id)
    late = await api.post(bob, "in flight")
    await api.gql(BLOCK, {"e": "bob"}, token=alice)
    await timelines.push(redis, [alice_id], uuid.UUID(late), api.settings.feed_max_length)
    assert late in await timelines.timeline_ids(redis, alice_id)
    page = await api.gql(HOME, {"first": 50}, token=alice)
    assert page["homeFeed"]["source"] == "REDIS"
    assert {e["node"]["id"] for e in page["homeFeed"]["edges"]}.isdisjoint({first, late})


async def test_a_mute_made_while_pages_are_read_holds_from_the_next_page(api: Api) -> None:
    """A page reads the relations once, with the viewer: one in flight when the mute commits may show the
    muted author; every page read after the mutation answered leaves them out, on any instance."""
    alice, bob, carol = await api.member("alice"), await api.member("bob"), await api.member("carol")
    await api.follow(alice, "bob")
    await api.follow(alice, "carol")
    for n in range(6):
        await api.post(bob, f"bob {n}")
        await api.post(carol, f"carol {n}")
    first = await api.gql(HOME, {"first": 4}, token=alice)
    after = first["homeFeed"]["pageInfo"]["endCursor"]
    await api.gql(MUTE, {"e": "bob"}, token=alice)
    rest = await api.gql(HOME, {"first": 50, "after": after}, token=alice)
    authors = {e["node"]["author"]["username"] for e in rest["homeFeed"]["edges"]}
    assert authors == {"carol"}
    # nothing is skipped: every carol post older than the cursor is there
    shown = [e["node"]["id"] for e in first["homeFeed"]["edges"] + rest["homeFeed"]["edges"]]
    assert len(set(shown)) == len(shown)


async def test_a_blocked_commenter_leaves_the_comments_not_the_count(api: Api) -> None:
    alice, bob, carol = await api.member("alice"), await api.member("bob"), await api.member("carol")
    post = await api.post(carol, "talk to me")
    add = "mutation($p: ID!, $c: String!) { addComment(postId: $p, content: $c) { id } }"
    from_bob = (await api.gql(add, {"p": post, "c": "from bob"}, token=bob))["addComment"]["id"]
    from_carol = (await api.gql(add, {"p": post, "c": "from carol"}, token=carol))["addComment"]["id"]
    await api.gql(BLOCK, {"e": "bob"}, token=alice)
    query = "query($id: ID!) { post(id: $id) { commentCount comments { edges { node { id } } } } }"
    seen = (await api.gql(query, {"id": post}, token=alice))["post"]
    assert [e["node"]["id"] for e in seen["comments"]["edges"]] == [from_carol]
    assert seen["commentCount"] == 2  # as stored: the count says nothing of who blocked whom
    seen = (await api.gql(query, {"id": post}, token=carol))["post"]
    assert [e["node"]["id"] for e in seen["comments"]["edges"]] == [from_bob, from_carol]
