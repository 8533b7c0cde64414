"""A small in-memory model of the user topic-partition a share group reads.

Just what the share-partition leader needs: record batches with offsets, producer ids and
transactional markers, compaction gaps (records removed inside a batch whose offsets stay
taken), retention (the log start offset moving up) and the high-water mark / last stable
offset. Like Kafka's leader, the share-partition leader only looks at batch boundaries and
transaction outcomes, never inside a batch (KIP-932 "unmaterialized" batches).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum

from kip_lab.contract import checked
from kip_lab.protocol.share import ShareRecord


class BatchKind(Enum):
    PLAIN = "plain"
    OPEN_TRANSACTION = "open transaction"
    COMMITTED = "committed"
    ABORTED = "aborted"
    MARKER = "marker"  # a transaction's commit/abort control batch: never delivered


@dataclass(slots=True)
class LogBatch:
    base_offset: int
    last_offset: int
    kind: BatchKind
    producer_id: int | None = None
    values: Sequence[str | None] | None = None  # None: records without payload (benchmarks)
    removed: set[int] = field(default_factory=set)  # offsets the log cleaner removed


@dataclass(frozen=True, slots=True)
class LogSegment:
    """A run of offsets ``[first, last]`` from one batch, and whether a share group may deliver it."""

    first: int
    last: int
    deliverable: bool


class TopicLog:
    """One topic-partition; offsets start at 0; the high-water mark is the log end offset."""

    @checked
    def __init__(self, topic_id: str = "topic", partition: int = 0) -> None:
        self.topic_id = topic_id
        self.partition = partition
        self.log_start_offset = 0
        self._batches: list[LogBatch] = []
        self._bases: list[int] = []
        self._open: dict[int, list[LogBatch]] = {}  # producer id -> batches of its open transaction

    @property
    def high_watermark(self) -> int:
        return self._batches[-1].last_offset + 1 if self._batches else 0

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the high-water mark."""
        starts = [batches[0].base_offset for batches in self._open.values() if batches]
        return min(starts, default=self.high_watermark)

    def append(
        self,
        count: int | None = None,
        *,
        values: Sequence[str | None] | None = None,
        producer_id: int | None = None,
        transactional: bool = False,
    ) -> range:
        """Append one batch of ``count`` records (or of ``values``); returns its offsets."""
        if values is not None:
            count = len(values)
        if count is None or count < 1:
            raise ValueError("a batch needs at least one record: give count >= 1 or values")
        if transactional and producer_id is None:
            raise ValueError("a transactional batch needs a producer_id")
        base = self.high_watermark
        kind = BatchKind.OPEN_TRANSACTION if transactional else BatchKind.PLAIN
        batch = LogBatch(base, base + count - 1, kind, producer_id, values)
        self._batches.append(batch)
        self._bases.append(base)
        if transactional:
            self._open.setdefault(producer_id, []).append(batch)  # type: ignore[arg-type]
        return range(base, base + count)

    def end_transaction(self, producer_id: int, *, commit: bool) -> int:
        """Write the commit or abort marker of ``producer_id``'s open transaction; returns its offset."""
        batches = self._open.pop(producer_id, None)
        if not batches:
            raise ValueError(f"producer {producer_id} has no open transaction")
        for batch in batches:
            batch.kind = BatchKind.COMMITTED if commit else BatchKind.ABORTED
        offset = self.high_watermark
        marker = LogBatch(offset, offset, BatchKind.MARKER, producer_id)
        self._batches.append(marker)
        self._bases.append(offset)
        return offset

    def compact(self, offsets: Sequence[int]) -> None:
        """The log cleaner removes these records; their batches keep their offset range."""
        for offset in offsets:
            self._batch_at(offset).removed.add(offset)

    def delete_records_before(self, offset: int) -> None:
        """Retention: the log start offset moves up to ``offset``."""
        if not self.log_start_offset <= offset <= self.high_watermark:
            raise ValueError(f"offset must lie in [{self.log_start_offset}, {self.high_watermark}], got {offset}")
        self.log_start_offset = offset

    def _batch_at(self, offset: int) -> LogBatch:
        index = bisect.bisect_right(self._bases, offset) - 1
        if index < 0 or offset > self._batches[index].last_offset:
            raise ValueError(f"offset {offset} is not in the log (end {self.high_watermark})")
        return self._batches[index]

    def segments(self, start: int, end: int, read_committed: bool) -> Iterator[LogSegment]:
        """Batch-bounded runs covering ``[start, end)``: markers are never deliverable, and aborted
        transactions are not under read_committed."""
        index = max(bisect.bisect_right(self._bases, start) - 1, 0)
        while index < len(self._batches):
            batch = self._batches[index]
            if batch.base_offset >= end:
                return
            first, last = max(batch.base_offset, start), min(batch.last_offset, end - 1)
            if first <= last:
                deliverable = batch.kind is not BatchKind.MARKER and not (
                    read_committed and batch.kind is BatchKind.ABORTED
                )
                yield LogSegment(first, last, deliverable)
            index += 1

    def read(self, first: int, last: int) -> list[ShareRecord]:
        """The records that exist in ``[first, last]``: compaction gaps and markers are absent."""
        out = []
        for batch in self._batches[max(bisect.bisect_right(self._bases, first) - 1, 0) :]:
            if batch.base_offset > last:
                break
            if batch.kind is BatchKind.MARKER:
                continue
            for offset in range(max(first, batch.base_offset), min(last, batch.last_offset) + 1):
                if offset in batch.removed:
                    continue
                value = None if batch.values is None else batch.values[offset - batch.base_offset]
                out.append(ShareRecord(offset=offset, key=None, value=value))
        return out
