"""Validation of user text and the hashtags and @mentions parsed from it."""

from __future__ import annotations

import re
import unicodedata

from feedfabric.core.errors import BadInput

__all__ = ["clean_text", "hashtags", "mentions", "normalise_tag"]

USERNAME = re.compile(r"^[A-Za-z0-9_]{1,30}$")


# C0 and C1 controls but tab and newline (ESC starts terminal escapes, BEL rings), DEL, and the bidi
# embeddings, overrides and isolates that reorder what a reader sees (Trojan Source, CVE-2021-42574).
# Carriage returns become newlines first; NUL is refused outright.
_CONTROL = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def strip_controls(value: str) -> str:
    if "\r" in value:
        value = value.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", value)


# What draws nothing by itself. Whitespace (str.isspace: the Zs/Zl/Zp separators and the whitespace
# controls); controls and format characters (Cc, Cf: zero-width spaces and joiners, direction marks,
# the byte-order mark, word joiners, tag characters); combining marks (Mn, Me), which draw only on a
# visible base and include the variation selectors; and the letters and symbols Unicode defines but
# fonts draw empty, used to pass blank-name checks: the Hangul fillers and the braille blank.
# Unassigned code points (Cn) count as visible: emoji newer than this interpreter's Unicode tables
# are unassigned to it. Private-use characters (Co) count as visible too: a font may draw them.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me"})
_BLANK_LOOKING = frozenset(
    "\u115f\u1160\u3164\uffa0"  # Hangul choseong, jungseong, compatibility and halfwidth fillers
    "\u2800"  # braille pattern blank
    "\u180e"  # Mongolian vowel separator (a space before Unicode 6.3)
)


def is_visible(char: str) -> bool:
    """Whether one character draws something on its own; see _INVISIBLE_CATEGORIES."""
    return not (char.isspace() or char in _BLANK_LOOKING or unicodedata.category(char) in _INVISIBLE_CATEGORIES)


def is_blank(value: str) -> bool:
    """Text a reader sees as empty: no character of it is visible. str.strip() alone misses zero-width
    and filler characters, which let posts and display names through that show nothing."""
    return not any(is_visible(char) for char in value)


def clean_text(value: str, what: str, *, max_length: int, allow_empty: bool = False) -> str:
    """User text as stored: controls stripped (newlines and tabs kept), trimmed, bounded; text with no
    visible character is blank (stored empty when `allow_empty`, else refused)."""
    if not isinstance(value, str):
        raise BadInput(f"{what} must be text")
    if "\x00" in value:
        raise BadInput(f"{what} must not contain NUL bytes")
    value = strip_controls(value).strip()
    if is_blank(value):
        if allow_empty:
            return ""
        raise BadInput(f"{what} must not be empty")
    if len(value) > max_length:
        raise BadInput(f"{what} is longer than {max_length} characters")
    return value


# --- hashtags and @mentions -------------------------------------------------------------------
#
# A word, for hashtags and mentions, is a run of letters and numbers of any script (str.isalnum, as
# re's \w), '_' and combining marks (Mn, Mc, Me: accents, Indic vowel signs and viramas), with
# default-ignorable code points (zero-width joiners and spaces, soft hyphens, ...) kept between two of
# them, so no invisible character cuts a word short. A combining mark is part of the word it sits on,
# so NFD text ("cafe" + U+0301) is never cut into a shorter word; a word begins with a letter, number
# or '_'. Text is put in NFC first, so whatever form the keyboard produced, the words found are the same.
#
# A word is a tag under Unicode's identifier rules (UAX #31, with its case-insensitive comparison):
# folded by NFKC and case folding with the default ignorables removed (fold_tag), it must begin with
# an XID_Start character, '_' or a decimal digit, and go on with XID_Continue characters, and no base
# character may carry more than MAX_MARKS_PER_BASE combining marks. So a word holding something no
# identifier holds ("½") gives no tag, an invisible character inside a word does not make it a
# tag of its own, and a letter under a pile of marks is no tag.

TAG_MAX_CHARACTERS = 50
# Combining marks do not count as characters; this bounds them (and so the stored tag) in all.
TAG_MAX_CODE_POINTS = 200
# Marks on one base character, in NFC: Vietnamese needs 1, Indic conjuncts 2, Tibetan stacks up to 4.
MAX_MARKS_PER_BASE = 4
# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), which Python does not expose.
_DEFAULT_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff]"
)


def _is_ignorable(char: str) -> bool:
    return _DEFAULT_IGNORABLE.match(char) is not None


def _is_mark(char: str) -> bool:
    return unicodedata.category(char)[0] == "M"


def _is_word_start(char: str) -> bool:
    return char.isalnum() or char == "_"


def _in_word(char: str) -> bool:
    return char.isalnum() or char == "_" or _is_mark(char)


def _word_end(text: str, start: int) -> int:
    """The index after the word running from `start` (`start` itself when no word character is there)."""
    end = start
    while end < len(text):
        if _in_word(text[end]):
            end += 1
            continue
        after = end
        while after < len(text) and _is_ignorable(text[after]):
            after += 1
        if after == end or after == len(text) or not _is_word_start(text[after]) or end == start:
            break
        end = after
    return end


def _words_after(text: str, sign: str) -> list[str]:
    """The whole word after each `sign` that no word (nor another `sign`) runs into; text in NFC."""
    text = unicodedata.normalize("NFC", text)
    words = []
    at = text.find(sign)
    while at >= 0:
        before = text[at - 1] if at else ""
        if not (before == sign or (before and _in_word(before))):
            end = _word_end(text, at + 1)
            if end > at + 1 and _is_word_start(text[at + 1]):
                words.append(text[at + 1 : end])
        at = text.find(sign, at + 1)
    return words


def fold_tag(word: str) -> str:
    """A tag's one stored form: UAX #31's caseless identifier form, NFKC and case-folded with the
    default ignorables removed (Unicode's NFKC_Casefold), returned in NFC. str.casefold, not lower: it
    is the same for a word and its upper case ("Straße", "STRASSE" and "strasse" all fold to
    "strasse"). Folding knows no language, so "I" folds to "i" (Turkish "ı" stays apart); "İ" folds to
    "i", its lower case wherever it is written, rather than to "i" and a combining dot above. NFKC
    folds compatibility forms (fullwidth "ｒｕｎ", the ligature "ﬁ") into the letters they stand for;
    letters of different scripts that merely look alike (Cyrillic "о", Latin "o") stay apart, as
    Mastodon's tags do. Folding a tag again leaves it as it is."""
    folded = unicodedata.normalize("NFKC", word).casefold().replace("i\u0307", "i")
    folded = _DEFAULT_IGNORABLE.sub("", unicodedata.normalize("NFKC", folded))
    return unicodedata.normalize("NFC", folded)


def tag_length(tag: str) -> int:
    """Characters as a reader counts them: a letter, digit or '_' with the combining marks on it is one."""
    return sum(1 for char in tag if not _is_mark(char))


def _is_word(value: str) -> bool:
    """A folded tag under UAX #31: XID_Start (str.isidentifier on one character), '_' or a decimal
    digit first, XID_Continue after."""
    if not value or not (value[0].isidentifier() or unicodedata.category(value[0]) == "Nd"):
        return False
    return ("_" + value).isidentifier()


def _marks_fit(tag: str) -> bool:
    run = 0
    for char in tag:
        run = run + 1 if _is_mark(char) else 0
        if run > MAX_MARKS_PER_BASE:
            return False
    return True


def _fits(tag: str) -> bool:
    return tag_length(tag) <= TAG_MAX_CHARACTERS and len(tag) <= TAG_MAX_CODE_POINTS


def hashtags(text: str) -> list[str]:
    """The folded tags of the #words of the text. A word longer than a tag may be gives no tag (a
    fragment of it would put the post under a tag its author never wrote)."""
    return sorted(
        {tag for tag in map(fold_tag, _words_after(text, "#")) if _is_word(tag) and _marks_fit(tag) and _fits(tag)}
    )


def mentions(text: str) -> list[str]:
    """Lower-cased usernames of the @words of the text. Usernames are ASCII: an @word with anything
    else in it (an accent, a combining mark, a letter of another script) mentions no one, rather than
    the member named by its ASCII start."""
    return sorted({word.lower() for word in _words_after(text, "@") if USERNAME.match(word)})


def normalise_tag(value: str) -> str:
    """A tag as given to tagFeed, followTag and the REST tag feed, in the form hashtags() stores: an
    optional leading '#', then one word, NFC and case-folded."""
    tag = fold_tag(clean_text(value, "tag", max_length=4 * TAG_MAX_CODE_POINTS).lstrip("#"))
    if not _is_word(tag):
        raise BadInput("tag may hold only letters, digits, combining marks and '_'")
    if not _marks_fit(tag):
        raise BadInput(f"tag has more than {MAX_MARKS_PER_BASE} combining marks on one character")
    if not _fits(tag):
        raise BadInput(
            f"tag is longer than {TAG_MAX_CHARACTERS} characters (a letter with its combining marks"
            f" counts as one) or {TAG_MAX_CODE_POINTS} code points"
        )
    return tag


def username(value: str) -> str:
    value = clean_text(value, "username", max_length=30)
    if not USERNAME.match(value):
        raise BadInput("username may hold only letters, digits and '_' (1 to 30)")
    return value


def url(value: str | None, what: str) -> str | None:
    if value is None or value == "":
        return None
    value = clean_text(value, what, max_length=500)
    if not re.match(r"^https?://[^\s]+$", value):
        raise BadInput(f"{what} must be an http(s) URL")
    return value
