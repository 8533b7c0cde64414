"""The small topic-partition model the share-partition leader reads (batches, transactions, compaction, retention)."""

from __future__ import annotations

import pytest

from kip_lab.share.topic_log import LogSegment, TopicLog


def test_offsets_batches_and_high_watermark() -> None:
    log = TopicLog("t", 0)
    assert log.high_watermark == 0 and log.last_stable_offset == 0
    assert log.append(3) == range(0, 3)
    assert log.append(values=["a", "b"]) == range(3, 5)
    assert [(r.offset, r.value) for r in log.read(2, 4)] == [(2, None), (3, "a"), (4, "b")]
    assert list(log.segments(1, 5, read_committed=False)) == [LogSegment(1, 2, True), LogSegment(3, 4, True)]
    with pytest.raises(ValueError, match="at least one record"):
        log.append(0)


def test_transactions_markers_and_the_last_stable_offset() -> None:
    log = TopicLog()
    log.append(2)
    log.append(2, producer_id=1, transactional=True)
    log.append(1, producer_id=2, transactional=True)
    assert log.last_stable_offset == 2 and log.high_watermark == 5
    assert log.end_transaction(1, commit=False) == 5
    assert log.last_stable_offset == 4  # producer 2 is still open
    log.end_transaction(2, commit=True)
    assert log.last_stable_offset == log.high_watermark == 7
    assert list(log.segments(0, 7, read_committed=True)) == [
        LogSegment(0, 1, True),
        LogSegment(2, 3, False),
        LogSegment(4, 4, True),
        LogSegment(5, 5, False),
        LogSegment(6, 6, False),
    ]
    assert [s.deliverable for s in log.segments(0, 7, read_committed=False)] == [True, True, True, False, False]
    assert [r.offset for r in log.read(0, 6)] == [0, 1, 2, 3, 4]  # markers are never read
    with pytest.raises(ValueError, match="no open transaction"):
        log.end_transaction(1, commit=True)
    with pytest.raises(ValueError, match="needs a producer_id"):
        log.append(1, transactional=True)


def test_compaction_gaps_and_retention() -> None:
    log = TopicLog()
    log.append(5)
    log.compact([1, 3])
    assert [r.offset for r in log.read(0, 4)] == [0, 2, 4]
    assert list(log.segments(0, 5, read_committed=False)) == [LogSegment(0, 4, True)]  # the batch keeps its range
    log.delete_records_before(2)
    assert log.log_start_offset == 2
    with pytest.raises(ValueError, match="must lie in"):
        log.delete_records_before(1)
    with pytest.raises(ValueError, match="not in the log"):
        log.compact([9])
