"""Garbage-collector settings for the API process, whose event loop every open socket shares.

A full (generation 2) collection stops the loop for as long as it takes to
walk every tracked object, and an API process holding subscriptions has a
lot of them: with 1,000 connected subscribers one took 230 ms (3,000:
460 ms), and a post published meanwhile reached all 1,000 followers that
much later; it set the realtime benchmark's p99 (docs/benchmarks.md).

- What exists before serving (modules, the schema, settings: about 95,000
  objects) lives as long as the process, so it is frozen out of every
  collection (`gc.freeze`).
- Young collections run every 10,000 net allocations instead of 700. Full
  collections follow young ones (at most one per 100), so they come about
  14 times less often; short-lived cycles wait a little longer to be freed.
  At 50,000 a young collection freeing GraphQL pages' cycles (about 370
  objects a page) paused the loop 52-75 ms and set the home feed's p99
  (76-93 ms at 80 pages/s, against 29-40 ms at 10,000); the realtime
  figures are the same at both (docs/benchmarks.md). Since GraphQL
  operations leave no cycles (feedfabric/schema/acyclic.py), a home-feed
  page no longer gives the collector work: two young collections in 2,400
  pages.

Only `feedfabric api` and `feedfabric dev` call this, after importing the
app and before serving; tests and other processes keep Python's defaults.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def tune_for_serving() -> None:
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
