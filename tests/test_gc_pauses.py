"""The collector in a node process: a slow full collection freezes what it walked, the young
generation is collected less often; only while a node or leaf runs."""

from __future__ import annotations

import gc

import pytest

from feds import gc_pauses
from feds.values import record


def test_a_slow_full_collection_freezes_the_objects_it_walked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert gc.get_freeze_count() == 0
    with gc_pauses.pauses_bounded():
        held = [record("row", i, [i]) for i in range(10_000)]
        monkeypatch.setattr(gc_pauses, "SLOW", 0.0)  # every full collection counts as slow
        gc.collect(1)  # not a full collection
        gc.collect()
        assert gc.get_freeze_count() >= 2 * len(held)  # each record and its list at least
        with gc_pauses.pauses_bounded():  # nested: one watch
            assert gc.callbacks.count(gc_pauses._watch) == 1
        assert gc_pauses._watch in gc.callbacks
    assert gc_pauses._watch not in gc.callbacks
    assert gc.get_freeze_count() == 0, "the process is left as it was"


def test_a_node_collects_its_young_generation_less_often_and_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    with gc_pauses.node_collection():
        assert gc.get_threshold() == (gc_pauses.YOUNG_THRESHOLD, *before[1:])
        assert gc_pauses._watch in gc.callbacks, "and bounds its pauses"
    assert gc.get_threshold() == before
    assert gc_pauses._watch not in gc.callbacks
