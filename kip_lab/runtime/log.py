"""An append-only log for one partition of an internal topic (``__consumer_offsets``).

Records are written in batches. A batch is atomic: it is appended whole or not at all, and
a reader that replays "up to offset N" never stops inside one (the KIP requires the target
assignment to be written as one atomic batch). A record's value of ``None`` is a tombstone:
on replay it deletes the key, as log compaction would.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import Any, NamedTuple


class Record(NamedTuple):
    """A key/value pair; ``value=None`` is a tombstone. Keys and values are protocol models.

    Immutable value types like a frozen dataclass, but built about twice as fast: a stable
    group writes one per partition every commit interval (and a ``LogEntry`` for each).
    """

    key: Any
    value: Any | None


class LogEntry(NamedTuple):
    offset: int
    batch: int
    record: Record


class PartitionLog:
    """Offsets start at 0 and never repeat; batches are numbered in append order.

    The records are stored as they come, with the batch boundaries beside them; a ``LogEntry``
    (offset, batch, record) is made only when the log is read (a failover's replay, a view).
    A stable group appends one record per partition every commit interval and reads none.
    """

    def __init__(self, topic: str = "__consumer_offsets", partition: int = 0) -> None:
        self.topic = topic
        self.partition = partition
        self._records: list[Record] = []
        self._batch_ends: list[int] = []  # end offset (exclusive) of each batch

    def append(self, records: Sequence[Record]) -> range:
        """Append one atomic batch; returns the offsets it was given."""
        if not records:
            raise ValueError("a batch must hold at least one record")
        if not all(map(isinstance, records, repeat(Record))):
            untyped: Sequence[object] = records  # a caller without types (a notebook) may pass anything
            wrong = next(r for r in untyped if not isinstance(r, Record))
            raise TypeError(f"expected Record, got {type(wrong).__name__}")
        base = len(self._records)
        self._records.extend(records)
        self._batch_ends.append(len(self._records))
        return range(base, len(self._records))

    @property
    def end_offset(self) -> int:
        """The offset the next record will get (Kafka's log end offset)."""
        return len(self._records)

    @property
    def batch_count(self) -> int:
        return len(self._batch_ends)

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[LogEntry]:
        return iter(self.entries())

    def entries(self, start: int = 0, end: int | None = None) -> list[LogEntry]:
        """The entries at offsets [start, end), as a list slice would pick them."""
        offsets = range(len(self._records))[start:end]
        if not offsets:
            return []
        batch_ends, records = self._batch_ends, self._records
        batch = bisect.bisect_right(batch_ends, offsets[0])
        out = []
        for offset in offsets:
            while batch_ends[batch] <= offset:
                batch += 1
            out.append(LogEntry(offset, batch, records[offset]))
        return out

    def batches(self) -> Iterator[list[LogEntry]]:
        """The log as its atomic batches, in order."""
        start = 0
        for end in self._batch_ends:
            yield self.entries(start, end)
            start = end

    def truncated(self, batch_count: int) -> PartitionLog:
        """A copy holding only the first ``batch_count`` batches (for time travel)."""
        if not 0 <= batch_count <= len(self._batch_ends):
            raise ValueError(f"batch_count must be in [0, {len(self._batch_ends)}], got {batch_count}")
        copy = PartitionLog(self.topic, self.partition)
        end = self._batch_ends[batch_count - 1] if batch_count else 0
        copy._records = self._records[:end]
        copy._batch_ends = self._batch_ends[:batch_count]
        return copy
