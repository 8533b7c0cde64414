"""Holding off CPython's cyclic garbage collector while a large, cycle-free computation runs."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector for the duration (a ``with`` block or, called, a decorator).

    A large assignment allocates one list per (member, topic), every one of which survives, so the
    collector's passes during it find nothing and cost a third of the run time at 100,000 partitions.
    Code run under this creates no reference cycles, so nothing is lost by waiting; the collector runs
    again as before once it ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
