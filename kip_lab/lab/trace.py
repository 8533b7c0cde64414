"""The trace: one typed event per thing that happened, in the order it happened.

Every event carries the step that produced it, the simulated time, the actor, a kind and a
JSON-serialisable payload. Saving uses sorted keys and no wall-clock data, so the same
scenario and seed give byte-identical files. pandas and pyarrow are imported only by the
methods that need them.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable, Iterator
from enum import StrEnum
from functools import cached_property
from operator import itemgetter
from pathlib import Path
from typing import Any

from kip_lab.runtime.collector import collector_paused


class EventKind(StrEnum):
    MESSAGE_SENT = "message_sent"
    MESSAGE_DELIVERED = "message_delivered"
    MESSAGE_DROPPED = "message_dropped"
    HANDLER_RESULT = "handler_result"  # a coordinator handler or timer, with the records it wrote
    TIMER_FIRED = "timer_fired"
    STATE_TRANSITION = "state_transition"
    CALLBACK_INVOKED = "callback_invoked"
    CALLBACK_COMPLETED = "callback_completed"
    ASSIGNMENT_CHANGED = "assignment_changed"  # a client's owned/fetching partitions changed
    FAULT_INJECTED = "fault_injected"
    ACTION_APPLIED = "action_applied"  # setup and scripted actions (add a consumer, send a request)
    INVARIANT_VIOLATED = "invariant_violated"
    NOTE = "note"
    SHARE_ACQUIRED = "share_acquired"  # a share-partition leader acquired records for a member
    SHARE_STATE_WRITE = "share_state_write"  # a WriteShareGroupState, its transitions and the records written
    SHARE_STATE_RPC = "share_state_rpc"  # the group coordinator's Initialize/Delete/summary calls
    SHARE_ACK_RESULT = "share_ack_result"  # a share consumer's acknowledgement commit callback


class TraceEvent(tuple):
    """One event: (step, time_ms, actor, kind, payload), immutable.

    ``payload`` may be given deferred, as a function of no arguments: a message's body is
    summarised only when someone reads the event (the stepper, a test, a saved trace), not for
    every message a long run sends; the body is a frozen model, so the summary is the same
    whenever it is made, and it is made once. A tuple, like a NamedTuple: a run makes one or two
    events per step, and ``Lab`` builds them with ``tuple.__new__`` at C speed (a slotted class
    built through ``__init__`` cost three times as much).
    """

    step = property(itemgetter(0), doc="the step that produced the event")
    time_ms = property(itemgetter(1), doc="the simulated time of that step")
    actor = property(itemgetter(2), doc="who did it: a member, a broker, the network, the lab")
    kind = property(itemgetter(3), doc="what happened (``EventKind``)")

    def __new__(
        cls, step: int, time_ms: int, actor: str, kind: EventKind, payload: dict[str, Any] | Callable[[], dict]
    ) -> TraceEvent:
        return tuple.__new__(cls, (step, time_ms, actor, kind, payload))

    @cached_property
    def payload(self) -> dict[str, Any]:
        payload = self[4]
        return payload if type(payload) is dict else payload()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a trace event is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)  # refused like setting it

    def _fields(self) -> tuple[int, int, str, EventKind, dict[str, Any]]:
        return (self[0], self[1], self[2], self[3], self.payload)

    def __eq__(self, other: object) -> bool:
        if type(other) is not TraceEvent:
            return NotImplemented
        return self._fields() == other._fields()

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # the payload is a dict

    def __reduce__(self) -> tuple[type, tuple]:
        return TraceEvent, self._fields()

    def __repr__(self) -> str:
        return (
            f"TraceEvent(step={self.step!r}, time_ms={self.time_ms!r}, actor={self.actor!r}, kind={self.kind!r}, "
            f"payload={self.payload!r})"
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "step": self.step,
                "time_ms": self.time_ms,
                "actor": self.actor,
                "kind": self.kind.value,
                "payload": self.payload,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceEvent:
        return cls(
            int(data["step"]), int(data["time_ms"]), str(data["actor"]), EventKind(data["kind"]), dict(data["payload"])
        )


def _step_of(event: TraceEvent) -> int:
    return event.step


class Trace:
    """An append-only list of events with tidy-frame and file views."""

    def __init__(self, events: Iterable[TraceEvent] = ()) -> None:
        self._events: list[TraceEvent] = list(events)

    def append(self, event: TraceEvent) -> None:
        self._events.append(event)

    def extend(self, events: Iterable[TraceEvent]) -> None:
        self._events.extend(events)

    def truncate_after(self, step: int) -> None:
        """Drop events of steps later than ``step`` (time travel backwards)."""
        self.split_after(step)

    def split_after(self, step: int) -> list[TraceEvent]:
        """Drop events of steps later than ``step`` and return them, oldest first."""
        keep = bisect.bisect_right(self._events, step, key=_step_of)  # events are in step order
        cut = self._events[keep:]
        del self._events[keep:]
        return cut

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self._events)

    def __getitem__(self, index):
        return self._events[index]

    def of_kind(self, *kinds: EventKind) -> list[TraceEvent]:
        wanted = set(kinds)
        return [e for e in self._events if e.kind in wanted]

    def at_step(self, step: int) -> list[TraceEvent]:
        return [e for e in self._events if e.step == step]

    # -- files ----------------------------------------------------------------------
    def to_jsonl(self) -> str:
        return "".join(e.to_json() + "\n" for e in self._events)

    def save_jsonl(self, path: str | Path) -> None:
        Path(path).write_text(self.to_jsonl(), encoding="utf-8")

    @classmethod
    @collector_paused()
    def load_jsonl(cls, path: str | Path) -> Trace:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        return cls(TraceEvent.from_dict(json.loads(line)) for line in lines if line)

    def to_pandas(self):
        """One row per event: step, time_ms, actor, kind, and the payload as JSON text."""
        import pandas as pd

        return pd.DataFrame(
            {
                "step": [e.step for e in self._events],
                "time_ms": [e.time_ms for e in self._events],
                "actor": [e.actor for e in self._events],
                "kind": [e.kind.value for e in self._events],
                "payload": [json.dumps(e.payload, sort_keys=True) for e in self._events],
            },
            columns=["step", "time_ms", "actor", "kind", "payload"],
        )

    def save_parquet(self, path: str | Path) -> None:
        self.to_pandas().to_parquet(path, index=False)

    @classmethod
    @collector_paused()
    def load_parquet(cls, path: str | Path) -> Trace:
        import pandas as pd

        frame = pd.read_parquet(path)
        return cls(
            TraceEvent(int(r.step), int(r.time_ms), str(r.actor), EventKind(r.kind), json.loads(r.payload))
            for r in frame.itertuples(index=False)
        )
