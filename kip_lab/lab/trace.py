"""The trace: one typed event per thing that happened, in the order it happened.

Every ``TraceEvent`` carries the step that produced it, the simulated time, the actor, and a
``body``: one of the event classes of ``kip_lab.events`` (``MessageSent``,
``AssignmentChanged``, ...), which also gives the event's ``kind``. Read a trace by type:
``trace.of_type(AssignmentChanged)``. Saving writes each body's JSON payload with sorted keys
and no wall-clock data, so the same scenario and seed give byte-identical files; loading gives
the typed events back. pandas and pyarrow are imported only by the methods that need them.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar, overload

from kip_lab.contract import checked, refuse
from kip_lab.errors import KipLabError
from kip_lab.events import Event, EventKind, TraceFieldError, event_from_payload
from kip_lab.files import atomic_path, open_without_waiting, write_atomically
from kip_lab.runtime.collector import collector_paused

__all__ = ["EventKind", "Trace", "TraceEvent", "TraceFileError"]

E = TypeVar("E", bound=Event)
MAX_TRACE_BYTES = 1 << 32  # 4 GiB: about twenty million events, far past what a Lab keeps in memory


class TraceFileError(KipLabError, ValueError):
    """A saved trace that cannot be read back: names the file, the line (or row) and the field."""

    def __init__(self, source: str, line: int, field: str, message: str) -> None:
        super().__init__(f"{source}:{line}: {field}: {message}")
        self.source = source
        self.line = line
        self.field = field
        self.message = message


class TraceEvent(NamedTuple, Generic[E]):
    """One event: when it happened (``step``, ``time_ms``), who did it (``actor``: a member, a
    broker, the network, the lab) and what happened (``body``). A NamedTuple: a run builds one for
    every event, and a NamedTuple is built about three times as fast as a frozen dataclass."""

    step: int
    time_ms: int
    actor: str
    body: E

    @property
    def kind(self) -> EventKind:
        return self.body.kind

    @property
    def payload(self) -> dict[str, Any]:
        """The body as JSON, as a saved trace holds it."""
        return self.body.to_payload()

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

    @staticmethod
    def from_dict(data: Any) -> TraceEvent[Event]:
        """The event a saved line describes; ``TraceFieldError`` names the field that does not fit."""
        if not isinstance(data, dict):
            raise TraceFieldError("event", "is not an object")
        step, time_ms, actor, kind = (_required(data, key, kind) for key, kind in _HEAD)
        return TraceEvent(step, time_ms, actor, event_from_payload(kind, data.get("payload")))


_HEAD = (("step", int), ("time_ms", int), ("actor", str), ("kind", str))


def _required(data: dict[str, Any], key: str, kind: type) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TraceFieldError(key, "is missing" if value is None else f"is {value!r}, not {kind.__name__}")
    return value


def _step_of(event: TraceEvent) -> int:
    return event.step


class Trace:
    """An append-only list of events with tidy-frame and file views."""

    @checked
    def __init__(self, events: Any = ()) -> None:
        self._events: list[TraceEvent] = _checked_events("Trace", events)

    @checked
    def append(self, event: Any) -> None:
        self._events += _checked_events("Trace.append", [event])

    @checked
    def extend(self, events: Any) -> None:
        self._events += _checked_events("Trace.extend", events)

    def record(self, events: list[TraceEvent]) -> None:
        """The Lab's own append, once a step: its events are built right, so they are not checked again."""
        self._events += events

    @checked
    def truncate_after(self, step: int) -> None:
        """Drop events of steps later than ``step`` (time travel backwards)."""
        self.split_after(step)

    @checked
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

    @overload
    def of_type(self, kind: type[E], /) -> list[TraceEvent[E]]: ...

    @overload
    def of_type(self, *kinds: type[Event]) -> list[TraceEvent]: ...

    @checked
    def of_type(self, *kinds: type[Event]) -> list[TraceEvent]:
        """The events whose body is one of ``kinds`` (``ActionApplied`` includes ``FaultInjected``), in order."""
        return [e for e in self._events if isinstance(e.body, kinds)]

    @checked
    def at_step(self, step: int) -> list[TraceEvent]:
        return [e for e in self._events if e.step == step]

    # -- files ----------------------------------------------------------------------
    @checked
    def to_jsonl(self) -> str:
        return "".join(e.to_json() + "\n" for e in self._events)

    @checked
    def save_jsonl(self, path: str | Path) -> None:
        """Write the trace as JSON Lines, whole (a temporary file renamed into place)."""
        write_atomically(path, self.to_jsonl())

    @classmethod
    @collector_paused()
    @checked
    def load_jsonl(cls, path: str | Path) -> Trace:
        """A saved trace, typed again; ``TraceFileError`` names the line and field of a bad event, and
        refuses a file that is not a whole trace (empty, cut short, not UTF-8)."""
        source = str(path)
        data = _read_bytes(path)
        if not data:
            raise TraceFileError(source, 0, "file", "is empty: a saved trace has one line per event")
        if not data.endswith(b"\n"):
            raise TraceFileError(source, data.count(b"\n") + 1, "event", "the last line is cut short (no newline)")
        return cls(_read(source, number, line) for number, line in enumerate(data.split(b"\n")[:-1], 1) if line)

    @checked
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

    @checked
    def save_parquet(self, path: str | Path) -> None:
        """Write the trace as Parquet, whole (a temporary file renamed into place)."""
        with atomic_path(path) as temporary:
            self.to_pandas().to_parquet(temporary, index=False)

    @classmethod
    @collector_paused()
    @checked
    def load_parquet(cls, path: str | Path) -> Trace:
        """A trace saved with ``save_parquet``, typed again; ``TraceFileError`` names the row (from 1) and field."""
        import pandas as pd
        import pyarrow as pa

        _read_bytes(path, limit=0)  # a missing file or a folder: named as such
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError, pa.ArrowException) as exc:  # half a file, or not Parquet at all
            raise TraceFileError(str(path), 0, "file", f"is not a whole Parquet trace: {exc}") from None
        missing = [c for c in ("step", "time_ms", "actor", "kind", "payload") if c not in frame.columns]
        if missing:
            raise TraceFileError(str(path), 0, missing[0], "the column is missing")
        rows = frame[["step", "time_ms", "actor", "kind", "payload"]].itertuples(index=False)
        return cls(_read(str(path), number, row) for number, row in enumerate(rows, 1))


def _checked_events(call: str, events: Any) -> list[TraceEvent]:
    """``events`` as a list, refused unless it is an iterable of ``TraceEvent``."""
    if isinstance(events, str | bytes) or not isinstance(events, Iterable):
        raise refuse(call, "events", f"trace events (TraceEvent), not {type(events).__name__}")
    listed = list(events)
    for event in listed:
        if not isinstance(event, TraceEvent):
            raise refuse(call, "events", f"trace events (TraceEvent), not {type(event).__name__}")
    return listed


def _read_bytes(path: str | Path, limit: int = MAX_TRACE_BYTES) -> bytes:
    """The bytes of a saved trace (at most ``limit`` of them; 0: only check it opens); ``TraceFileError``
    if it cannot be read whole."""
    try:
        if Path(path).is_dir():
            raise IsADirectoryError(21, "is a folder, not a trace file")
        with open_without_waiting(path) as file:
            data = file.read(limit + 1)
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL in it
        raise TraceFileError(str(path), 0, "file", f"cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    if limit and len(data) > limit:
        raise TraceFileError(str(path), 0, "file", f"is larger than {limit:,} bytes, the most a trace is read from")
    return data


def _read(source: str, number: int, saved: Any) -> TraceEvent:
    """The event on line (or row) ``number`` of a saved trace: a JSON line (bytes), or a Parquet row."""
    try:
        if isinstance(saved, bytes):
            data = json.loads(saved.decode("utf-8"))
        else:
            step, time_ms, actor, kind, payload = saved
            data = {"step": int(step), "time_ms": int(time_ms), "actor": actor, "kind": kind}
            data["payload"] = json.loads(payload)
        return TraceEvent.from_dict(data)
    except TraceFieldError as exc:
        raise TraceFileError(source, number, exc.field, exc.message) from None
    except (ValueError, TypeError) as exc:  # not UTF-8 or not JSON (both ValueErrors), or not a number
        raise TraceFileError(source, number, "event", f"cannot be read: {exc}") from None
    except RecursionError:  # JSON nested thousands deep: no event is
        raise TraceFileError(source, number, "event", "is nested too deeply to be an event") from None
