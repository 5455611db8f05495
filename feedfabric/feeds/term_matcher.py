"""Whole-word phrase matching after NFKC and Unicode case folding, for moderation terms.

Behind two functions (`fold`, `compile_phrases`) so the one multi-pattern matcher the muted words use
can take its place without a caller changing. A phrase matches where no word character (a letter,
number, '_' or combining mark) touches either end, so "spam" is in "#spam" and "spam!" but not in
"spammer"; the text and the phrases are folded alike (feeds.text.fold_tag), so case, width and
compatibility forms do not matter.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from feedfabric.feeds.text import fold_tag


def fold(value: str) -> str:
    """The form phrases and texts are compared in (NFKC_Casefold, as hashtags are stored)."""
    return fold_tag(value)


def _in_word(char: str) -> bool:
    return char.isalnum() or char == "_" or unicodedata.category(char)[0] == "M"


@dataclass(frozen=True, slots=True)
class Matcher:
    """Every phrase of one version compiled into one pattern: one pass over a text however many."""

    pattern: re.Pattern[str] | None

    def matches(self, text: str) -> bool:
        if self.pattern is None:
            return False
        folded = fold(text)
        for found in self.pattern.finditer(folded):
            start, end = found.span()
            # re's \w knows no combining marks: a mark on either side still joins the phrase to a word.
            if (start == 0 or not _in_word(folded[start - 1])) and (end == len(folded) or not _in_word(folded[end])):
                return True
        return False


def compile_phrases(folded: list[str]) -> Matcher:
    """`folded` are phrases already folded; longest first so an alternation tries a whole longer
    phrase before a shorter one that begins it. The lookarounds skip most non-words in the engine."""
    phrases = sorted({p for p in folded if p}, key=lambda p: (-len(p), p))
    if not phrases:
        return Matcher(None)
    alternation = "|".join(re.escape(p) for p in phrases)
    return Matcher(re.compile(f"(?<!\\w)(?:{alternation})(?!\\w)"))
