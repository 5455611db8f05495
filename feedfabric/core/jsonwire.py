"""JSON on the wire: every response body, GraphQL message and json/jsonb column goes through orjson.

The standard library's encoder was a measurable share of a REST home-feed
page's API time (docs/benchmarks.md); orjson's output is the same JSON (compact, keys in order), with non-ASCII
text as UTF-8 instead of \\u escapes.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["dumps_text", "loads"]


def dumps_text(value: Any) -> str:
    return orjson.dumps(value).decode()


def loads(data: str | bytes) -> Any:
    return orjson.loads(data)
