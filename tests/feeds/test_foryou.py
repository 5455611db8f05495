"""For You: the profile, each candidate source, the presets' orders, and chains of pages."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np
import pytest
import redis.asyncio as aioredis
from feedfabric.core.settings import Settings
from feedfabric.db.foryou import Profile
from feedfabric.feeds import ranking
from feedfabric.feeds.foryou import CURSOR_CHARS, MAX_CHAINS, Chain, Place, chains_key, cursor_key
from feedfabric.feeds.maintenance import STEPS, maintain

from tests.support import Api, make_api

FOR_YOU = """query($first: Int, $after: String) {
  forYouFeed(first: $first, after: $after) {
    edges { cursor reason score node { id author { username } } }
    pageInfo { hasNextPage endCursor } preset rankedAt
  }
}"""
PROFILE = """mutation($i: FeedProfileInput!) { updateFeedProfile(input: $i) { preset sources lookbackHours } }"""


async def _page(api: Api, token: str, first: int = 20, after: str | None = None) -> dict[str, Any]:
    return (await api.gql(FOR_YOU, {"first": first, "after": after}, token=token))["forYouFeed"]


async def _all(api: Api, token: str, first: int) -> list[dict[str, Any]]:
    edges, after = [], None
    while True:
        page = await _page(api, token, first, after)
        edges += page["edges"]
        after = page["pageInfo"]["endCursor"]
        if not page["pageInfo"]["hasNextPage"]:
            return edges
    return edges


async def _profile(api: Api, token: str, **values: Any) -> dict[str, Any]:
    return (await api.gql(PROFILE, {"i": values}, token=token))["updateFeedProfile"]


async def _favourite(api: Api, token: str, external_id: str) -> None:
    await api.gql("mutation($e: String!) { addFavourite(externalUserId: $e) { id } }", {"e": external_id}, token=token)


async def _like(api: Api, token: str, post_id: str) -> None:
    await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": post_id}, token=token)


async def test_the_profile_defaults_to_balanced_all_sources_48_hours(api: Api) -> None:
    reader = await api.member("reader")
    data = await api.gql("{ feedProfile { preset sources lookbackHours } }", token=reader)
    assert data["feedProfile"] == {
        "preset": "BALANCED",
        "sources": ["FAVOURITES", "FOLLOWING", "TAGS", "SIMILAR", "POPULAR"],
        "lookbackHours": 48,
    }
    assert (await api.gql("{ feedProfile { preset } }"))["feedProfile"] is None


async def test_the_profile_keeps_what_is_changed_and_refuses_values_outside_the_contract(api: Api) -> None:
    reader = await api.member("reader")
    assert await _profile(api, reader, preset="DISCOVER", lookbackHours=720) == {
        "preset": "DISCOVER",
        "sources": ["FAVOURITES", "FOLLOWING", "TAGS", "SIMILAR", "POPULAR"],
        "lookbackHours": 720,
    }
    assert (await _profile(api, reader, sources=["POPULAR", "TAGS"]))["sources"] == ["TAGS", "POPULAR"]
    for bad in ({"lookbackHours": 0}, {"lookbackHours": 721}, {"sources": ["TAGS", "TAGS"]}):
        assert await api.error_codes(PROFILE, {"i": bad}, token=reader) == ["BAD_USER_INPUT"]
    response = await api.rest("PUT", "/feed-profile", token=reader, json={"preset": "sideways"})
    assert response.status_code == 400
    response = await api.rest("PUT", "/feed-profile", token=reader, json={"preset": "close_circle"})
    assert response.json()["profile"] == {
        "preset": "CLOSE_CIRCLE",
        "sources": ["TAGS", "POPULAR"],
        "lookbackHours": 720,
    }
    assert (await api.rest("GET", "/feed-profile", token=reader)).json()["profile"]["preset"] == "CLOSE_CIRCLE"


async def test_following_alone_serves_followed_members_posts_but_not_the_readers_own(api: Api) -> None:
    reader = await api.member("reader")
    followed = await api.member("followed")
    stranger = await api.member("stranger")
    await api.follow(reader, "followed")
    mine = await api.post(reader, "my own")
    theirs = await api.post(followed, "followed post")
    await api.post(stranger, "stranger post")
    await _profile(api, reader, sources=["FOLLOWING"])
    edges = (await _page(api, reader))["edges"]
    assert [(e["node"]["id"], e["reason"]) for e in edges] == [(theirs, "FOLLOWING")]
    assert mine not in {e["node"]["id"] for e in edges}


async def test_a_repost_and_what_it_shares_are_one_candidate(api: Api) -> None:
    reader = await api.member("reader")
    author = await api.member("author")
    sharer = await api.member("sharer")
    await api.follow(reader, "author")
    await api.follow(reader, "sharer")
    original = await api.post(author, "worth sharing")
    await api.gql("mutation($p: ID!) { repost(postId: $p) { id } }", {"p": original}, token=sharer)
    await _profile(api, reader, sources=["FOLLOWING"])
    assert [e["node"]["id"] for e in (await _page(api, reader))["edges"]] == [original]


async def test_tags_alone_serves_posts_with_a_followed_tag(api: Api) -> None:
    reader = await api.member("reader")
    author = await api.member("author")
    await api.gql('mutation { followTag(tag: "trail") }', token=reader)
    tagged = await api.post(author, "up the hill #trail")
    await api.post(author, "nothing tagged")
    await _profile(api, reader, sources=["TAGS"])
    edges = (await _page(api, reader))["edges"]
    assert [(e["node"]["id"], e["reason"]) for e in edges] == [(tagged, "TAGS")]


async def test_popular_alone_serves_the_engaged_posts_of_the_window(api: Api) -> None:
    reader = await api.member("reader")
    author = await api.member("author")
    fan = await api.member("fan")
    liked = await api.post(author, "liked a lot")
    await api.post(author, "nobody cares")
    await _like(api, fan, liked)
    await _profile(api, reader, sources=["POPULAR"])
    edges = (await _page(api, reader))["edges"]
    assert [(e["node"]["id"], e["reason"]) for e in edges] == [(liked, "POPULAR")]


async def test_similar_alone_serves_neighbours_of_what_the_reader_liked(api: Api, pool: asyncpg.Pool) -> None:
    reader = await api.member("reader")
    author = await api.member("author")
    liked = await api.post(author, "liked one")
    near = await api.post(author, "near it")
    far = await api.post(author, "far from it")
    await _like(api, reader, liked)
    vectors = {liked: [1.0, 0.0], near: [0.9, 0.1], far: [-1.0, 0.0]}
    for post_id, head in vectors.items():
        vector = [0.0] * 384
        vector[:2] = head
        raw = np.asarray(vector, dtype="<f4")
        raw /= np.linalg.norm(raw)
        await pool.execute(
            "INSERT INTO post_embeddings (post_id, vector) VALUES ($1, $2)", uuid.UUID(post_id), raw.tobytes()
        )
    await _profile(api, reader, sources=["SIMILAR"])
    edges = (await _page(api, reader))["edges"]
    assert [(e["node"]["id"], e["reason"]) for e in edges][0] == (near, "SIMILAR")
    assert far not in {e["node"]["id"] for e in edges}


async def test_favourites_are_candidates_even_when_their_source_is_left_out(api: Api) -> None:
    reader = await api.member("reader")
    fav = await api.member("fav")
    await api.member("other")
    await _favourite(api, reader, "fav")
    post = await api.post(fav, "from a favourite")
    await _profile(api, reader, sources=["TAGS"])
    edges = (await _page(api, reader))["edges"]
    assert [(e["node"]["id"], e["reason"]) for e in edges] == [(post, "FAVOURITES")]


async def test_presets_order_a_hand_built_case_each_their_own_way(api: Api, pool: asyncpg.Pool) -> None:
    """An older post by a favourite the reader likes, a newer one by a stranger with many likes, the
    newest by a followed member: recency alone puts the newest first and ignores the favourite;
    CLOSE_CIRCLE puts the favourite first; DISCOVER the stranger's popular post."""
    reader = await api.member("reader")
    fav = await api.member("fav")
    stranger = await api.member("stranger")
    friend = await api.member("friend")
    await _favourite(api, reader, "fav")
    await api.follow(reader, "friend")
    await api.follow(reader, "fav")
    fav_post = await api.post(fav, "by the favourite")
    popular = await api.post(stranger, "popular with strangers")
    newest = await api.post(friend, "the newest")
    fans = [await api.member(f"fan{i}") for i in range(4)]
    for fan in fans:
        await _like(api, fan, popular)
    fav_id = await pool.fetchval("SELECT id FROM members WHERE external_id = 'fav'")
    reader_id = await pool.fetchval("SELECT id FROM members WHERE external_id = 'reader'")
    await pool.execute("INSERT INTO author_affinity VALUES ($1, $2, 5)", reader_id, fav_id)
    # Ages an hour apart, so recency tells them apart clearly.
    for hours, post_id in ((3, fav_post), (2, popular), (1, newest)):
        await pool.execute(
            "UPDATE posts SET created_at = now() - make_interval(hours => $2) WHERE id = $1", uuid.UUID(post_id), hours
        )
    orders = {}
    for preset in ("NEWEST_FIRST", "BALANCED", "CLOSE_CIRCLE", "DISCOVER", "LEARNED"):
        await _profile(api, reader, preset=preset)
        page = await _page(api, reader)
        assert page["preset"] == preset
        orders[preset] = [e["node"]["id"] for e in page["edges"]]
        scores = [e["score"] for e in page["edges"]]
        assert scores == sorted(scores, reverse=True)
    assert orders["NEWEST_FIRST"] == [newest, popular, fav_post]
    assert orders["CLOSE_CIRCLE"][0] == fav_post
    assert orders["DISCOVER"][0] == popular
    assert orders["BALANCED"][0] == fav_post
    assert orders["LEARNED"] == orders["BALANCED"]  # no model trained: BALANCED


def test_no_author_holds_more_than_two_of_any_five_consecutive_positions() -> None:
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    authors = [a, a, a, a, b, a, c, b, a]
    placed = ranking.spread(range(len(authors)), authors)
    placed_authors = [authors[i] for i in placed]
    for start in range(len(placed_authors) - 4):
        window = placed_authors[start : start + 5]
        assert max(window.count(x) for x in set(window)) <= 2
    assert placed[:3] == [0, 1, 4]  # the best that fits each position
    assert len(placed) == len(set(placed))


async def _world(api: Api, posts: int) -> tuple[str, list[str]]:
    reader = await api.member("reader")
    authors = [await api.member(f"author{i}") for i in range(5)]
    for i in range(5):
        await api.follow(reader, f"author{i}")
    ids = [await api.post(authors[i % 5], f"post {i}") for i in range(posts)]
    return reader, ids


async def test_pages_neither_repeat_nor_skip_while_posts_arrive(api: Api) -> None:
    reader, ids = await _world(api, 23)
    first = await _page(api, reader, 10)
    seen = [e["node"]["id"] for e in first["edges"]]
    arrived = [await api.post(api.token("author0"), f"arrived {i}") for i in range(5)]
    after = first["pageInfo"]["endCursor"]
    while after:
        page = await _page(api, reader, 10, after)
        assert page["rankedAt"] == first["rankedAt"]
        seen += [e["node"]["id"] for e in page["edges"]]
        after = page["pageInfo"]["endCursor"] if page["pageInfo"]["hasNextPage"] else None
    assert len(seen) == len(set(seen)) == 23
    assert set(seen) == set(ids)
    assert not set(arrived) & set(seen)


@pytest.fixture
async def api_without_redis(settings: Settings) -> AsyncIterator[Api]:
    """Another API instance on the same database whose Redis is down (nothing listens there)."""
    async with make_api(settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})) as client:
        yield client


async def test_redis_gone_between_pages_the_chain_goes_on_in_the_same_order(
    api: Api, api_without_redis: Api, redis: aioredis.Redis
) -> None:
    reader, _ = await _world(api, 25)
    expected = [e["node"]["id"] for e in await _all(api, reader, 25)]
    first = await _page(api, reader, 10)
    assert [e["node"]["id"] for e in first["edges"]] == expected[:10]
    second = await _page(api_without_redis, reader, 10, first["pageInfo"]["endCursor"])
    await redis.flushdb()
    third = await _page(api, reader, 10, second["pageInfo"]["endCursor"])
    served = [e["node"]["id"] for e in first["edges"] + second["edges"] + third["edges"]]
    assert served == expected
    assert not third["pageInfo"]["hasNextPage"]
    assert first["rankedAt"] == second["rankedAt"] == third["rankedAt"]


async def test_a_rebuilt_page_leaves_out_what_the_chain_served_even_when_a_served_post_went_since(
    api: Api, api_without_redis: Api
) -> None:
    """Counting an offset into the rebuilt list would skip one post here: the held post is not in it."""
    reader, _ = await _world(api, 25)
    admin = await api.member("admin", admin=True)
    expected = [e["node"]["id"] for e in await _all(api, reader, 25)]
    first = await _page(api, reader, 10)
    assert [e["node"]["id"] for e in first["edges"]] == expected[:10]
    await api.gql("mutation($p: ID!) { holdPost(id: $p) { id } }", {"p": expected[3]}, token=admin)
    second = await _page(api_without_redis, reader, 10, first["pageInfo"]["endCursor"])
    assert [e["node"]["id"] for e in second["edges"]] == expected[10:20]
    third = await _page(api_without_redis, reader, 10, second["edges"][4]["cursor"])
    assert [e["node"]["id"] for e in third["edges"]] == expected[15:25]
    assert not third["pageInfo"]["hasNextPage"]


async def test_posts_held_deleted_or_whose_author_was_suspended_are_never_served(api: Api) -> None:
    reader, ids = await _world(api, 15)
    admin = await api.member("admin", admin=True)
    first = await _page(api, reader, 5)
    rest = [e for e in await _all(api, reader, 15) if e["node"]["id"] not in {x["node"]["id"] for x in first["edges"]}]
    held, deleted = rest[0]["node"]["id"], rest[1]["node"]["id"]
    suspended = rest[2]["node"]["author"]["username"]
    await api.gql("mutation($p: ID!) { holdPost(id: $p) { id } }", {"p": held}, token=admin)
    await api.gql("mutation($p: ID!) { deletePost(id: $p) }", {"p": deleted}, token=admin)
    await api.gql("mutation($e: String!) { suspendMember(externalUserId: $e) { id } }", {"e": suspended}, token=admin)
    later, after = [], first["pageInfo"]["endCursor"]
    while after:
        page = await _page(api, reader, 5, after)
        later += page["edges"]
        after = page["pageInfo"]["endCursor"] if page["pageInfo"]["hasNextPage"] else None
    served = {e["node"]["id"] for e in later}
    assert held not in served and deleted not in served
    assert suspended not in {e["node"]["author"]["username"] for e in later}
    fresh = {e["node"]["id"] for e in await _all(api, reader, 20)}
    assert {held, deleted}.isdisjoint(fresh)


async def test_bad_cursors_are_bad_user_input(api: Api) -> None:
    reader = await api.member("reader")
    for cursor in ("nonsense", "AAAA", "x" * 500, str(uuid.uuid4())):
        assert await api.error_codes(FOR_YOU, {"first": 5, "after": cursor}, token=reader) == ["BAD_USER_INPUT"]
    response = await api.rest("GET", "/userfeed/foryou?cursor=nonsense", token=reader)
    assert response.status_code == 400


@pytest.mark.parametrize("ranked_at", [datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 30, tzinfo=UTC)])
async def test_a_cursor_ranked_at_an_impossible_time_is_bad_user_input(
    api: Api, pool: asyncpg.Pool, ranked_at: datetime
) -> None:
    """A well-formed cursor whose rankedAt no ranking had, signed as the app signs: the rebuild's
    arithmetic on it must not overflow into a 500."""
    reader = await api.member("reader")
    reader_id = await pool.fetchval("SELECT id FROM members WHERE external_id = 'reader'")
    chain = Chain(uuid.uuid4(), ranked_at, Profile("balanced", ranking.SOURCES, 48), 0)
    cursor = chain.cursor(cursor_key(api.settings), reader_id, Place(uuid.uuid4(), 3, 5))
    assert await api.error_codes(FOR_YOU, {"first": 5, "after": cursor}, token=reader) == ["BAD_USER_INPUT"]
    response = await api.rest("GET", "/userfeed/foryou", token=reader, params={"cursor": cursor})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "request.invalid"


async def test_a_for_you_page_is_logged_with_its_preset_and_each_posts_source(api: Api, pool: asyncpg.Pool) -> None:
    reader = await api.member("reader")
    fav = await api.member("fav")
    friend = await api.member("friend")
    await _favourite(api, reader, "fav")
    await api.follow(reader, "friend")
    fav_post = await api.post(fav, "favourite's")
    friend_post = await api.post(friend, "friend's")
    await _profile(api, reader, preset="NEWEST_FIRST")
    response = await api.rest("GET", "/userfeed/foryou?limit=5", token=reader)
    body = response.json()
    assert [(p["id"], p["reason"]) for p in body["posts"]] == [(friend_post, "FOLLOWING"), (fav_post, "FAVOURITES")]
    assert body["preset"] == "NEWEST_FIRST"
    for _ in range(100):  # the log is written off the request path, within a fraction of a second
        if await pool.fetchval("SELECT count(*) FROM feed_log") == 2:
            break
        await asyncio.sleep(0.05)
    rows = await pool.fetch("SELECT post_id, position, feed, preset, reason, favourite FROM feed_log ORDER BY position")
    assert [(str(r["post_id"]), r["position"], r["feed"], r["preset"], r["reason"], r["favourite"]) for r in rows] == [
        (friend_post, 0, "for_you", "newest_first", "following", False),
        (fav_post, 1, "for_you", "newest_first", "favourites", True),
    ]


async def test_learned_ranks_by_the_active_model(api: Api, pool: asyncpg.Pool) -> None:
    reader = await api.member("reader")
    friend = await api.member("friend")
    fans = [await api.member(f"fan{i}") for i in range(3)]
    await api.follow(reader, "friend")
    quiet = await api.post(friend, "quiet, newer")
    loud = await api.post(friend, "loud, older")
    for fan in fans:
        await _like(api, fan, loud)
    await pool.execute("UPDATE posts SET created_at = now() - interval '30 hours' WHERE id = $1", uuid.UUID(loud))
    await _profile(api, reader, preset="LEARNED")
    # No model yet, so BALANCED: thirty hours of age outweigh three likes.
    assert [e["node"]["id"] for e in (await _page(api, reader))["edges"]] == [quiet, loud]
    await pool.execute(
        "INSERT INTO ranker_models (training_rows, auc, baseline_auc, signals, weights, intercept, active)"
        " VALUES (1000, 0.8, 0.7, $1, $2, 0, true)",
        list(ranking.SIGNALS),
        [5.0 if s == "popularity" else 0.0 for s in ranking.SIGNALS],  # popularity alone
    )
    page = await _page(api, reader)
    assert [e["node"]["id"] for e in page["edges"]] == [loud, quiet]
    assert page["edges"][0]["score"] == pytest.approx(5.0 * np.log1p(3.0))


async def test_a_page_past_more_hidden_posts_than_it_reads_ahead_still_fills_in_chain_order(api: Api) -> None:
    reader, _ = await _world(api, 30)
    admin = await api.member("admin", admin=True)
    expected = [e["node"]["id"] for e in await _all(api, reader, 30)]
    first = await _page(api, reader, 3)
    hidden = expected[3:17]  # 14 in a row: more than a page of 3 reads ahead
    for post_id in hidden:
        await api.gql("mutation($p: ID!) { holdPost(id: $p) { id } }", {"p": post_id}, token=admin)
    second = await _page(api, reader, 3, first["pageInfo"]["endCursor"])
    assert [e["node"]["id"] for e in second["edges"]] == expected[17:20]
    third = await _page(api, reader, 3, second["pageInfo"]["endCursor"])
    assert [e["node"]["id"] for e in third["edges"]] == expected[20:23]


async def test_ranking_reads_each_signal_as_the_feed_log_keeps_it_for_training(api: Api, pool: asyncpg.Pool) -> None:
    """The same post, viewer and moment give the same signals to the candidates statement (ranking) and
    to the feed log's writer (training rows), the engagement rates and the reader's effects included."""
    from datetime import UTC, datetime, timedelta

    from feedfabric.db import foryou as foryou_db
    from feedfabric.db.feed_log import ServedPage
    from feedfabric.feeds import feed_log as feed_log_svc

    reader = await api.member("reader")
    author = await api.member("author")
    fan = await api.member("fan")
    await api.follow(reader, "author")
    await api.gql("mutation($t: String!) { followTag(tag: $t) }", {"t": "trail"}, token=reader)
    posts = [await api.post(author, f"walk {i} #trail") for i in range(4)]
    for post_id in posts[:2]:
        await _like(api, reader, post_id)
    await _like(api, fan, posts[2])
    member_id = await pool.fetchval("SELECT id FROM members WHERE external_id = 'reader'")
    author_id = await pool.fetchval("SELECT id FROM members WHERE external_id = 'author'")
    await pool.execute(
        "INSERT INTO author_affinity (member_id, author_id, score) VALUES ($1, $2, 2) ON CONFLICT DO NOTHING",
        member_id,
        author_id,
    )
    await pool.execute(
        "INSERT INTO topic_interest (member_id, tag, score) VALUES ($1, 'trail', 3) ON CONFLICT DO NOTHING", member_id
    )
    await pool.execute(
        "INSERT INTO reader_author_effects (member_id, author_id, effect) VALUES ($1, $2, 0.7)", member_id, author_id
    )
    await pool.execute(  # following the tag declared its prior as the effect: a refit replaced it since
        "INSERT INTO reader_topic_effects (member_id, tag, effect) VALUES ($1, 'trail', 0.4)"
        " ON CONFLICT (member_id, tag) DO UPDATE SET effect = EXCLUDED.effect",
        member_id,
    )
    served = tuple(uuid.UUID(p) for p in posts[2:])
    earlier = datetime.now(UTC)
    await feed_log_svc.log_pages(pool, [ServedPage(member_id, "following", served, "redis", earlier)])
    at = datetime.now(UTC)
    found = await foryou_db.candidates(
        pool,
        member_id,
        as_of=at,
        since=at - timedelta(hours=48),
        favourites_since=at - timedelta(hours=48),
        sources=("following",),
        similar_ids=[],
        popular_ids=[],
        per_source=10,
        total=10,
        comment_weight=3.0,
    )
    await feed_log_svc.log_pages(pool, [ServedPage(member_id, "for_you", served, "redis", at)])
    logged = {
        r["post_id"]: r
        for r in await pool.fetch("SELECT * FROM feed_log WHERE feed = 'for_you' AND member_id = $1", member_id)
    }
    assert {c.post_id for c in found} == set(served)
    for c in found:
        row = logged[c.post_id]
        assert (c.affinity, c.interest, c.popularity) == (row["affinity"], row["interest"], row["popularity"])
        assert (c.affinity_rate, c.interest_rate) == (row["affinity_rate"], row["interest_rate"])
        assert (c.author_effect, c.topic_effect) == (row["author_effect"], row["topic_effect"]) == (0.7, 0.4)
    assert found[0].affinity_rate == pytest.approx(found[0].affinity / 3)  # two posts of the author served before


async def _member_id(pool: asyncpg.Pool, external_id: str) -> uuid.UUID:
    return uuid.UUID(str(await pool.fetchval("SELECT id FROM members WHERE external_id = $1", external_id)))


async def test_a_tampered_forged_or_borrowed_cursor_is_bad_user_input(api: Api, settings: Settings) -> None:
    """A cursor is signed for its member with the app's key: changing one character (the offset, the
    list, the path), signing with another key, or using another member's cursor is refused."""
    reader, _ = await _world(api, 15)
    other = await api.member("other")
    cursor = (await _page(api, reader, 5))["pageInfo"]["endCursor"]
    assert (await _page(api, reader, 5, cursor))["edges"]
    for n in range(0, len(cursor) - 1, 7):
        flipped = cursor[:n] + ("A" if cursor[n] != "A" else "B") + cursor[n + 1 :]
        assert await api.error_codes(FOR_YOU, {"first": 5, "after": flipped}, token=reader) == ["BAD_USER_INPUT"]
    assert await api.error_codes(FOR_YOU, {"first": 5, "after": cursor}, token=other) == ["BAD_USER_INPUT"]
    # A new Settings: a copy would keep the secret already read (a cached property).
    async with make_api(
        Settings(**{**settings.model_dump(), "feedfabric_jwt_secret": "another-secret-" + "x" * 32})
    ) as elsewhere:
        forged = (await _page(elsewhere, elsewhere.token("reader"), 5))["pageInfo"]["endCursor"]
    assert await api.error_codes(FOR_YOU, {"first": 5, "after": forged}, token=reader) == ["BAD_USER_INPUT"]
    assert (await api.rest("GET", "/userfeed/foryou", token=reader, params={"cursor": forged})).status_code == 400


async def test_every_cursor_has_one_length_however_long_the_chain(api: Api) -> None:
    reader, ids = await _world(api, 40)
    edges, after, ends = [], None, []
    while True:
        page = await _page(api, reader, 3, after)
        edges += page["edges"]
        after = page["pageInfo"]["endCursor"]
        ends.append(after)
        if not page["pageInfo"]["hasNextPage"]:
            break
    assert len(edges) == len({e["node"]["id"] for e in edges}) == 40
    lengths = {len(e["cursor"]) for e in edges} | {len(c) for c in ends if c}
    assert lengths == {CURSOR_CHARS}
    assert CURSOR_CHARS <= 100


async def test_a_chain_walked_one_post_a_page_with_redis_flushed_midway_never_repeats_or_skips(
    api: Api, redis: aioredis.Redis
) -> None:
    reader, _ = await _world(api, 24)
    expected = [e["node"]["id"] for e in await _all(api, reader, 24)]
    served, after, pages = [], None, 0
    while True:
        page = await _page(api, reader, 1 if pages % 2 else 4, after)
        pages += 1
        served += [e["node"]["id"] for e in page["edges"]]
        if pages in (3, 8):
            await redis.flushdb()
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert served == expected


@pytest.mark.redis_cluster
async def test_a_member_keeps_three_ranked_lists_and_the_fourth_first_page_drops_the_oldest(
    api: Api, redis: aioredis.Redis, pool: asyncpg.Pool
) -> None:
    """The oldest chain's list leaves Redis, and its cursor still goes on exactly, ranked again from Postgres."""
    reader, _ = await _world(api, 25)
    key = chains_key(await _member_id(pool, "reader"))
    expected = [e["node"]["id"] for e in await _all(api, reader, 25)]
    oldest = await _page(api, reader, 10)
    for _ in range(MAX_CHAINS):
        await _page(api, reader, 10)
    assert await redis.hlen(key) == MAX_CHAINS + 1  # the lists and their order
    assert [k async for k in redis.scan_iter(match="foryou:{*")] in ([key.encode()], [key])
    second = await _page(api, reader, 10, oldest["pageInfo"]["endCursor"])
    third = await _page(api, reader, 10, second["pageInfo"]["endCursor"])
    served = [e["node"]["id"] for e in oldest["edges"] + second["edges"] + third["edges"]]
    assert served == expected
    assert second["rankedAt"] == oldest["rankedAt"]
    assert await redis.hlen(key) == MAX_CHAINS + 1


async def test_a_cursor_whose_page_records_are_past_retention_is_refused_once_redis_lost_its_list(
    api: Api, pool: asyncpg.Pool, redis: aioredis.Redis, settings: Settings
) -> None:
    reader, _ = await _world(api, 15)
    first = await _page(api, reader, 5)
    second = await _page(api, reader, 5, first["pageInfo"]["endCursor"])
    await pool.execute("UPDATE foryou_pages SET ranked_at = ranked_at - interval '25 hours'")
    removed = await maintain(pool, settings, [s for s in STEPS if s.name == "foryou_pages"])
    assert removed == {"foryou_pages": 2}
    await redis.flushdb()
    body = await api.raw(FOR_YOU, {"first": 5, "after": second["pageInfo"]["endCursor"]}, token=reader)
    assert [e["extensions"]["code"] for e in body["errors"]] == ["BAD_USER_INPUT"]
    assert "expired" in body["errors"][0]["message"]


async def test_a_new_reader_gets_a_full_first_page_from_the_popular_posts(api: Api) -> None:
    """No follows, no favourites, no likes, the default profile: POPULAR alone fills the page."""
    fan = await api.member("fan")
    liked = []
    for n in range(25):
        post = await api.post(await api.member(f"author{n}"), f"post {n}")
        await _like(api, fan, post)
        liked.append(post)
    newcomer = await api.member("newcomer")
    edges = (await _page(api, newcomer))["edges"]
    assert len(edges) == 20
    assert {e["reason"] for e in edges} == {"POPULAR"}
    assert {e["node"]["id"] for e in edges} <= set(liked)


async def test_replaying_a_cursor_writes_no_new_page_record(api: Api, pool: asyncpg.Pool) -> None:
    """A cursor replayed (a client retrying, or looping on purpose) serves the page it served before, so
    it writes nothing: a hundred replays added a hundred records before."""
    reader, _ = await _world(api, 15)
    member = await _member_id(pool, "reader")
    cursor = (await _page(api, reader, 5))["pageInfo"]["endCursor"]
    served = await _page(api, reader, 5, cursor)
    rows = await pool.fetchval("SELECT count(*) FROM foryou_pages WHERE member_id = $1", member)
    for _ in range(10):
        assert await _page(api, reader, 5, cursor) == served
    assert await pool.fetchval("SELECT count(*) FROM foryou_pages WHERE member_id = $1", member) == rows
    after = served["pageInfo"]["endCursor"]
    assert (await _page(api, reader, 5, after))["edges"]  # the chain goes on from the replayed page
    assert await pool.fetchval("SELECT count(*) FROM foryou_pages WHERE member_id = $1", member) == rows + 1
