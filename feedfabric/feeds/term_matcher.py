"""Moderation terms matched as whole-word muted words are: the one multi-pattern matcher of
feeds.matcher (ahocorasick-rs, NFKC and case folding, Unicode word boundaries, a phrase also
matching the hashtag of the same text), with every term given every context.

Two functions (`fold`, `compile_phrases`) are all the terms need, so the terms keep no matching
rules of their own: "spam" is in "SPAM!" and "#spam" and not in "spammer"; "sure thing" is in
"#surething" too.
"""

from __future__ import annotations

from dataclasses import dataclass

from feedfabric.feeds import matcher

__all__ = ["compile_phrases", "fold"]

_CONTEXT = matcher.CONTEXTS[0]  # any one: every term is given all of them


def fold(value: str) -> str:
    """The form terms are compared in (and kept unique by)."""
    return matcher.fold(value).strip()


@dataclass(frozen=True, slots=True)
class Matcher:
    """Every term of one version in one automaton."""

    compiled: matcher.Matcher

    def matches(self, text: str) -> bool:
        return self.compiled.matches((text,), _CONTEXT)


def compile_phrases(folded: list[str]) -> Matcher:
    phrases = [matcher.Phrase(p, True, matcher.ALL_CONTEXTS) for p in folded if p]
    return Matcher(matcher.Matcher(phrases) if phrases else matcher.EMPTY)
