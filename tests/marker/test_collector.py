"""The marker's collector set-up (`services.marker._collector`), on this test process's own
collector, put back afterwards."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from services.marker._collector import YOUNG_THRESHOLD, settle_heap


@pytest.fixture
def restored_collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_collector")
def test_settle_heap_freezes_what_is_alive_and_widens_the_youngest_generation() -> None:
    kept = [object() for _ in range(10)]
    middle, oldest = gc.get_threshold()[1:]
    settle_heap()
    assert gc.get_freeze_count() > len(kept)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, oldest)


@pytest.mark.usefixtures("restored_collector")
def test_cycles_made_after_settling_are_still_collected() -> None:
    settle_heap()

    class Node:
        def __init__(self) -> None:
            self.other: Node | None = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b
    assert gc.collect() >= 2
