"""Muted words compiled into one matcher: every phrase of a member, every context, one automaton.

Matching is case-insensitive after NFKC and Unicode case folding, applied to
the phrases and to the text alike. A whole-word phrase matches only where the
characters on both sides are not word characters (Unicode letters, digits,
marks, `_`), so `cat` hides "a cat!" but not "concatenate". A phrase also
matches the hashtag of the same text: `spoiler` hides `#spoiler` (the `#` is
not a word character) and `new york` hides `#newyork` (the phrase without its
spaces is a pattern too).

One Aho-Corasick automaton (ahocorasick-rs) finds every occurrence of every
pattern in one pass, whatever the number of phrases: a post costs a few
microseconds against 1,000 phrases, where one regular expression per phrase
would cost a pass each. Each pattern carries the contexts of its phrase as a
bit mask, so a match counts only in the contexts its phrase was given.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import ahocorasick_rs

CONTEXTS = ("HOME", "FAVOURITES", "TAGS", "MENTIONS", "FOR_YOU", "NOTIFICATIONS", "COMMENTS")
ALL_CONTEXTS = (1 << len(CONTEXTS)) - 1


def context_bit(context: str) -> int:
    return 1 << CONTEXTS.index(context)


def context_mask(contexts: Sequence[str]) -> int:
    """Empty: every context (a phrase given no contexts applies everywhere)."""
    mask = 0
    for context in contexts:
        mask |= context_bit(context)
    return mask or ALL_CONTEXTS


def fold(text: str) -> str:
    """The form both phrases and texts are compared in."""
    return unicodedata.normalize("NFKC", text).casefold()


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_" or unicodedata.category(ch).startswith("M")


@dataclass(frozen=True, slots=True)
class Phrase:
    text: str
    whole_word: bool
    contexts: int


class Matcher:
    """Compiled once per relations version (feeds.relations); immutable and shared across requests."""

    __slots__ = ("_automaton", "_whole", "_masks", "contexts")

    def __init__(self, phrases: Iterable[Phrase]) -> None:
        patterns: list[str] = []
        whole: list[bool] = []
        masks: list[int] = []
        seen: dict[tuple[str, bool], int] = {}
        for phrase in phrases:
            folded = fold(phrase.text).strip()
            if not folded:
                continue
            variants = {folded}
            compact = "".join(folded.split())
            if compact != folded:
                variants.add(compact)  # the hashtag of the same text
            for variant in variants:
                key = (variant, phrase.whole_word)
                if key in seen:
                    masks[seen[key]] |= phrase.contexts
                    continue
                seen[key] = len(patterns)
                patterns.append(variant)
                whole.append(phrase.whole_word)
                masks.append(phrase.contexts)
        self._whole = whole
        self._masks = masks
        # Which contexts any phrase applies to: a context no phrase names costs nothing.
        self.contexts = 0
        for mask in masks:
            self.contexts |= mask
        self._automaton = (
            ahocorasick_rs.AhoCorasick(patterns, matchkind=ahocorasick_rs.MatchKind.Standard) if patterns else None
        )

    def applies(self, context: str) -> bool:
        return bool(self.contexts & context_bit(context))

    def matches(self, texts: Iterable[str], context: str) -> bool:
        """Whether any phrase given `context` occurs in any of `texts` (a post's content, its tags, its
        original's)."""
        automaton = self._automaton
        bit = context_bit(context)
        if automaton is None or not self.contexts & bit:
            return False
        for raw in texts:
            if not raw:
                continue
            text = fold(raw)
            for index, start, end in automaton.find_matches_as_indexes(text, overlapping=True):
                if not self._masks[index] & bit:
                    continue
                if not self._whole[index]:
                    return True
                if (start == 0 or not _is_word_char(text[start - 1])) and (
                    end == len(text) or not _is_word_char(text[end])
                ):
                    return True
        return False


EMPTY = Matcher(())
