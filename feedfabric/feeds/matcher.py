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

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import ahocorasick_rs

__all__ = ["CONTEXTS", "Matcher", "Phrase", "context_bit", "context_mask", "fold", "words_of"]

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


# In ASCII text the word characters are exactly `\w`'s: letters, digits and `_`.
_ASCII_WORDS = re.compile(r"\w+", re.ASCII)


@dataclass(frozen=True, slots=True)
class Phrase:
    text: str
    whole_word: bool
    contexts: int


def words_of(texts: Iterable[str]) -> set[str]:
    """The words of folded texts: maximal runs of word characters (a whole-word phrase of one word occurs
    exactly where it is one of them)."""
    found: set[str] = set()
    for text in texts:
        if text.isascii():
            found.update(_ASCII_WORDS.findall(text))
            continue
        start = -1
        for i, ch in enumerate(text):
            if _is_word_char(ch):
                if start < 0:
                    start = i
            elif start >= 0:
                found.add(text[start:i])
                start = -1
        if start >= 0:
            found.add(text[start:])
    return found


class Matcher:
    """Compiled once per relations version (feeds.relations); immutable and shared across requests.

    Whole-word phrases of one word (most muted words, and the hashtag form of every phrase) are a set per
    context, tested against the set of a text's words; the others (several words, or matched anywhere)
    are patterns of one Aho-Corasick automaton, whose matches are checked for word boundaries.
    """

    __slots__ = ("_automaton", "_automaton_contexts", "_masks", "_token_contexts", "_tokens", "_whole", "contexts")

    def __init__(self, phrases: Iterable[Phrase]) -> None:
        patterns: list[str] = []
        whole: list[bool] = []
        masks: list[int] = []
        seen: dict[tuple[str, bool], int] = {}
        token_masks: dict[str, int] = {}
        for phrase in phrases:
            folded = fold(phrase.text).strip()
            if not folded:
                continue
            variants = {folded}
            compact = "".join(folded.split())
            if compact != folded:
                variants.add(compact)  # the hashtag of the same text
            for variant in variants:
                if phrase.whole_word and all(_is_word_char(c) for c in variant):
                    token_masks[variant] = token_masks.get(variant, 0) | phrase.contexts
                    continue
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
        self._tokens = {
            1 << i: frozenset(t for t, m in token_masks.items() if m & (1 << i)) for i in range(len(CONTEXTS))
        }
        self._token_contexts = 0
        for mask in token_masks.values():
            self._token_contexts |= mask
        self._automaton_contexts = 0
        for mask in masks:
            self._automaton_contexts |= mask
        # Which contexts any phrase applies to: a context no phrase names costs nothing.
        self.contexts = self._token_contexts | self._automaton_contexts
        # A DFA: the slowest to build (once per relations version) and the fastest to scan.
        self._automaton = (
            ahocorasick_rs.AhoCorasick(
                patterns,
                matchkind=ahocorasick_rs.MatchKind.Standard,
                implementation=ahocorasick_rs.Implementation.DFA,
            )
            if patterns
            else None
        )

    def words_for(self, bit: int) -> frozenset[str]:
        """The one-word phrases of a context (as its bit)."""
        return self._tokens[bit]

    def scans(self, bit: int) -> bool:
        """Whether a context (as its bit) has phrases the automaton must look for."""
        return bool(self._automaton_contexts & bit)

    def applies(self, context: str) -> bool:
        return bool(self.contexts & context_bit(context))

    def matches(self, texts: Iterable[str], context: str) -> bool:
        """Whether any phrase given `context` occurs in any of `texts` (a post's content, its tags, its
        original's)."""
        if not self.contexts & context_bit(context):
            return False
        return self.matches_folded([fold(t) for t in texts if t], context)

    def matches_folded(self, texts: Sequence[str], context: str) -> bool:
        """`matches` for texts already folded (`fold`)."""
        return self.matches_bit(texts, context_bit(context))

    def matches_bit(self, texts: Sequence[str], bit: int, words: set[str] | None = None) -> bool:
        """`matches_folded` with the context as its bit (`context_bit`) and, when given, the texts' words
        (`words_of`): live delivery folds a post and splits its words once for all the subscribers it
        reaches, each with a matcher of their own, so most of them cost one set test."""
        if not self.contexts & bit:
            return False
        if self._token_contexts & bit:
            found = words if words is not None else words_of(texts)
            if not found.isdisjoint(self._tokens[bit]):
                return True
        automaton = self._automaton
        if automaton is None or not self._automaton_contexts & bit:
            return False
        for text in texts:
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
