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


def test_cancelled_timers_do_not_pile_up_and_the_firing_order_is_unchanged() -> None:
    """Re-arm, postpone and cancel at random: the heap stays within twice the armed timers (plus
    a little), and timers fire exactly in (deadline, last arming) order, as armed."""
    import random

    rng = random.Random(4)
    scheduler, owner = Scheduler(), Owner()
    armed: dict[str, tuple[int, int]] = {}  # key -> (due, arming number): the order it must fire in
    for arming in range(5_000):
        key = f"t{rng.randrange(400)}"
        if key in armed and rng.random() < 0.6:
            assert scheduler.cancel(owner, key)
            del armed[key]
        else:
            armed[key] = (scheduler.schedule(owner, key, rng.randrange(1, 10_000)), arming)
        assert len(scheduler._heap) <= 2 * len(armed) + 64
    other = Owner()
    for i in range(500):
        scheduler.schedule(other, f"o{i}", 1 + i)
    scheduler.cancel_all(other)  # an unloaded coordinator: its timers go, and so do their heap entries
    assert len(scheduler._heap) <= 2 * len(armed) + 64
    scheduler.run(until=20_000)
    assert owner.fired == sorted(armed, key=armed.__getitem__) and other.fired == []


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copy_fires_what_the_original_fires_in_the_same_order(how: str) -> None:
    """A snapshot or a deep copy holds the live deadlines only and rebuilds its heap from them:
    postponed, cancelled and pending timers come out of the copy exactly as out of the original."""
    import copy
    import pickle

    scheduler, owner = Scheduler(), Owner()
    for i in range(60):
        scheduler.schedule(owner, f"t{i}", (i * 37) % 100)
    for i in range(0, 60, 3):
        scheduler.schedule(owner, f"t{i}", 150 + i)  # postponed: stale entries stay in the heap
    for i in range(1, 60, 5):
        scheduler.cancel(owner, f"t{i}")
    scheduler.run(until=40)
    state = (scheduler, owner)
    twin, twin_owner = copy.deepcopy(state) if how == "deepcopy" else pickle.loads(pickle.dumps(state))
    assert "_heap" not in scheduler.__getstate__()
    assert twin.now_ms == 40 and twin.timers(twin_owner) == scheduler.timers(owner)
    already = len(owner.fired)  # the copy's owner has these too
    scheduler.run(until=1_000)
    twin.run(until=1_000)
    assert twin_owner.fired == owner.fired and len(owner.fired) > already + 20
    twin.schedule(twin_owner, "new", 5)  # the copy's owners are indexed again: one arming, not a new owner
    assert twin.timers(twin_owner) == {"new": 1_005} and len(twin._owners) == 1
