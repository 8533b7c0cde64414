"""A manual clock and a steppable timer heap, in the style of SimPy's ``Environment``.

Time only moves when the caller says so (``step``, ``run``), so a run is reproducible
to the millisecond. Timers are *data*: an owner object and a hashable key. When a timer
fires the scheduler calls ``owner.fire_timer(key)`` and hands back what it returned. Keeping
callbacks out of the heap means a scheduler (and everything hanging off it) can be
deep-copied for snapshots.

Ordering: by due time, then by the sequence number of the ``schedule`` call that set the
deadline (first scheduled fires first), so ties never depend on hashing.

Rescheduling a timer to a *later* time (a session timeout refreshed by a heartbeat) costs no
heap operation: the stale heap entry is found when it surfaces and re-pushed at the new
deadline with the sequence number of the call that set it. This keeps steady-state
heartbeats cheap without changing the order timers fire in.
"""

from __future__ import annotations

from collections.abc import Hashable
from heapq import heapify, heappop, heappush, heapreplace
from typing import Annotated, Any, NamedTuple, Protocol

from pydantic import Field

from kip_lab.contract import LONG_MAX, checked

_COMPACT_SLACK = 64  # a small heap is never worth rebuilding


class TimerOwner(Protocol):
    """Anything that can own timers: it is told which of its keys fired."""

    def fire_timer(self, key: Any) -> Any: ...  # each owner has its own kind of key


class Clock(Protocol):
    """What only reads the time (the scheduler is one): the dependency of a part that stamps records."""

    @property
    def now_ms(self) -> int: ...


class FiredTimer(NamedTuple):
    """What one ``step`` did: which timer fired, when, and what its owner returned (a value
    type built every step: a NamedTuple is built about twice as fast as a frozen dataclass)."""

    time_ms: int
    owner: TimerOwner
    key: Hashable
    result: Any


class Scheduler:
    """Clock in milliseconds plus a heap of timers keyed by ``(owner, key)``."""

    @checked
    def __init__(self, now_ms: Annotated[int, Field(ge=0, le=LONG_MAX)] = 0) -> None:
        self._now = now_ms
        self._seq = 0
        # (due_ms, seq, slot): seq is unique, so entries compare without reaching the slot, the
        # (owner number, key) tuple that is also the timer's key in _deadlines (no second tuple).
        self._heap: list[tuple[int, int, tuple[int, Hashable]]] = []
        # slot -> (due_ms, seq) of the live deadline
        self._deadlines: dict[tuple[int, Hashable], tuple[int, int]] = {}
        self._owners: dict[int, TimerOwner] = {}
        self._owner_ids: dict[int, int] = {}  # id(owner) -> stable owner number

    def __getstate__(self) -> dict[str, Any]:
        """What a copy or a snapshot holds: the clock, the live deadlines and the owners. Neither
        the heap nor the ``id()`` index: ``__setstate__`` rebuilds both from those (the heap of the
        live timers alone, as compaction does; a copy's owners are new objects)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_heap", "_owner_ids")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._heap = self._live_heap()
        self._owner_ids = {id(owner): number for number, owner in self._owners.items()}

    @property
    def now_ms(self) -> int:
        return self._now

    # -- timers -------------------------------------------------------------------------
    def _register(self, owner: TimerOwner) -> int:
        number = len(self._owners)
        self._owner_ids[id(owner)] = number
        self._owners[number] = owner
        return number

    def schedule(self, owner: TimerOwner, key: Hashable, delay_ms: int) -> int:
        """Arm (or re-arm) ``owner``'s timer ``key`` to fire ``delay_ms`` from now."""
        if delay_ms < 0:
            raise ValueError(f"delay_ms must be >= 0, got {delay_ms}")
        number = self._owner_ids.get(id(owner))
        if number is None:
            number = self._register(owner)
        due = self._now + delay_ms
        seq = self._seq = self._seq + 1
        slot = (number, key)
        deadlines = self._deadlines
        previous = deadlines.get(slot)
        deadlines[slot] = (due, seq)
        if previous is None or due < previous[0]:
            heappush(self._heap, (due, seq, slot))
        return due

    def cancel(self, owner: TimerOwner, key: Hashable) -> bool:
        """Disarm a timer; returns whether it was armed."""
        number = self._owner_ids.get(id(owner))
        if number is None or self._deadlines.pop((number, key), None) is None:
            return False
        self._compact_if_mostly_dead()
        return True

    def cancel_all(self, owner: TimerOwner) -> None:
        """Disarm every timer of ``owner`` (a coordinator being unloaded)."""
        number = self._owner_ids.get(id(owner))
        if number is None:
            return
        for slot in [slot for slot in self._deadlines if slot[0] == number]:
            del self._deadlines[slot]
        self._compact_if_mostly_dead()

    def _compact_if_mostly_dead(self) -> None:
        """Rebuild the heap from the live deadlines once it holds more dead entries than live ones.

        Every request arms a timeout that its answer cancels: without this, a stable group's
        heap held three cancelled timeouts per live timer until their time came (longer heap
        operations). The rebuilt heap (``_live_heap``) fires timers in the same order; when it
        is rebuilt depends only on the counts, so runs stay deterministic.
        """
        if len(self._heap) > 2 * len(self._deadlines) + _COMPACT_SLACK:
            self._heap = self._live_heap()

    def _live_heap(self) -> list[tuple[int, int, tuple[int, Hashable]]]:
        """A heap of the armed timers alone, each at its live (due, seq): the order they fire in
        is the lazy heap's, without the entries of cancelled or moved timers."""
        heap = [(due, seq, slot) for slot, (due, seq) in self._deadlines.items()]
        heapify(heap)
        return heap

    def deadline(self, owner: TimerOwner, key: Hashable) -> int | None:
        """When ``owner``'s timer ``key`` fires, or None if it is not armed."""
        number = self._owner_ids.get(id(owner))
        entry = None if number is None else self._deadlines.get((number, key))
        return None if entry is None else entry[0]

    def timers(self, owner: TimerOwner) -> dict[Hashable, int]:
        """The armed timers of ``owner``: key -> due time."""
        number = self._owner_ids.get(id(owner))
        return {key: due for (num, key), (due, _) in self._deadlines.items() if num == number}

    # -- stepping -------------------------------------------------------------------------
    def _settle(self) -> tuple[int, int, tuple[int, Hashable]] | None:
        """The heap's top once it is a live deadline (dead entries dropped, postponed ones moved);
        None when nothing is armed. An entry is live when its sequence number is its timer's: each
        arming has its own."""
        heap = self._heap
        deadlines = self._deadlines
        while heap:
            top = heap[0]
            live = deadlines.get(top[2])
            if live is not None and live[1] == top[1]:
                return top
            if live is None or live[0] < top[0]:
                heappop(heap)  # cancelled, or an earlier deadline has its own entry
            else:
                heapreplace(heap, (live[0], live[1], top[2]))  # postponed
        return None

    def peek(self) -> int | None:
        """Due time of the next timer, or None when nothing is armed."""
        top = self._settle()
        return None if top is None else top[0]

    def fire_next(self, until: int | None = None) -> FiredTimer | None:
        """Advance the clock to the next timer and fire it, if one is armed and due at or before
        ``until`` (any time when None); None otherwise."""
        top = self._settle()
        if top is None or (until is not None and top[0] > until):
            return None
        heappop(self._heap)
        due, _, slot = top
        del self._deadlines[slot]
        self._now = due
        number, key = slot
        owner = self._owners[number]
        return FiredTimer(due, owner, key, owner.fire_timer(key))

    def step(self) -> FiredTimer:
        """Advance the clock to the next timer and fire it."""
        fired = self.fire_next()
        if fired is None:
            raise IndexError("no timer is armed")
        return fired

    def run(self, until: int) -> list[FiredTimer]:
        """Fire every timer due at or before ``until`` and leave the clock at ``until``."""
        if until < self._now:
            raise ValueError(f"cannot run backwards: now={self._now}, until={until}")
        fired = []
        while (timer := self.fire_next(until)) is not None:
            fired.append(timer)
        self._now = until
        return fired

    def advance(self, delta_ms: int) -> list[FiredTimer]:
        """``run(until=now + delta_ms)``."""
        if delta_ms < 0:
            raise ValueError(f"delta_ms must be >= 0, got {delta_ms}")
        return self.run(self._now + delta_ms)
