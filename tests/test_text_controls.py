"""Text members write is stored without terminal escapes, bells or bidi overrides (newlines and tabs stay),
and text with no visible character is blank, refused wherever empty text is."""

from __future__ import annotations

import pytest
from feedfabric.errors import BadInput
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


# --- blank text: no visible character ---------------------------------------------------

INVISIBLE = {
    "zero-width space": "\u200b",
    "direction marks": "\u200e\u200f",
    "byte-order mark": "\ufeff",
    "word joiner": "\u2060",
    "Arabic letter mark": "\u061c",
    "Hangul filler": "\u3164",
    "Hangul choseong filler": "\u115f",
    "Hangul jungseong filler": "\u1160",
    "halfwidth Hangul filler": "\uffa0",
    "braille blank": "\u2800",
    "Mongolian vowel separator": "\u180e",
    "soft hyphen": "\u00ad",
    "variation selector": "\ufe0f",
    "combining marks alone": "\u0301\u0308",
    "tag characters": "\U000e0041\U000e007f",
    "mixed with whitespace": " \u200b\n\u3164\t\u2800 ",
}

VISIBLE = {
    "Latin": "hello",
    "Japanese": "こんにちは",
    "Arabic": "مرحبا",
    "Hebrew": "שלום",
    "Devanagari, with combining marks": "हिन्दी",
    "Thai": "สวัสดี",
    "Korean": "안녕하세요",
    "Persian, with a zero-width non-joiner": "می\u200cخواهم",
    "emoji ZWJ sequence": "👩\u200d💻",
    "flag": "🇯🇵",
    "keycap": "1\ufe0f\u20e3",
    "emoji newer than the Unicode tables": "\U0001fae8",
    "a letter behind a zero-width space": "\u200bx",
    "a letter with a Hangul filler": "\u3164Maya",
}


@pytest.mark.parametrize("blank", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_text_without_a_visible_character_is_blank(blank: str) -> None:
    with pytest.raises(BadInput, match="^content must not be empty$"):
        clean_text(blank, "content", max_length=100)


@pytest.mark.parametrize("visible", VISIBLE.values(), ids=VISIBLE.keys())
def test_text_with_a_visible_character_in_any_script_is_kept(visible: str) -> None:
    assert clean_text(visible, "content", max_length=100) == visible


CREATE_POST = "mutation($c: String!) { createPost(input: {content: $c}) { id } }"
UPDATE_POST = "mutation($p: ID!, $c: String!) { updatePost(id: $p, content: $c) { id } }"
ADD_COMMENT = "mutation($p: ID!, $c: String!) { addComment(postId: $p, content: $c) { id } }"
UPSERT_PROFILE = 'mutation($c: String!) { upsertProfile(username: "writer", displayName: $c) { id } }'
CREATE_PLAYLIST = "mutation($c: String!) { createPlaylist(name: $c) { id } }"

# Every text input that refuses blank text (REST has no routes that write text): its mutation and
# the name its refusal gives the input.
BLANK_REFUSING = {
    "createPost": (CREATE_POST, "content"),
    "updatePost": (UPDATE_POST, "content"),
    "addComment": (ADD_COMMENT, "content"),
    "upsertProfile": (UPSERT_PROFILE, "displayName"),
    "createPlaylist": (CREATE_PLAYLIST, "name"),
}


@pytest.mark.parametrize(("mutation", "what"), BLANK_REFUSING.values(), ids=BLANK_REFUSING.keys())
async def test_blank_text_is_refused_like_empty_text(api: Api, mutation: str, what: str) -> None:
    token = await api.member("writer")
    post = await api.post(token, "a visible post")
    for name, blank in INVISIBLE.items():
        variables = {"c": blank, "p": post} if "$p" in mutation else {"c": blank}
        errors = (await api.raw(mutation, variables, token=token)).get("errors") or []
        assert [(e["extensions"]["code"], e["message"]) for e in errors] == [
            ("BAD_USER_INPUT", f"{what} must not be empty")
        ], name


async def test_posts_and_display_names_in_any_script_are_stored_as_written(api: Api) -> None:
    token = await api.member("writer")
    for name, visible in VISIBLE.items():
        await api.gql(UPSERT_PROFILE, {"c": visible}, token=token)
        post = await api.post(token, visible)
        query = "query($p: ID!) { post(id: $p) { content author { displayName } } }"
        data = await api.gql(query, {"p": post}, token=token)
        assert data["post"] == {"content": visible, "author": {"displayName": visible}}, name
