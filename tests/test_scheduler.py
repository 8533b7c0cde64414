"""The scheduler under everything: timers fire in deadline order, re-arming moves them, and
``fire_next`` fires only what is due by a time."""

from __future__ import annotations

import pytest

from kip_lab.runtime.scheduler import Scheduler


class Owner:
    def __init__(self) -> None:
        self.fired: list[str] = []

    def fire_timer(self, key: str) -> str:
        self.fired.append(key)
        return f"fired {key}"


def test_fire_next_fires_only_what_is_due_by_then() -> None:
    scheduler, owner = Scheduler(), Owner()
    scheduler.schedule(owner, "late", 50)
    scheduler.schedule(owner, "early", 10)
    assert scheduler.fire_next(until=9) is None and scheduler.now_ms == 0  # nothing due: the clock stays
    fired = scheduler.fire_next(until=10)
    assert fired is not None and (fired.time_ms, fired.key, fired.result) == (10, "early", "fired early")
    assert scheduler.now_ms == 10
    assert scheduler.fire_next(until=49) is None
    assert scheduler.fire_next().key == "late"  # no bound: the next one, whenever it is
    assert scheduler.fire_next() is None and owner.fired == ["early", "late"]


def test_a_re_armed_or_cancelled_timer_fires_at_its_new_time_or_not_at_all() -> None:
    scheduler, owner = Scheduler(), Owner()
    scheduler.schedule(owner, "moved", 10)
    scheduler.schedule(owner, "gone", 20)
    scheduler.schedule(owner, "moved", 30)  # postponed: the old heap entry must not fire it
    scheduler.cancel(owner, "gone")
    assert scheduler.fire_next(until=29) is None
    assert [f.key for f in scheduler.run(until=100)] == ["moved"] and scheduler.now_ms == 100
    with pytest.raises(IndexError, match="no timer"):
        scheduler.step()
