"""Bulk work without CPython's cyclic garbage collector: the one place it is paused.

Stepping a run, replaying a log, restoring a snapshot or assigning a large group allocates
objects that all survive (the trace keeps its events, a group keeps its members), so the
collector's passes over an ever larger heap find nothing: they make the work grow faster
than linearly. None of that work creates reference cycles, so nothing is lost by waiting:
what earlier work left behind is collected once the collector runs again.
"""

from __future__ import annotations

import gc
from contextlib import ContextDecorator


class collector_paused(ContextDecorator):
    """Hold off the cyclic collector for the block (nests; usable as a decorator too).

    A class rather than a generator: leaving the block allocates nothing, so the collection
    the paused work owes runs at the caller's next allocation, not inside the block.
    """

    def __init__(self) -> None:
        self._was_enabled: list[bool] = []  # one entry per block entered, for nesting and recursion

    def __enter__(self) -> None:
        self._was_enabled.append(gc.isenabled())
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was_enabled.pop():
            gc.enable()
