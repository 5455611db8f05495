"""Validation of user text and the hashtags and @mentions parsed from it."""

from __future__ import annotations

import re
import unicodedata

from feedfabric.errors import BadInput

HASHTAG = re.compile(r"(?<![\w#])#([A-Za-z0-9_]{1,50})\b")
MENTION = re.compile(r"(?<![\w@])@([A-Za-z0-9_]{1,30})\b")
USERNAME = re.compile(r"^[A-Za-z0-9_]{1,30}$")
TAG = re.compile(r"^[a-z0-9_]{1,50}$")


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


def hashtags(text: str) -> list[str]:
    return sorted({m.lower() for m in HASHTAG.findall(text)})


def mentions(text: str) -> list[str]:
    return sorted({m.lower() for m in MENTION.findall(text)})


def normalise_tag(value: str) -> str:
    tag = clean_text(value, "tag", max_length=51).lstrip("#").lower()
    if not TAG.match(tag):
        raise BadInput("tag may hold only letters, digits and '_' (at most 50)")
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
