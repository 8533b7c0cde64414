"""CPython's cyclic garbage collector kept off the Lab's history: the one place it is steered.

Stepping a run, replaying a log, restoring a snapshot or assigning a large group allocates
objects that all survive (the trace keeps its events, a group keeps its members), so the
collector's passes over an ever larger heap find nothing: they make the work grow faster
than linearly. Bulk work therefore runs with the collector paused (``collector_paused``);
none of it creates reference cycles, so nothing is lost by waiting: what earlier work left
behind is collected once the collector runs again. A process that only serves real clients
(``kip-lab serve``) steps the Lab a request at a time for as long as it runs, so there the
collector runs on a clock instead (``serve_until``).
"""

from __future__ import annotations

import gc
import threading
import time
from contextlib import ContextDecorator

HISTORY_FREEZE_S = 0.25  # how often a serving process collects, then freezes what survived


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


def serve_until(stop: threading.Event, duration_s: float | None) -> None:
    """Wait until ``stop`` is set or ``duration_s`` has passed, collecting on a clock meanwhile:
    for a process whose other threads step a Lab as requests arrive (``kip-lab serve``).

    The Lab keeps every step it has taken (time travel), so its history only grows, and the
    collector, run by allocation counts, would scan all of it again and again: under load, a
    third of the server's CPU. Instead, automatic collection is off while this waits; every
    ``HISTORY_FREEZE_S`` the objects made since the last time are collected (frozen ones are not
    scanned) and what survives is frozen (``gc.freeze``): never scanned again. The price, small
    in a process that only serves: a reference cycle that becomes garbage once frozen stays in
    memory until the process ends."""
    gc.collect()
    gc.freeze()  # what starting made: imported modules, the Lab as built
    automatic = gc.isenabled()
    gc.disable()
    try:
        deadline = None if duration_s is None else time.monotonic() + duration_s
        while True:
            wait = HISTORY_FREEZE_S if deadline is None else min(HISTORY_FREEZE_S, deadline - time.monotonic())
            if wait <= 0 or stop.wait(wait):
                return
            gc.collect()
            gc.freeze()
    finally:
        if automatic:
            gc.enable()
