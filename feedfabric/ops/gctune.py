"""Garbage-collector settings for the API process, whose event loop every open socket shares.

A full (generation 2) collection stops the loop for as long as it takes to
walk every tracked object, and an API process holding subscriptions has a
lot of them, and a post published meanwhile reaches every follower that much
later: full collections set the realtime benchmark's p99 (docs/benchmarks.md).

- What exists before serving (modules, the schema, settings) lives as long as the process, so it is frozen out of every
  collection (`gc.freeze`).
- Young collections run every 10,000 net allocations instead of 700. Full
  collections follow young ones (at most one per 100), so they come far less
  often; short-lived cycles wait a little longer to be freed. A much larger
  threshold made each young collection long enough to set the home feed's
  p99 (docs/benchmarks.md). A GraphQL operation's state is one reference
  cycle (graphql-core's executor), freed by a young collection: it never
  reaches the old generation (tests/adapter/test_operation_garbage.py).

Only `feedfabric api` and `feedfabric dev` call this, after importing the
app and before serving; tests and other processes keep Python's defaults.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "tune_for_serving"]

YOUNG_THRESHOLD = 10_000


def tune_for_serving() -> None:
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
