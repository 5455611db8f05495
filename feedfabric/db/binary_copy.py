"""Postgres's binary COPY format: its framing, which a writer (db.feed_log) wraps its records in, and a
parser of a stream of non-null float8 columns into numpy blocks as it arrives.

Every record then has the same size (a 2-byte field count, and per field a 4-byte length and 8
bytes), so a chunk parses with one `np.frombuffer` instead of a Python loop per row, and the caller
keeps only what it wants of each block.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["HEADER", "NULL", "TRAILER", "Float8Records"]

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
HEADER = _SIGNATURE + bytes(8)  # the signature, no flags, no header extension
TRAILER = b"\xff\xff"
NULL = b"\xff\xff\xff\xff"  # a field's length when it is NULL


class Float8Records:
    """A COPY `sink`: each whole record received goes to `consume` as a row of an (n, columns) block."""

    def __init__(self, columns: int, consume: Callable[[np.ndarray], None]) -> None:
        self.columns = columns
        self.consume = consume
        self.dtype = np.dtype(
            [("count", ">i2")] + [f for n in range(columns) for f in ((f"len{n}", ">i4"), (f"v{n}", ">f8"))]
        )
        self.values = [f"v{n}" for n in range(columns)]
        self.pending = b""
        self.header_seen = False
        self.done = False
        self.rows = 0

    async def __call__(self, chunk: bytes) -> None:
        data = self.pending + chunk
        if not self.header_seen:
            if len(data) < 19:
                self.pending = data
                return
            if not data.startswith(_SIGNATURE):
                raise ValueError("not a binary COPY stream")
            extension = int.from_bytes(data[15:19], "big")
            if len(data) < 19 + extension:
                self.pending = data
                return
            data = data[19 + extension :]
            self.header_seen = True
        whole = len(data) // self.dtype.itemsize
        if whole:
            records = np.frombuffer(data, dtype=self.dtype, count=whole)
            if not (records["count"] == self.columns).all():
                raise ValueError(f"expected {self.columns} columns in every record")
            if any((records[f"len{n}"] != 8).any() for n in range(self.columns)):
                raise ValueError("every column must be a non-null float8")
            block = np.column_stack([records[v].astype(np.float64) for v in self.values])
            self.rows += whole
            self.consume(block)
        rest = data[whole * self.dtype.itemsize :]
        # The stream ends with a 2-byte -1; a record begins with its field count, never -1.
        if rest == TRAILER:
            self.done = True
            rest = b""
        self.pending = rest
