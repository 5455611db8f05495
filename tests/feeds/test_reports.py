"""Reports: filing (once per open target, 20 an hour), who sees what of a report, the admin queue
oldest first with keyset pages, and resolution of every open report on a target through the
moderation paths that already exist."""

from __future__ import annotations

import asyncio

import asyncpg
from feedfabric.feeds.reports import HOURLY_LIMIT

from tests.support import Api

REPORT = """mutation($i: ReportInput!) { report(input: $i) {
  id reason note status action member { username } post { id } comment { id } reporter { username }
  openReportsOnTarget } }"""
QUEUE = """query($s: ReportStatus, $f: Int, $a: String) { reports(status: $s, first: $f, after: $a) {
  edges { cursor node { id reason status action member { username } post { id status } comment { id }
  reporter { username } openReportsOnTarget } } pageInfo { hasNextPage endCursor } } }"""
RESOLVE = """mutation($id: ID!, $a: ReportAction!) { resolveReport(id: $id, action: $a) {
  id status action resolvedAt openReportsOnTarget } }"""


async def report(api: Api, token: str, **given: object) -> dict[str, object]:
    data = await api.gql(REPORT, {"i": {"reason": "SPAM", **given}}, token=token)
    return dict(data["report"])


async def comment(api: Api, token: str, post_id: str, content: str) -> str:
    data = await api.gql(
        "mutation($p: ID!, $c: String!) { addComment(postId: $p, content: $c) { id } }",
        {"p": post_id, "c": content},
        token=token,
    )
    return str(data["addComment"]["id"])


async def test_a_report_of_a_post_names_its_author_and_hides_the_reporter_from_a_member(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    post = await api.post(theo, "buy cheap watches")
    filed = await report(api, maya, postId=post, note="  spam again  ")
    assert filed["status"] == "OPEN" and filed["action"] is None
    assert filed["member"] == {"username": "theo"}
    assert filed["post"] == {"id": post} and filed["comment"] is None
    assert filed["note"] == "spam again"
    assert filed["reporter"] is None  # admin only, even for the reporter
    assert filed["openReportsOnTarget"] == 1


async def test_a_second_open_report_of_the_same_target_returns_the_first(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    post = await api.post(theo, "hello")
    first = await report(api, maya, postId=post)
    second = await report(api, maya, postId=post, reason="HATE")
    assert second["id"] == first["id"] and second["reason"] == "SPAM"
    # Two at once are one report as well: the unique index decides the race.
    racing = await asyncio.gather(*(report(api, maya, externalUserId="theo") for _ in range(4)))
    assert len({r["id"] for r in racing}) == 1
    assert await pool.fetchval("SELECT count(*) FROM reports") == 2


async def test_reports_by_two_members_count_on_the_target(api: Api) -> None:
    maya = await api.member("maya")
    ivy = await api.member("ivy")
    theo = await api.member("theo")
    post = await api.post(theo, "hello")
    await report(api, maya, postId=post)
    second = await report(api, ivy, postId=post)
    assert second["openReportsOnTarget"] == 2


async def test_the_twenty_first_report_in_an_hour_is_rate_limited(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    posts = [await api.post(theo, f"post {n}") for n in range(HOURLY_LIMIT + 1)]
    for post in posts[:HOURLY_LIMIT]:
        await report(api, maya, postId=post)
    codes = await api.error_codes(REPORT, {"i": {"reason": "SPAM", "postId": posts[-1]}}, token=maya)
    assert codes == ["RATE_LIMITED"]
    # Asking again about a target already reported still answers with that report.
    again = await report(api, maya, postId=posts[0])
    assert again["status"] == "OPEN"
    # An hour later the allowance is back.
    await pool.execute("UPDATE reports SET created_at = created_at - interval '61 minutes'")
    assert (await report(api, maya, postId=posts[-1]))["status"] == "OPEN"


async def test_bad_input_files_nothing(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    post = await api.post(theo, "hello")
    cases = [
        {"reason": "SPAM"},
        {"reason": "SPAM", "postId": post, "externalUserId": "theo"},
        {"reason": "SPAM", "postId": post, "note": "x" * 1001},
        {"reason": "SPAM", "postId": "not-an-id"},
        {"reason": "SPAM", "externalUserId": "maya"},
    ]
    for given in cases:
        assert await api.error_codes(REPORT, {"i": given}, token=maya) == ["BAD_USER_INPUT"], given
    inline = f'mutation {{ report(input: {{postId: "{post}", reason: NOT_A_REASON}}) {{ id }} }}'
    assert await api.error_codes(inline, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(REPORT, {"i": {"reason": "BOGUS", "postId": post}}, token=maya) == ["BAD_USER_INPUT"]
    assert await api.error_codes(REPORT, {"i": {"reason": "SPAM", "externalUserId": "nobody"}}, token=maya) == [
        "NOT_FOUND"
    ]
    assert await api.error_codes(REPORT, {"i": {"reason": "SPAM", "postId": post}}) == ["UNAUTHENTICATED"]
    assert await pool.fetchval("SELECT count(*) FROM reports") == 0


async def test_a_post_the_reporter_cannot_see_is_not_found(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    admin = await api.member("mod", admin=True)
    post = await api.post(theo, "hello")
    await api.gql("mutation($id: ID!) { holdPost(id: $id) { id } }", {"id": post}, token=admin)
    codes = await api.error_codes(REPORT, {"i": {"reason": "SPAM", "postId": post}}, token=maya)
    assert codes == ["NOT_FOUND"]


async def test_my_reports_newest_first_in_keyset_pages(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.member("ivy")
    posts = [await api.post(theo, f"post {n}") for n in range(3)]
    filed = [(await report(api, maya, postId=p))["id"] for p in posts]
    query = "query($a: String) { myReports(first: 2, after: $a) { edges { node { id } } pageInfo { hasNextPage endCursor } } }"
    first = (await api.gql(query, token=maya))["myReports"]
    assert [e["node"]["id"] for e in first["edges"]] == filed[::-1][:2]
    assert first["pageInfo"]["hasNextPage"]
    rest = (await api.gql(query, {"a": first["pageInfo"]["endCursor"]}, token=maya))["myReports"]
    assert [e["node"]["id"] for e in rest["edges"]] == filed[:1]
    assert not rest["pageInfo"]["hasNextPage"]
    ivy = api.token("ivy")
    assert (await api.gql(query, token=ivy))["myReports"]["edges"] == []  # nobody else's


async def test_the_queue_is_admin_only_and_oldest_first_in_keyset_pages(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    admin = await api.member("mod", admin=True)
    posts = [await api.post(theo, f"post {n}") for n in range(5)]
    filed = [(await report(api, maya, postId=p))["id"] for p in posts]
    assert await api.error_codes(QUEUE, token=maya) == ["FORBIDDEN"]
    seen: list[str] = []
    after = None
    while True:
        page = (await api.gql(QUEUE, {"f": 2, "a": after}, token=admin))["reports"]
        seen += [e["node"]["id"] for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert seen == filed
    node = (await api.gql(QUEUE, {"f": 1}, token=admin))["reports"]["edges"][0]["node"]
    assert node["reporter"] == {"username": "maya"}  # an admin sees who reported
    assert node["member"] == {"username": "theo"}


async def test_resolving_resolves_every_open_report_on_the_target_through_hold_post(
    api: Api, pool: asyncpg.Pool
) -> None:
    maya = await api.member("maya")
    ivy = await api.member("ivy")
    theo = await api.member("theo")
    admin = await api.member("mod", admin=True)
    post = await api.post(theo, "hello")
    other = await api.post(theo, "another")
    first = await report(api, maya, postId=post)
    await report(api, ivy, postId=post, reason="HATE")
    untouched = await report(api, maya, postId=other)
    done = (await api.gql(RESOLVE, {"id": first["id"], "a": "HOLD_POST"}, token=admin))["resolveReport"]
    assert done["status"] == "ACTIONED" and done["action"] == "HOLD_POST" and done["resolvedAt"]
    assert done["openReportsOnTarget"] == 0
    rows = await pool.fetch("SELECT status, action FROM reports WHERE target_id = $1::uuid", post)
    assert {(r["status"], r["action"]) for r in rows} == {("actioned", "hold_post")}
    # Held as holdPost holds: the author sees it, nobody else does, PostHeld is in the outbox.
    assert await pool.fetchval("SELECT status FROM posts WHERE id = $1::uuid", post) == "held"
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE event_type = 'PostHeld' AND key = $1", post) == 1
    seen = await api.gql("query($id: ID!) { post(id: $id) { id } }", {"id": post}, token=maya)
    assert seen["post"] is None
    queue = (await api.gql(QUEUE, token=admin))["reports"]["edges"]
    assert [e["node"]["id"] for e in queue] == [untouched["id"]]
    # Resolving again changes nothing; a filed report of the held post is still the moderator's to read.
    again = (await api.gql(RESOLVE, {"id": first["id"], "a": "DISMISS"}, token=admin))["resolveReport"]
    assert again["action"] == "HOLD_POST"
    actioned = (await api.gql(QUEUE, {"s": "ACTIONED"}, token=admin))["reports"]["edges"]
    assert {e["node"]["post"]["status"] for e in actioned} == {"HELD"}
    assert await api.error_codes(RESOLVE, {"id": untouched["id"], "a": "DISMISS"}, token=maya) == ["FORBIDDEN"]


async def test_dismiss_changes_nothing_but_the_reports(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    admin = await api.member("mod", admin=True)
    post = await api.post(theo, "hello")
    filed = await report(api, maya, postId=post)
    done = (await api.gql(RESOLVE, {"id": filed["id"], "a": "DISMISS"}, token=admin))["resolveReport"]
    assert done["status"] == "DISMISSED"
    assert await pool.fetchval("SELECT status FROM posts WHERE id = $1::uuid", post) == "live"
    # A new report of the same target may be filed once the first is closed.
    assert (await report(api, maya, postId=post))["id"] != filed["id"]


async def test_delete_comment_hides_it_and_uncounts_it(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    admin = await api.member("mod", admin=True)
    post = await api.post(maya, "my post")
    keep = await comment(api, theo, post, "fine words")
    bad = await comment(api, theo, post, "rude words")
    filed = await report(api, maya, commentId=bad, reason="HARASSMENT")
    assert filed["comment"] == {"id": bad} and filed["member"] == {"username": "theo"}
    assert await api.error_codes(RESOLVE, {"id": filed["id"], "a": "HOLD_POST"}, token=admin) == ["BAD_USER_INPUT"]
    done = (await api.gql(RESOLVE, {"id": filed["id"], "a": "DELETE_COMMENT"}, token=admin))["resolveReport"]
    assert done["action"] == "DELETE_COMMENT"
    data = await api.gql(
        "query($id: ID!) { post(id: $id) { commentCount comments { edges { node { id } } } } }",
        {"id": post},
        token=maya,
    )
    assert data["post"]["commentCount"] == 1
    assert [e["node"]["id"] for e in data["post"]["comments"]["edges"]] == [keep]
    # The author's suspension and return move only the comment still shown.
    await pool.execute("UPDATE members SET status = 'suspended' WHERE username = 'theo'")
    await pool.execute("UPDATE members SET status = 'active' WHERE username = 'theo'")
    assert await pool.fetchval("SELECT comments FROM post_stats WHERE post_id = $1::uuid", post) == 1


async def test_suspend_member_suspends_the_author_as_suspension_does(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    admin = await api.member("mod", admin=True)
    post = await api.post(theo, "hello")
    by_post = await report(api, maya, postId=post)
    by_member = await report(api, maya, externalUserId="theo")
    done = (await api.gql(RESOLVE, {"id": by_post["id"], "a": "SUSPEND_MEMBER"}, token=admin))["resolveReport"]
    assert done["status"] == "ACTIONED"
    assert await pool.fetchval("SELECT status FROM members WHERE username = 'theo'") == "suspended"
    # The member's own report is a different target: it stays open.
    assert await pool.fetchval("SELECT status FROM reports WHERE id = $1::uuid", by_member["id"]) == "open"
    assert await api.error_codes("{ viewer { id } }", token=theo) != []


async def test_post_reports_over_rest_is_201_with_the_report(api: Api) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    post = await api.post(theo, "hello")
    response = await api.rest("POST", "/reports", token=maya, json={"postId": post, "reason": "SPAM", "note": "n"})
    assert response.status_code == 201
    body = response.json()["report"]
    assert body["status"] == "OPEN" and body["reason"] == "SPAM" and body["postId"] == post
    again = await api.rest("POST", "/reports", token=maya, json={"postId": post, "reason": "SPAM"})
    assert again.json()["report"]["id"] == body["id"]
    for bad in ({"reason": "SPAM"}, {"postId": post, "reason": "NOPE"}, {"postId": post}, {"postId": post, "x": 1}):
        refused = await api.rest("POST", "/reports", token=maya, json=bad)
        assert refused.status_code == 400, bad
        assert refused.json()["error"]["code"] == "request.invalid"
    assert (await api.rest("POST", "/reports", json={"postId": post, "reason": "SPAM"})).status_code == 401


async def test_also_block_blocks_the_reported_member_in_the_same_step(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    await api.follow(maya, "theo")
    post = await api.post(theo, "rude")
    filed = await report(api, maya, postId=post, alsoBlock=True)
    assert filed["member"] == {"username": "theo"}
    assert await pool.fetchval("SELECT count(*) FROM blocks") == 1
    assert await pool.fetchval("SELECT count(*) FROM follows WHERE target_type = 'member'") == 0
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE event_type = 'MemberBlocked'") == 1
    seen = await api.gql("query($id: ID!) { post(id: $id) { id } }", {"id": post}, token=maya)
    assert seen["post"] is None
    # Blocking oneself is refused, so alsoBlock on one's own report fails with the report itself.
    codes = await api.error_codes(
        REPORT, {"i": {"reason": "SPAM", "externalUserId": "maya", "alsoBlock": True}}, token=maya
    )
    assert codes == ["BAD_USER_INPUT"]
