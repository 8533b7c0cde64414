"""The one place the cyclic garbage collector is steered: held off during bulk work
(``collector_paused``), run on a clock while a process serves (``serve_until``)."""

from __future__ import annotations

import gc
import threading
import time

import pytest

from kip_lab.runtime.collector import HISTORY_FREEZE_S, collector_paused, serve_until


def test_blocks_nest_and_the_collector_comes_back_as_it_was() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block found it paused and leaves it so
    assert gc.isenabled()


def test_a_decorated_function_pauses_it_even_when_it_recurses_or_raises() -> None:
    seen = []

    @collector_paused()
    def walk(depth: int) -> None:
        seen.append(gc.isenabled())
        if depth:
            walk(depth - 1)
        else:
            raise ValueError("bottom")

    with pytest.raises(ValueError, match="bottom"):
        walk(3)
    assert seen == [False] * 4
    assert gc.isenabled()


def test_a_paused_collector_stays_paused_afterwards() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_serving_collects_on_a_clock_and_freezes_what_survives() -> None:
    """``serve_until`` returns at the deadline, or at once when stopped; meanwhile automatic
    collection is off and what was made is frozen at each tick (never scanned again); the
    collector is back as it was afterwards."""
    enabled_while_serving = []

    class Watched(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            enabled_while_serving.append(gc.isenabled())
            return super().wait(timeout)

    gc.unfreeze()
    try:
        started = time.monotonic()
        serve_until(Watched(), 3 * HISTORY_FREEZE_S)
        assert 3 * HISTORY_FREEZE_S <= time.monotonic() - started < 3 * HISTORY_FREEZE_S + 2
        assert enabled_while_serving and not any(enabled_while_serving)
        assert gc.isenabled()
        history = [[n] for n in range(10_000)]  # made while serving: frozen at the next tick
        frozen = gc.get_freeze_count()
        serve_until(threading.Event(), 2 * HISTORY_FREEZE_S)
        assert gc.get_freeze_count() >= frozen + len(history)
        stop = threading.Event()
        stop.set()
        started = time.monotonic()
        serve_until(stop, 60)
        assert time.monotonic() - started < 2
    finally:
        gc.unfreeze()
