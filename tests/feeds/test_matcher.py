"""The muted-word matcher alone: folding, word boundaries, hashtags, contexts, and its two paths agreeing."""

from __future__ import annotations

import pytest
from feedfabric.feeds.matcher import CONTEXTS, Matcher, Phrase, context_mask, fold, words_of
from hypothesis import given
from hypothesis import strategies as st


def matches(phrase: str, text: str, whole: bool = True, contexts: tuple[str, ...] = (), where: str = "HOME") -> bool:
    return Matcher([Phrase(phrase, whole, context_mask(list(contexts)))]).matches([text], where)


@pytest.mark.parametrize(
    ("phrase", "text", "whole", "hidden"),
    [
        ("spoiler", "big #spoiler inside", True, True),
        ("spoiler", "no SPOILERS here", True, False),
        ("spoil", "no SPOILERS here", False, True),
        ("Straße", "die STRASSE ist lang", True, True),
        ("new york", "off to #NewYork", True, True),
        ("new york", "in new york now", True, True),
        ("ｃａｔ", "a cat!", True, True),
        ("cat", "concatenate", True, False),
        ("cat", "cat_food", True, False),
        ("café", "un CAFÉ noir", True, True),
        ("cafe", "un café", True, False),
        ("c++", "I like c++ a lot", True, True),
        ("ΣΊΣΥΦΟΣ", "ο σίσυφος", True, True),
    ],
)
def test_matching(phrase: str, text: str, whole: bool, hidden: bool) -> None:
    assert matches(phrase, text, whole) is hidden


def test_contexts() -> None:
    assert matches("x", "x", contexts=("TAGS",), where="TAGS")
    assert not matches("x", "x", contexts=("TAGS",), where="HOME")
    assert all(matches("x", "x", where=c) for c in CONTEXTS)
    assert not Matcher(()).applies("HOME")


@given(
    st.lists(st.sampled_from(["ab", "b", "a_b", "ça", "é", "x"]), min_size=1, max_size=4),
    st.text(alphabet="abcxyé ç_#-É", max_size=30),
)
def test_one_word_phrases_match_exactly_the_words_of_the_text(phrases: list[str], text: str) -> None:
    """The word-set path against the definition: a whole-word phrase occurs where it is one whole word."""
    matcher = Matcher([Phrase(p, True, context_mask([])) for p in phrases])
    assert matcher.matches([text], "HOME") is any(fold(p) in words_of([fold(text)]) for p in phrases)


@given(
    st.lists(st.sampled_from(["ab", "b c", "a_", "ç", "é x"]), min_size=1, max_size=4),
    st.text(alphabet="abcxyé ç_#-É", max_size=30),
)
def test_phrases_matched_anywhere_are_substrings(phrases: list[str], text: str) -> None:
    """The automaton path against the definition: a phrase matched anywhere is a substring once folded."""
    matcher = Matcher([Phrase(p, False, context_mask([])) for p in phrases])
    folded = fold(text)
    expected = any(fold(p) in folded or "".join(fold(p).split()) in folded for p in phrases)
    assert matcher.matches([text], "HOME") is expected
