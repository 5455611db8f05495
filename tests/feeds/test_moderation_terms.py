"""Moderation terms: admin only; a post created or edited with one in it (whole words, NFKC and case
folded) is held at write time, and a system report with no reporter is filed for it."""

from __future__ import annotations

import asyncpg
import pytest
from feedfabric.feeds import term_matcher

from tests.support import Api

ADD = "mutation($p: String!) { addModerationTerm(phrase: $p) { id phrase createdAt } }"
TERMS = "{ moderationTerms { id phrase } }"
CREATE = "mutation($c: String!) { createPost(input: {content: $c}) { id status } }"
UPDATE = "mutation($id: ID!, $c: String!) { updatePost(id: $id, content: $c) { id status } }"


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("selling SCAMCOIN today", True),
        ("ＳＣＡＭＣＯＩＮ fullwidth", True),  # NFKC
        ("#scamcoin as a tag", True),
        ("scamcoin!", True),
        ("scamcoins are plural", False),
        ("notscamcoin", False),
        ("a sure thing", True),  # a phrase of two words
        ("#surething", True),  # the hashtag of the same text
        ("a sure thingy", False),
        ("STRASSE", True),  # case folding: ß folds to ss
    ],
)
def test_the_matcher_is_whole_word_after_nfkc_and_case_folding(text: str, held: bool) -> None:
    matcher = term_matcher.compile_phrases([term_matcher.fold(p) for p in ("scamcoin", "sure thing", "Straße")])
    assert matcher.matches(text) is held


def test_no_terms_match_nothing() -> None:
    assert not term_matcher.compile_phrases([]).matches("anything")


async def test_terms_are_admin_only_newest_first_and_one_per_folded_phrase(api: Api) -> None:
    admin = await api.member("mod", admin=True)
    maya = await api.member("maya")
    assert await api.error_codes(ADD, {"p": "scamcoin"}, token=maya) == ["FORBIDDEN"]
    assert await api.error_codes(TERMS, token=maya) == ["FORBIDDEN"]
    first = (await api.gql(ADD, {"p": "scamcoin"}, token=admin))["addModerationTerm"]
    again = (await api.gql(ADD, {"p": "SCAMCOIN"}, token=admin))["addModerationTerm"]
    assert again["id"] == first["id"]
    second = (await api.gql(ADD, {"p": "sure thing"}, token=admin))["addModerationTerm"]
    listed = (await api.gql(TERMS, token=admin))["moderationTerms"]
    assert [t["id"] for t in listed] == [second["id"], first["id"]]
    for bad in ("", "   ", "x" * 101):
        assert await api.error_codes(ADD, {"p": bad}, token=admin) == ["BAD_USER_INPUT"], bad
    removed = await api.gql("mutation($id: ID!) { removeModerationTerm(id: $id) }", {"id": first["id"]}, token=admin)
    assert removed["removeModerationTerm"] is True
    assert [t["id"] for t in (await api.gql(TERMS, token=admin))["moderationTerms"]] == [second["id"]]


async def test_a_post_with_a_term_is_created_held_with_a_system_report(api: Api, pool: asyncpg.Pool) -> None:
    admin = await api.member("mod", admin=True)
    theo = await api.member("theo")
    maya = await api.member("maya")
    clean = (await api.gql(CREATE, {"c": "nothing to see"}, token=theo))["createPost"]
    assert clean["status"] == "LIVE"
    await api.gql(ADD, {"p": "ScamCoin"}, token=admin)
    held = (await api.gql(CREATE, {"c": "buy SCAMCOIN now"}, token=theo))["createPost"]
    assert held["status"] == "HELD"
    # Its author sees it; nobody else does.
    query = "query($id: ID!) { post(id: $id) { id status } }"
    assert (await api.gql(query, {"id": held["id"]}, token=theo))["post"]["status"] == "HELD"
    assert (await api.gql(query, {"id": held["id"]}, token=maya))["post"] is None
    events = await pool.fetch("SELECT event_type FROM outbox WHERE key = $1 ORDER BY id", held["id"])
    assert [e["event_type"] for e in events] == ["PostCreated", "PostHeld"]
    queue = await api.gql(
        "{ reports { edges { node { reason reporter { id } member { username } post { id status } } } } }",
        token=admin,
    )
    nodes = [e["node"] for e in queue["reports"]["edges"]]
    assert nodes == [
        {
            "reason": "OTHER",
            "reporter": None,
            "member": {"username": "theo"},
            "post": {"id": held["id"], "status": "HELD"},
        }
    ]


async def test_an_edit_with_a_term_holds_the_post_once(api: Api, pool: asyncpg.Pool) -> None:
    admin = await api.member("mod", admin=True)
    theo = await api.member("theo")
    post = (await api.gql(CREATE, {"c": "harmless"}, token=theo))["createPost"]
    await api.gql(ADD, {"p": "scamcoin"}, token=admin)
    edited = (await api.gql(UPDATE, {"id": post["id"], "c": "now with scamcoin"}, token=theo))["updatePost"]
    assert edited["status"] == "HELD"
    again = (await api.gql(UPDATE, {"id": post["id"], "c": "still scamcoin"}, token=theo))["updatePost"]
    assert again["status"] == "HELD"
    assert await pool.fetchval("SELECT count(*) FROM reports WHERE target_id = $1::uuid", post["id"]) == 1


async def test_a_removed_term_holds_no_more_posts(api: Api) -> None:
    admin = await api.member("mod", admin=True)
    theo = await api.member("theo")
    term = (await api.gql(ADD, {"p": "scamcoin"}, token=admin))["addModerationTerm"]
    assert (await api.gql(CREATE, {"c": "scamcoin"}, token=theo))["createPost"]["status"] == "HELD"
    await api.gql("mutation($id: ID!) { removeModerationTerm(id: $id) }", {"id": term["id"]}, token=admin)
    assert (await api.gql(CREATE, {"c": "scamcoin"}, token=theo))["createPost"]["status"] == "LIVE"
