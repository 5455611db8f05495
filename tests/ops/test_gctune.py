"""The API process's collector settings: startup objects frozen, young collections rarer."""

from __future__ import annotations

import gc

from feedfabric.ops.gctune import YOUNG_THRESHOLD, tune_for_serving


def test_tune_for_serving_freezes_what_exists_and_raises_the_young_threshold() -> None:
    before = gc.get_threshold()
    try:
        tune_for_serving()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
