"""The garbage collector's share of a Mark: kept small once the marker is up.

Measured with `benchmarks.marker --probe` (32 concurrent 100-ledger Marks): with Python's
defaults the collector took 9-13 µs of CPU per PDLI on the event loop's thread, a tenth of
the whole process's, mostly in full collections (each walking every object the imports, the
gRPC server and the clients made at start-up, tens of milliseconds each) and in generation-1
collections over the thousands of objects that a Mark's PDLIs in flight keep alive. Freezing
what exists once the marker is ready keeps the start-up objects out of every later walk,
and a larger first generation lets the in-flight ones die before a collection sees them:
together 2-3 µs per PDLI.

Only the cyclic collector is concerned: reference counting still frees every acyclic object
at once, so memory held by garbage grows by at most one generation's worth of cycles.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""Allocations (of tracked objects, minus deallocations) between two collections of the
youngest generation; Python's default is 700."""


def settle_heap() -> None:
    """Collect once, then move every surviving object out of the collector's sight (it stays
    alive and reference-counted as before) and widen the youngest generation. Called once,
    when the marker has built everything it keeps for its lifetime."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
