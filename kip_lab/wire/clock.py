"""The Lab on a real-time clock: its scheduler advanced by wall time.

A Lab's clock only moves when it is stepped. ``RealTimeClock`` maps the wall clock onto the
Lab's milliseconds (the Lab's time when the clock started, plus the wall time elapsed since)
and steps every timer that has come due — heartbeats, session and rebalance timeouts, message
deliveries — each as a step of its own, exactly as ``Lab.run`` would. Before a request from
outside is applied, ``advance`` lets the Lab's clock reach the wall clock (an ``advance_to``
step, so time travel replays it), so the request is stamped with the time it arrived.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kip_lab.lab import actions as a
from kip_lab.lab.lab import Lab


class RealTimeClock:
    """Drives ``lab`` by ``wall`` (seconds, monotonic; ``time.monotonic`` unless a test gives one)."""

    def __init__(self, lab: Lab, wall: Callable[[], float] = time.monotonic) -> None:
        self.lab = lab
        self.wall = wall
        self.origin_wall = wall()
        self.origin_lab_ms = lab.now

    def now_ms(self) -> int:
        """The wall clock in the Lab's milliseconds."""
        return self.origin_lab_ms + int((self.wall() - self.origin_wall) * 1000)

    def catch_up(self) -> int:
        """Step every timer due by now; returns how many steps were taken."""
        lab = self.lab
        scheduler = lab.world.scheduler
        now = self.now_ms()
        taken = 0
        while (due := scheduler.peek()) is not None and due <= now:
            lab._step()  # the unchecked step: a served run takes two for every request
            taken += 1
        return taken

    def advance(self) -> None:
        """Catch up, then bring the Lab's clock to now (before a request from outside)."""
        self.catch_up()
        now = self.now_ms()
        if self.lab.now < now:
            self.lab._apply(a.AdvanceTo(time_ms=now))

    def seconds_to_next_timer(self, cap: float) -> float:
        """How long the driver may sleep: until the next timer is due, at most ``cap`` seconds."""
        due = self.lab.world.scheduler.peek()
        if due is None:
            return cap
        return min(cap, max(0.0, (due - self.now_ms()) / 1000))
