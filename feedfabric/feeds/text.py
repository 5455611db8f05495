"""Validation of user text and the hashtags and @mentions parsed from it."""

from __future__ import annotations

import re

from feedfabric.errors import BadInput

HASHTAG = re.compile(r"(?<![\w#])#([A-Za-z0-9_]{1,50})\b")
MENTION = re.compile(r"(?<![\w@])@([A-Za-z0-9_]{1,30})\b")
USERNAME = re.compile(r"^[A-Za-z0-9_]{1,30}$")
TAG = re.compile(r"^[a-z0-9_]{1,50}$")


def clean_text(value: str, what: str, *, max_length: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise BadInput(f"{what} must be text")
    if "\x00" in value:
        raise BadInput(f"{what} must not contain NUL bytes")
    value = value.strip()
    if not value and not allow_empty:
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
