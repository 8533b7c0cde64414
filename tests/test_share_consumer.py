"""The share consumer: acknowledgement modes and batches (pure), and the consumer in the Lab."""

from __future__ import annotations

import pytest

from kip_lab.clients.share_acknowledgements import (
    AcknowledgementMode,
    Acknowledgements,
    DeliveredRecord,
    IllegalAcknowledgement,
    to_batches,
)
from kip_lab.protocol.share import AcknowledgementBatch, AcknowledgeType

A, R, J = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


def _records(first: int, last: int, tp=("T", 0), dc: int = 1) -> list[DeliveredRecord]:
    return [DeliveredRecord(tp[0], tp[1], o, dc) for o in range(first, last + 1)]


def test_batches_one_per_contiguous_run_one_type_when_uniform():
    assert to_batches([(3, A), (0, A), (1, A), (2, A)]) == [
        AcknowledgementBatch(first_offset=0, last_offset=3, acknowledge_types=[A])
    ]
    # S-07: {0..4, types [1,1,3,1,1]}
    assert to_batches([(0, A), (1, A), (2, J), (3, A), (4, A)]) == [
        AcknowledgementBatch(first_offset=0, last_offset=4, acknowledge_types=[A, A, J, A, A])
    ]
    assert to_batches([(0, A), (5, R)]) == [
        AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=[A]),
        AcknowledgementBatch(first_offset=5, last_offset=5, acknowledge_types=[R]),
    ]


def test_implicit_mode_commit_accepts_everything_delivered():
    # S-05: poll, process without acknowledge, commitSync -> ACCEPT for the whole batch.
    acks = Acknowledgements()
    acks.on_poll(_records(0, 4))
    assert acks.take_for_commit() == {
        ("T", 0): [AcknowledgementBatch(first_offset=0, last_offset=4, acknowledge_types=[A])]
    }
    assert acks.mode is AcknowledgementMode.IMPLICIT
    assert acks.take_for_commit() == {}


def test_implicit_mode_next_poll_piggybacks_the_accepts():
    # S-06: the next poll acknowledges the previous batch.
    acks = Acknowledgements()
    acks.on_poll(_records(0, 1))
    returned = acks.on_poll(_records(2, 3))
    assert [r.offset for r in returned] == [2, 3]
    assert acks.mode is AcknowledgementMode.IMPLICIT
    assert acks.take_for_commit() == {
        ("T", 0): [AcknowledgementBatch(first_offset=0, last_offset=3, acknowledge_types=[A])]
    }


def test_modes_cannot_be_mixed():
    acks = Acknowledgements()
    first = _records(0, 1)
    acks.on_poll(first)
    acks.take_for_commit()  # implicit now
    second = _records(2, 2)
    acks.on_poll(second)
    with pytest.raises(IllegalAcknowledgement, match="cannot be mixed"):
        acks.acknowledge(second[0], A)


def test_explicit_acknowledgements_are_sent_at_commit_with_their_types():
    # S-07: ACCEPT, ACCEPT, REJECT, ACCEPT, ACCEPT, nothing sent until the commit.
    acks = Acknowledgements()
    records = acks.on_poll(_records(0, 4))
    for record, kind in zip(records, [A, A, J, A, A], strict=True):
        acks.acknowledge(record, kind)
    assert acks.mode is AcknowledgementMode.EXPLICIT
    assert acks.take_for_commit() == {
        ("T", 0): [AcknowledgementBatch(first_offset=0, last_offset=4, acknowledge_types=[A, A, J, A, A])]
    }


def test_explicit_unacknowledged_records_are_handed_back_at_the_next_poll():
    # S-08 case 3: fails at 12 -> {10..12 [A, A, J]}; 13 and 14 come back later.
    acks = Acknowledgements()
    records = acks.on_poll(_records(10, 14))
    for record, kind in zip(records[:3], [A, A, J], strict=True):
        acks.acknowledge(record, kind)
    assert acks.take_for_commit() == {
        ("T", 0): [AcknowledgementBatch(first_offset=10, last_offset=12, acknowledge_types=[A, A, J])]
    }
    again = acks.on_poll([])
    assert [r.offset for r in again] == [13, 14]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("twice", "not awaiting acknowledgement"),
        ("foreign", "not awaiting acknowledgement"),
        ("out of order", "in the order returned"),
        ("gap", "GAP is not an application acknowledgement type"),
    ],
)
def test_bad_explicit_acknowledgements_raise_clear_errors(setup, message):
    acks = Acknowledgements()
    records = acks.on_poll(_records(0, 2))
    with pytest.raises(IllegalAcknowledgement, match=message):
        if setup == "twice":
            acks.acknowledge(records[0])
            acks.acknowledge(records[0])
        elif setup == "foreign":
            acks.acknowledge(DeliveredRecord("T", 0, 99, 1))
        elif setup == "out of order":
            acks.acknowledge(records[2])
            acks.acknowledge(records[1])
        else:
            acks.acknowledge(records[0], AcknowledgeType.GAP)


def test_close_releases_what_an_implicit_consumer_was_given():
    acks = Acknowledgements()
    acks.on_poll(_records(0, 1))
    acks.on_poll(_records(2, 3))  # 0-1 accepted implicitly, 2-3 delivered
    assert acks.take_for_close() == {
        ("T", 0): [AcknowledgementBatch(first_offset=0, last_offset=3, acknowledge_types=[A, A, R, R])]
    }


def test_close_sends_explicit_pending_and_releases_the_rest():
    acks = Acknowledgements()
    records = acks.on_poll(_records(0, 2))
    acks.acknowledge(records[0], J)
    assert acks.take_for_close() == {
        ("T", 0): [AcknowledgementBatch(first_offset=0, last_offset=2, acknowledge_types=[J, R, R])]
    }
