"""Text members write is stored without terminal escapes, bells or bidi overrides; newlines and tabs stay."""

from __future__ import annotations

from feedfabric.feeds.text import clean_text

from tests.support import Api

HOSTILE = "a\x1b[2J\x07b\u202egnp.exe\u202c\u2066c\u2069\x7f\x85d\r\ne\tf"
CLEAN = "a[2Jbgnp.exec" + "d\ne\tf"


def test_clean_text_strips_controls_and_keeps_newlines_and_tabs() -> None:
    assert clean_text(HOSTILE, "content", max_length=100) == CLEAN
    assert clean_text("one\rtwo", "content", max_length=100) == "one\ntwo"


async def test_posts_comments_and_display_names_are_stored_clean(api: Api) -> None:
    maya = api.token("esc")
    await api.gql(
        "mutation($u: String!, $d: String!) { upsertProfile(username: $u, displayName: $d) { id } }",
        {"u": "esc", "d": "\x1b[31mMaya\x07\u202e"},
        token=maya,
    )
    post = await api.post(maya, HOSTILE)
    comment = await api.gql(
        "mutation($p: ID!, $c: String!) { addComment(postId: $p, content: $c) { content } }",
        {"p": post, "c": HOSTILE},
        token=maya,
    )
    assert comment["addComment"]["content"] == CLEAN
    data = await api.gql("query($p: ID!) { post(id: $p) { content author { displayName } } }", {"p": post}, token=maya)
    assert data["post"]["content"] == CLEAN
    assert data["post"]["author"]["displayName"] == "[31mMaya"
