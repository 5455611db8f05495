"""A multipart body's digest by what it holds, not by how it was framed.

A client retrying an upload frames it afresh: a new boundary, perhaps its
parts in another order. So the idempotency fingerprint (feedfabric.http.idempotency)
compares multipart bodies part by part: each part's name with its content's
SHA-256, the JSON parts of a GraphQL multipart request (`operations`, `map`)
as the values they hold (keys sorted, as a JSON body is compared). A
`deletePost` sent under the key of a `createPost` then differs, as do two
uploads of different files. A body that does not parse as multipart is
compared byte for byte.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

JSON_PARTS = frozenset({"operations", "map"})
# The GraphQL multipart request's JSON parts are small (the form's parts beside the file are bounded at
# 64 kB by the view); a larger one is compared by its bytes rather than held to be parsed.
MAX_JSON_PART = 64 * 1024


class MultipartDigest:
    """Fed the body chunk by chunk; `hexdigest` once it is whole."""

    def __init__(self, content_type: str) -> None:
        self.raw = hashlib.sha256()
        self.entries: list[bytes] = []
        self.failed = False
        self._header_name = bytearray()
        self._header_value = bytearray()
        self._name = ""
        self._json = bytearray()
        self._content = hashlib.sha256()
        boundary = parse_options_header(content_type)[1].get(b"boundary")
        self.parser: MultipartParser | None = None
        if boundary:
            callbacks: Any = {
                "on_part_begin": self._begin,
                "on_header_field": lambda data, start, end: self._header_name.extend(data[start:end]),
                "on_header_value": lambda data, start, end: self._header_value.extend(data[start:end]),
                "on_header_end": self._header_end,
                "on_part_data": self._data,
                "on_part_end": self._end,
            }
            self.parser = MultipartParser(boundary, callbacks)

    def add(self, chunk: bytes) -> None:
        self.raw.update(chunk)
        if self.parser is None or self.failed:
            return
        try:
            self.parser.write(chunk)
        except MultipartParseError:
            self.failed = True

    def hexdigest(self) -> str:
        if self.parser is None or self.failed or not self.entries:
            return "raw:" + self.raw.hexdigest()
        digest = hashlib.sha256()
        for entry in sorted(self.entries):
            digest.update(len(entry).to_bytes(4, "big") + entry)
        return "parts:" + digest.hexdigest()

    def _begin(self) -> None:
        self._name = ""
        self._json.clear()
        self._content = hashlib.sha256()

    def _header_end(self) -> None:
        if bytes(self._header_name).strip().lower() == b"content-disposition":
            name = parse_options_header(bytes(self._header_value))[1].get(b"name", b"")
            self._name = name.decode("utf-8", "replace")
        self._header_name.clear()
        self._header_value.clear()

    def _data(self, data: bytes, start: int, end: int) -> None:
        self._content.update(data[start:end])
        if self._name in JSON_PARTS and len(self._json) <= MAX_JSON_PART:
            self._json.extend(data[start:end])

    def _end(self) -> None:
        content = self._content.hexdigest().encode()
        if self._name in JSON_PARTS and len(self._json) <= MAX_JSON_PART:
            try:
                content = orjson.dumps(orjson.loads(bytes(self._json)), option=orjson.OPT_SORT_KEYS)
            except (orjson.JSONDecodeError, orjson.JSONEncodeError):
                pass
        self.entries.append(self._name.encode() + b"\x00" + content)
