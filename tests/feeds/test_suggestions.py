"""Who to follow and topics worth following: each reason, what is never suggested, dismissals, the REST
twins, and the bounded read of a member who follows 10,000 members."""

from __future__ import annotations

import datetime as dt
import uuid

import asyncpg
from feedfabric.core.ids import new_id
from feedfabric.db import suggestions as suggestions_db

from tests import factories
from tests.support import Api

MEMBERS = "query($n: Int) { suggestedMembers(first: $n) { member { username } reason } }"
TOPICS = "query($n: Int) { suggestedTopics(first: $n) { tag reason recentPostCount } }"
DISMISS = "mutation($e: String!) { dismissSuggestion(externalUserId: $e) }"


async def _id(pool: asyncpg.Pool, name: str) -> uuid.UUID:
    found: uuid.UUID = await pool.fetchval("SELECT id FROM members WHERE external_id = $1", name)
    return found


async def _suggested(api: Api, token: str, first: int = 20) -> list[tuple[str, str]]:
    data = await api.gql(MEMBERS, {"n": first}, token=token)
    return [(s["member"]["username"], s["reason"]) for s in data["suggestedMembers"]]


async def _circle(api: Api) -> str:
    """maya follows ana and ben; both follow carl, ana also dora; ten more members make maya no newcomer."""
    maya = await api.member("maya")
    for name in ("ana", "ben", "carl", "dora"):
        await api.member(name)
    for name in ("ana", "ben"):
        await api.follow(maya, name)
    ana, ben = api.token("ana"), api.token("ben")
    await api.follow(ana, "carl")
    await api.follow(ben, "carl")
    await api.follow(ana, "dora")
    await api.follow(ana, "maya")
    for n in range(10):
        await api.member(f"x{n}")
        await api.follow(maya, f"x{n}")
    return maya


async def test_friends_of_friends_come_first_by_how_many_of_them_follow(api: Api) -> None:
    maya = await _circle(api)
    assert await _suggested(api, maya) == [
        ("carl", "FOLLOWED_BY_PEOPLE_YOU_FOLLOW"),
        ("dora", "FOLLOWED_BY_PEOPLE_YOU_FOLLOW"),
    ]
    # Following one takes it out of the next answer (the cached list is forgotten and filtered again).
    await api.follow(maya, "carl")
    assert await _suggested(api, maya) == [("dora", "FOLLOWED_BY_PEOPLE_YOU_FOLLOW")]


async def test_a_suspended_or_dismissed_member_is_not_suggested_until_the_dismissal_ages(
    api: Api, pool: asyncpg.Pool
) -> None:
    maya = await _circle(api)
    assert [n for n, _ in await _suggested(api, maya)] == ["carl", "dora"]  # now cached
    admin = await api.member("admin", admin=True)
    await api.gql('mutation { suspendMember(externalUserId: "dora") { id } }', token=admin)
    assert (await api.gql(DISMISS, {"e": "carl"}, token=maya))["dismissSuggestion"] is True
    assert await _suggested(api, maya) == []
    # A second dismissal renews the first; after 30 days the member may be suggested again.
    assert (await api.gql(DISMISS, {"e": "carl"}, token=maya))["dismissSuggestion"] is True
    await pool.execute("UPDATE suggestion_dismissals SET dismissed_at = now() - interval '31 days'")
    assert await _suggested(api, maya) == [("carl", "FOLLOWED_BY_PEOPLE_YOU_FOLLOW")]


async def test_a_member_blocked_either_way_or_muted_is_not_suggested(api: Api) -> None:
    """Through the viewer's relations (the rule every feed applies to an author), cached list or not."""
    maya = await _circle(api)
    await api.member("erin")
    await api.follow(api.token("ana"), "erin")
    assert [n for n, _ in await _suggested(api, maya)] == ["carl", "dora", "erin"]  # now cached
    await api.gql('mutation { block(externalUserId: "carl") { id } }', token=maya)
    await api.gql('mutation { block(externalUserId: "maya") { id } }', token=api.token("dora"))
    await api.gql('mutation { mute(externalUserId: "erin") { id } }', token=maya)
    assert await _suggested(api, maya) == []
    await api.gql('mutation { unmute(externalUserId: "erin") { id } }', token=maya)
    assert await _suggested(api, maya) == [("erin", "FOLLOWED_BY_PEOPLE_YOU_FOLLOW")]


async def test_dismissing_an_unknown_member_or_yourself_is_refused(api: Api) -> None:
    maya = await api.member("maya")
    assert await api.error_codes(DISMISS, {"e": "nobody"}, token=maya) == ["NOT_FOUND"]
    assert await api.error_codes(DISMISS, {"e": "maya"}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(DISMISS, {"e": "maya"}) == ["UNAUTHENTICATED"]


async def test_members_liked_by_those_who_like_what_you_like_are_similar_engagement(
    api: Api, pool: asyncpg.Pool
) -> None:
    maya = await api.member("maya")
    for name in ("zoe", "xavier", "yann", "quinn"):
        await api.member(name)
    zoe, xavier, yann = [await _id(pool, n) for n in ("zoe", "xavier", "yann")]
    shared = await factories.post(pool, xavier)
    other = await factories.post(pool, yann)
    await pool.execute(
        "INSERT INTO likes (post_id, member_id) VALUES ($1, $2), ($1, $3), ($4, $3)",
        shared,
        await _id(pool, "maya"),
        zoe,
        other,
    )
    suggested = dict(await _suggested(api, maya))
    assert suggested["yann"] == "SIMILAR_ENGAGEMENT"
    assert suggested["xavier"] == "SIMILAR_ENGAGEMENT"
    assert "quinn" not in suggested and "maya" not in suggested


async def test_authors_you_engage_with_come_by_engagement_per_post_shown_and_never_once_followed(
    api: Api, pool: asyncpg.Pool
) -> None:
    """Affinity per post served, as the affinity_rate signal reads it: an author liked once in one
    post shown outranks one liked twice in ten; shown as SIMILAR_ENGAGEMENT; a followed one leaves."""
    maya = await _circle(api)
    for name in ("rare", "often"):
        await api.member(name)
    me, rare, often = [await _id(pool, n) for n in ("maya", "rare", "often")]
    await pool.execute(
        "INSERT INTO author_affinity (member_id, author_id, score) VALUES ($1, $2, 1), ($1, $3, 2)", me, rare, often
    )
    await pool.execute(
        "INSERT INTO author_exposure (member_id, author_id, served) VALUES ($1, $2, 1), ($1, $3, 10)", me, rare, often
    )
    suggested = await _suggested(api, maya)
    engaged = [(n, r) for n, r in suggested if n in ("rare", "often")]
    assert engaged == [("rare", "SIMILAR_ENGAGEMENT"), ("often", "SIMILAR_ENGAGEMENT")]
    await api.follow(maya, "rare")
    assert "rare" not in dict(await _suggested(api, maya))


async def test_active_posters_in_your_topics_and_the_most_followed_for_a_new_member(
    api: Api, pool: asyncpg.Pool
) -> None:
    maya = await api.member("maya")
    for name in ("jazzman", "star", "fan1", "fan2"):
        await api.member(name)
    await api.gql('mutation { followTag(tag: "jazz") }', token=maya)
    await factories.post(pool, await _id(pool, "jazzman"), tags=["jazz"])
    for fan in ("fan1", "fan2"):
        await api.follow(api.token(fan), "star")
    suggested = await _suggested(api, maya)
    assert suggested[0] == ("jazzman", "POPULAR_IN_YOUR_TOPICS")
    assert ("star", "POPULAR") in suggested
    # A post older than the week does not make its author popular in the topic.
    await pool.execute("UPDATE posts SET created_at = now() - interval '8 days'")
    await api.gql('mutation { followTag(tag: "other") }', token=maya)  # forgets the cached list
    assert "jazzman" not in dict(await _suggested(api, maya))


async def test_the_most_followed_are_for_new_members_only(api: Api) -> None:
    maya = await _circle(api)
    for fan in ("ana", "ben", "x1", "x2"):
        await api.follow(api.token(fan), "x0")
    await api.member("star")
    for fan in ("ana", "ben", "x3"):
        await api.follow(api.token(fan), "star")
    # maya follows 12 members: no POPULAR reason, though star has 3 followers.
    assert all(reason != "POPULAR" for _, reason in await _suggested(api, maya))
    newbie = await api.member("newbie")
    assert ("x0", "POPULAR") == (await _suggested(api, newbie))[0]


async def test_topics_popular_and_fresh_for_a_new_member_with_their_recent_posts(api: Api, pool: asyncpg.Pool) -> None:
    newbie = await api.member("newbie")
    await api.member("writer")
    writer = await _id(pool, "writer")
    for _ in range(3):
        await factories.post(pool, writer, tags=["chess"])
    await factories.post(pool, writer, tags=["sailing"])
    await factories.post(pool, writer, tags=["sailing"], status="held")
    data = (await api.gql(TOPICS, {"n": 5}, token=newbie))["suggestedTopics"]
    assert data == [
        {"tag": "chess", "reason": "POPULAR", "recentPostCount": 3},
        {"tag": "sailing", "reason": "POPULAR", "recentPostCount": 1},
    ]
    await api.gql('mutation { followTag(tag: "chess") }', token=newbie)
    assert [t["tag"] for t in (await api.gql(TOPICS, {"n": 5}, token=newbie))["suggestedTopics"]] == ["sailing"]


async def test_topics_near_what_the_member_engages_with_and_follows(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    await api.member("ana")
    ana, me = await _id(pool, "ana"), await _id(pool, "maya")
    await api.follow(maya, "ana")
    await api.gql('mutation { followTag(tag: "gardening") }', token=api.token("ana"))
    await pool.execute("INSERT INTO topic_interest (member_id, tag, score) VALUES ($1, 'physics', 3)", me)
    await factories.post(pool, ana, tags=["physics", "astronomy"])
    reasons = {t["tag"]: t["reason"] for t in (await api.gql(TOPICS, {"n": 10}, token=maya))["suggestedTopics"]}
    assert reasons["gardening"] == "FOLLOWED_BY_PEOPLE_YOU_FOLLOW"
    assert reasons["physics"] == "SIMILAR_ENGAGEMENT"
    assert reasons["astronomy"] == "POPULAR_IN_YOUR_TOPICS"


async def test_rest_twins_and_their_limits(api: Api) -> None:
    maya = await _circle(api)
    body = (await api.rest("GET", "/suggestions/members?limit=1", token=maya)).json()
    assert [(s["member"]["username"], s["reason"]) for s in body["members"]] == [
        ("carl", "FOLLOWED_BY_PEOPLE_YOU_FOLLOW")
    ]
    topics = await api.rest("GET", "/suggestions/topics", token=maya)
    assert topics.status_code == 200 and topics.json() == {"topics": []}
    assert (await api.rest("GET", "/suggestions/members?limit=0", token=maya)).status_code == 400
    assert (await api.rest("GET", "/suggestions/topics?limit=101", token=maya)).status_code == 400
    assert (await api.rest("GET", "/suggestions/members")).status_code == 401
    assert await api.error_codes(MEMBERS, {"n": 0}, token=maya) == ["BAD_USER_INPUT"]


async def test_a_member_following_ten_thousand_is_answered_from_their_most_recent_follows(pool: asyncpg.Pool) -> None:
    """The fan-in is sampled through the follows index: the BOUNDS.followees (100) most recent followees
    are read, each with their BOUNDS.per_followee (25) most recent follows, however many the member has. So a friend of the oldest followee
    is not found and one of the newest is, with a score no higher than the sample's size."""
    me = await factories.member(pool)
    followees = await factories.members(pool, 10_000)
    await pool.execute(
        "INSERT INTO follows (follower_id, target_type, target_id, created_at)"
        " SELECT $1, 'member', f::text, now() - (10000 - n) * interval '1 second'"
        " FROM unnest($2::uuid[]) WITH ORDINALITY AS t (f, n)",
        me,
        followees,
    )
    old_friend, new_friend = await factories.member(pool), await factories.member(pool)
    await factories.follow(pool, followees[0], old_friend)
    await factories.follow(pool, followees[-1], new_friend)
    for follower in followees[-300:]:
        await factories.follow(pool, follower, new_friend)
    found = await suggestions_db.member_candidates(
        pool,
        me,
        since=dt.datetime.now(dt.UTC) - dt.timedelta(days=7),
        dismissed_since=dt.datetime.now(dt.UTC) - dt.timedelta(days=30),
        new_member_follows=10,
        comment_weight=3.0,
    )
    scores = {f.key: f.score for f in found if f.reason == suggestions_db.FOLLOWED_BY_FOLLOWED}
    assert str(old_friend) not in scores
    assert scores[str(new_friend)] == suggestions_db.BOUNDS.followees
    assert str(new_id()) not in scores
