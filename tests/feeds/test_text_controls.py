"""Text members write is stored without terminal escapes, bells or bidi overrides (newlines and tabs stay),
and text with no visible character is blank, refused wherever empty text is. Hashtags and @mentions are
whole words of any script, found alike whatever the text's normalisation form."""

from __future__ import annotations

import unicodedata

import pytest
from feedfabric.core.errors import BadInput
from feedfabric.feeds.minilm import load_vocabulary
from feedfabric.feeds.text import clean_text, hashtags, mentions, normalise_tag

from tests.support import HOME, Api

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


# --- hashtags and @mentions in any script -------------------------------------------------------


def nfd(value: str) -> str:
    return unicodedata.normalize("NFD", value)


# The probe's post: NFC words of other scripts, and one word in NFD ("cafe", U+0301, "x").
PROBE = "#café #Straße #ÉTÉ #日本語 #cafe\u0301x"
PROBE_TAGS = ["café", "caféx", "strasse", "été", "日本語"]

# Text → the tags it carries, in NFC and in NFD alike.
HASHTAGS = {
    "probe": (PROBE, PROBE_TAGS),
    "a combining mark is part of the word": ("#nai\u0308ve #NAÏVE", ["naïve"]),
    "a mark with no precomposed letter": ("#x\u0301y", ["x\u0301y"]),
    "ß folds with its upper case": ("#Straße #STRASSE #strasse", ["strasse"]),
    "İ folds to i; ı stays apart": ("#İstanbul #ISTANBUL #istanbul #ıstanbul", ["istanbul", "ıstanbul"]),
    "final sigma": ("#ΟΔΟΣ #οδος #οδοσ", ["οδοσ"]),
    "Devanagari vowel signs and virama": ("#हिन्दी", ["हिन्दी"]),
    "a non-joiner inside a Persian word keeps it one word, folded without it": (
        "#نرم\u200cافزار #نرمافزار",
        ["نرمافزار"],
    ),
    "an invisible character inside a word is no tag of its own": (
        "#run\u200dning #run\u200bning #run\u00adning #running\ufe0f #Running",
        ["running"],
    ),
    "compatibility forms fold into the letters they stand for": ("#ｒｕｎｎｉｎｇ #ﬁne", ["fine", "running"]),
    "look-alikes of another script stay apart": ("#paypal #рaypal", ["paypal", "рaypal"]),
    "4 marks on one letter, not 5": ("#x\u0301\u0302\u0303\u0304 #b" + "\u0301" * 5, ["x\u0301\u0302\u0303\u0304"]),
    "a letter under a pile of marks is no tag": ("#a" + "\u0301" * 150, []),
    "a word holding what no identifier holds": ("#half½ #ok", ["ok"]),
    "no word starts with a mark": ("#\u0301abc", []),
    "no '#' inside a word": ("é#tag x\u0301#tag", []),
    "a zero-width space ends the word": ("#cafe\u200b!", ["cafe"]),
    "ASCII as before": ("#Running #trail_2 #123 #a#b ##no", ["123", "a", "running", "trail_2"]),
    "50 characters, marks not counted": ("#" + "e\u0301" * 50, ["é" * 50]),
    "a longer word gives no tag, not a cut one": ("#" + "e\u0301" * 51, []),
}

# What tagFeed, followTag and the REST tag feed are given → the tag they read or follow.
NORMALISED = {
    "café": "café",
    "#CAFE\u0301": "café",
    "Straße": "strasse",
    "#İSTANBUL": "istanbul",
    nfd("#İstanbul"): "istanbul",
    "日本語": "日本語",
    "#Running": "running",
    "trail_2": "trail_2",
    "cafe\u200b": "cafe",
    "#run\u200dning": "running",
}
NOT_TAGS = {
    "^tag may hold only letters, digits, combining marks and '_'$": [
        "bad tag!",
        "#",
        "\u0301abc",
        "ca-fe",
    ],
    "^tag has more than 4 combining marks on one character$": ["b" + "\u0301" * 5, "b" + "\u0301" * 201],
    "^tag is longer than 50 characters": ["é" * 51, nfd("é" * 51)],
}


def test_hashtags_are_whole_words_of_any_script_folded_alike_in_nfc_and_nfd() -> None:
    for name, (content, tags) in HASHTAGS.items():
        for form in ("NFC", "NFD"):
            assert hashtags(unicodedata.normalize(form, content)) == sorted(tags), (name, form)
        for tag in tags:  # a stored tag reads and follows as itself
            assert normalise_tag(tag) == tag == normalise_tag("#" + nfd(tag)), name
    for given, tag in NORMALISED.items():
        assert normalise_tag(given) == tag, given
    for refusal, refused in NOT_TAGS.items():
        for given in refused:
            with pytest.raises(BadInput, match=refusal):
                normalise_tag(given)
    # Inferred topics share post_tags and tag follows with hashtags: their names are stored tags.
    assert all(normalise_tag(topic) == topic for topic in load_vocabulary()["topics"])


def test_a_mention_is_never_cut_from_a_longer_word() -> None:
    cases = {
        "@maya\u0301": [],
        "@mayaé": [],
        "@maya\u200cé": [],
        "@maya_é": [],
        "x\u0301@maya": [],
        "é@maya": [],
        "maya@example.com": [],
        "@" + "a" * 31: [],
        "@Maya. (@theo) @ava's @ava\u200b": ["ava", "maya", "theo"],
    }
    for content, names in cases.items():
        for form in ("NFC", "NFD"):
            assert mentions(unicodedata.normalize(form, content)) == names, (content, form)


TAG_FEED = "query($t: String!) { tagFeed(tag: $t) { edges { node { id } } } }"
FOLLOW_TAG = "mutation($t: String!) { followTag(tag: $t) }"
UNFOLLOW_TAG = "mutation($t: String!) { unfollowTag(tag: $t) }"


async def test_tag_feed_and_follow_tag_take_a_tag_in_any_script_and_form(api: Api) -> None:
    maya = await api.member("maya")
    reader = await api.member("reader")
    probe = await api.post(maya, PROBE)
    decomposed = await api.post(maya, nfd("Über #CAFÉ"))
    ascii_post = await api.post(maya, "#Cafe")
    data = await api.gql("query($p: ID!) { post(id: $p) { tags } }", {"p": probe})
    assert sorted(data["post"]["tags"]) == sorted(PROBE_TAGS)

    async def tag_feed(tag: str) -> list[str]:
        return [e["node"]["id"] for e in (await api.gql(TAG_FEED, {"t": tag}))["tagFeed"]["edges"]]

    for tag in ("café", "#CAFÉ", nfd("Café"), "#CAFE\u0301"):
        assert await tag_feed(tag) == [decomposed, probe], tag
    for path in ("/userfeed/tags/caf%C3%A9/posts", "/userfeed/tags/%23CAFE%CC%81/posts"):
        assert [p["id"] for p in (await api.rest("GET", path)).json()["posts"]] == [decomposed, probe], path
    assert await tag_feed("straße") == await tag_feed("STRASSE") == [probe]
    assert await tag_feed("日本語") == [probe]
    # ASCII as before, and the NFD "caféx" no longer lands under "cafe"
    assert await tag_feed("#CAFE") == [ascii_post]

    for tag in (nfd("#CAFÉ"), "café"):
        assert (await api.gql(FOLLOW_TAG, {"t": tag}, token=reader))["followTag"]
    assert (await api.gql("{ followedTags }", token=reader))["followedTags"] == ["café"]
    home = await api.gql(HOME, {"first": 20}, token=reader)
    assert [e["node"]["id"] for e in home["homeFeed"]["edges"]] == [decomposed, probe]
    await api.gql(UNFOLLOW_TAG, {"t": "Cafe\u0301"}, token=reader)
    assert (await api.gql("{ followedTags }", token=reader))["followedTags"] == []
