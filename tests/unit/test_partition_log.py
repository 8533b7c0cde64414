"""The append-only log under the coordinators: offsets, atomic batches, reads and truncation."""

from __future__ import annotations

import pytest

from kip_lab.runtime.log import LogEntry, PartitionLog, Record


def _log(batch_sizes: list[int]) -> PartitionLog:
    log = PartitionLog()
    n = 0
    for size in batch_sizes:
        log.append([Record(f"k{n + i}", n + i) for i in range(size)])
        n += size
    return log


def test_entries_carry_offset_batch_and_record() -> None:
    log = _log([2, 1, 3])
    assert [(e.offset, e.batch, e.record.key) for e in log] == [
        (0, 0, "k0"),
        (1, 0, "k1"),
        (2, 1, "k2"),
        (3, 2, "k3"),
        (4, 2, "k4"),
        (5, 2, "k5"),
    ]
    assert log.end_offset == len(log) == 6 and log.batch_count == 3
    assert all(isinstance(e, LogEntry) for e in log)


@pytest.mark.parametrize(("start", "end"), [(0, None), (2, 4), (3, 6), (5, 99), (6, None), (-2, None), (4, 2)])
def test_entries_between_offsets_slice_like_a_list(start: int, end: int | None) -> None:
    log = _log([2, 1, 3])
    assert log.entries(start, end) == list(log)[start:end]


def test_batches_and_truncation_keep_batches_whole() -> None:
    log = _log([2, 1, 3])
    assert [[e.offset for e in b] for b in log.batches()] == [[0, 1], [2], [3, 4, 5]]
    cut = log.truncated(2)
    assert list(cut) == list(log)[:3] and cut.batch_count == 2
    cut.append([Record("new", 0)])  # the copy grows on its own
    assert log.end_offset == 6 and [e.batch for e in cut][-1] == 2
    with pytest.raises(ValueError, match="batch_count"):
        log.truncated(4)


def test_a_batch_is_records_only_and_never_empty() -> None:
    log = PartitionLog()
    with pytest.raises(ValueError, match="at least one"):
        log.append([])
    with pytest.raises(TypeError, match="expected Record, got tuple"):
        log.append([Record("a", 1), ("b", 2)])
    assert log.end_offset == 0 and log.batch_count == 0  # nothing of a refused batch is kept
