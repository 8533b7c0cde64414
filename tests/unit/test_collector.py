"""``collector_paused``: the one place the cyclic garbage collector is held off during bulk work."""

from __future__ import annotations

import gc

import pytest

from kip_lab.runtime.collector import collector_paused


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
