"""The share-partition leader's rules (KIP-932 R-DC, R-DL, R-LK, R-LM, R-SP, R-TX, R-BT) and its pending writes."""

from __future__ import annotations

import pytest
from share_support import GROUP, TOPIC, Rig, ack, make_rig

from kip_lab.machines import IllegalTransition
from kip_lab.protocol.errors import ApiError, Errors
from kip_lab.protocol.share import AcknowledgeType
from kip_lab.share.config import SharePartitionConfig
from kip_lab.share.partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, RECORD_STATE_MACHINE, SharePartition

ACCEPT, RELEASE, REJECT, GAP = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.GAP,
)


def ranges(acquired):
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in acquired]


def test_record_state_machine_is_enforced() -> None:
    assert RECORD_STATE_MACHINE.next_state(ACQUIRED, "release at limit") == ARCHIVED
    with pytest.raises(IllegalTransition):
        RECORD_STATE_MACHINE.next_state(ACKNOWLEDGED, "acquire")
    with pytest.raises(IllegalTransition):
        RECORD_STATE_MACHINE.next_state(ARCHIVED, "release")


@pytest.mark.parametrize("fidelity", ["kafka", "kip"])
def test_poison_message_released_until_the_limit_then_archived_while_others_flow(fidelity) -> None:
    """Record 1 fails every delivery: dc 1..5, then Archived; records 0 and 2 are consumed meanwhile.

    Kafka's ``SharePartition.acknowledge``: a release at the delivery limit archives. The writes
    carry the SPSO (``kafka``, Kafka's ``writeShareGroupState``) or the KIP example's -1 (``kip``).
    """
    rig = make_rig(config=SharePartitionConfig(delivery_count_limit=5), start_offset=0, fidelity=fidelity)
    rig.log.append(3)
    writes = []
    for attempt in range(1, 6):
        got = ranges(rig.sp.acquire("C1", 3))
        assert got == ([(0, 2, 1)] if attempt == 1 else [(1, 1, attempt)])
        assert rig.sp.state_at(1) == (ACQUIRED, attempt)
        batches = [ack(1, 1, RELEASE)]
        if attempt == 1:
            batches = [ack(0, 2, ACCEPT, RELEASE, ACCEPT)]
        rig.sp.acknowledge("C1", batches)
        writes.append(rig.last_write())
    assert rig.sp.state_at(1) == (ARCHIVED, 0)  # below the SPSO now
    assert (rig.sp.spso, rig.sp.speo) == (3, 3)
    if fidelity == "kafka":
        assert writes[0] == (0, [(0, 0, 2, 1), (1, 1, 0, 1), (2, 2, 2, 1)])
        assert writes[1:4] == [(1, [(1, 1, 0, dc)]) for dc in (2, 3, 4)]
        assert writes[4] == (1, [(1, 1, 4, 5)])  # the 5th failure archives it; the SPSO passes it afterwards
        assert rig.stored() == (1, [(1, 1, 4, 5), (2, 2, 2, 1)])  # the stored start lags: a reader skips them
    else:
        assert writes[0] == (-1, [(0, 0, 2, 1), (1, 1, 0, 1), (2, 2, 2, 1)])
        assert writes[1:4] == [(-1, [(1, 1, 0, dc)]) for dc in (2, 3, 4)]
        assert writes[4] == (3, [])  # the 5th failure archives it and the SPSO passes it
    assert rig.sp.acquire("C1", 10) == []
    rig.log.append(2)
    assert ranges(rig.sp.acquire("C2", 10)) == [(3, 4, 1)]


@pytest.mark.parametrize("fidelity", ["kafka", "kip"])
def test_poison_message_by_lock_timeouts(fidelity) -> None:
    """Kafka's ``SharePartition.releaseAcquisitionLockOnTimeout``: at the delivery limit a timeout archives."""
    config = SharePartitionConfig(delivery_count_limit=2, record_lock_duration_ms=1_000)
    rig = make_rig(config=config, start_offset=0, fidelity=fidelity)
    rig.log.append(1)
    rig.sp.acquire("C1", 1)
    rig.scheduler.advance(1_000)
    assert rig.sp.state_at(0) == (AVAILABLE, 1)
    assert ranges(rig.sp.acquire("C2", 1)) == [(0, 0, 2)]
    rig.scheduler.advance(1_000)
    assert rig.last_write() == ((0, [(0, 0, 4, 2)]) if fidelity == "kafka" else (1, []))
    assert rig.sp.spso == 1


@pytest.mark.parametrize(("fidelity", "start_offset"), [("kafka", 0), ("kip", -1)])
def test_reject_archives_whatever_the_delivery_count(fidelity, start_offset) -> None:
    """Kafka's ``SharePartition.acknowledge``: REJECT archives at any delivery count."""
    rig = make_rig(start_offset=0, fidelity=fidelity)
    rig.log.append(2)
    rig.sp.acquire("C1", 2)
    rig.sp.acknowledge("C1", [ack(1, 1, REJECT)])
    assert rig.sp.state_at(1) == (ARCHIVED, 1)
    assert rig.last_write() == (start_offset, [(1, 1, 4, 1)])


def test_acknowledgement_by_another_member_fails_atomically() -> None:
    """One batch covering a record of another member fails whole; nothing changes, nothing written."""
    rig = make_rig(start_offset=0)
    rig.log.append(2)
    rig.log.append(1)
    rig.sp.acquire("C1", 2)
    rig.sp.acquire("C2", 1)
    sent = len(rig.persister.sent)
    with pytest.raises(ApiError) as error:
        rig.sp.acknowledge("C1", [ack(0, 2, ACCEPT)])
    assert error.value.error is Errors.INVALID_RECORD_STATE
    assert [rig.sp.state_at(o) for o in range(3)] == [(ACQUIRED, 1)] * 3
    assert len(rig.persister.sent) == sent


def test_late_acknowledgement_after_lock_expiry_fails_and_can_be_reacquired() -> None:
    """An acknowledgement after the acquisition lock ran out is refused; the record is acquired again, count 2."""
    rig = make_rig(start_offset=0)
    rig.log.append(1)
    rig.sp.acquire("C1", 1)
    rig.scheduler.advance(30_000)
    with pytest.raises(ApiError, match="INVALID_RECORD_STATE"):
        rig.sp.acknowledge("C1", [ack(0, 0, ACCEPT)])
    assert ranges(rig.sp.acquire("C1", 1)) == [(0, 0, 2)]


@pytest.mark.parametrize("fidelity", ["kafka", "kip"])
def test_malformed_batches_are_invalid_requests(fidelity) -> None:
    """Kafka's ``KafkaApis.validateAcknowledgementBatches``: batches out of order are INVALID_REQUEST.

    A batch starting at the previous batch's last offset passes Kafka's check, and
    ``SharePartition.acknowledge`` then finds that offset already acknowledged: INVALID_RECORD_STATE,
    nothing changes. Under ``kip`` it is an overlap: INVALID_REQUEST.
    """
    rig = make_rig(start_offset=0, fidelity=fidelity)
    rig.log.append(4)
    rig.sp.acquire("C1", 4)
    with pytest.raises(ApiError, match="INVALID_REQUEST"):
        rig.sp.acknowledge("C1", [ack(2, 3, ACCEPT), ack(0, 2, ACCEPT)])
    expected = "INVALID_RECORD_STATE" if fidelity == "kafka" else "INVALID_REQUEST"
    with pytest.raises(ApiError, match=expected):
        rig.sp.acknowledge("C1", [ack(0, 2, ACCEPT), ack(2, 3, ACCEPT)])
    assert [rig.sp.state_at(o) for o in range(4)] == [(ACQUIRED, 1)] * 4
    with pytest.raises(ValueError, match="acknowledge_types must hold 1 or 3"):
        ack(0, 2, ACCEPT, ACCEPT)


@pytest.mark.parametrize(("fidelity", "error"), [("kafka", "INVALID_REQUEST"), ("kip", "INVALID_RECORD_STATE")])
def test_an_acknowledgement_past_the_in_flight_records(fidelity, error) -> None:
    """Kafka's ``SharePartition.acknowledge``: offsets past the last in-flight record are INVALID_REQUEST.

    Under ``kip`` they were never delivered, so not Acquired: INVALID_RECORD_STATE.
    """
    rig = make_rig(start_offset=0, fidelity=fidelity)
    rig.log.append(3)
    rig.sp.acquire("C1", 3)
    with pytest.raises(ApiError, match=error):
        rig.sp.acknowledge("C1", [ack(1, 5, ACCEPT)])
    assert [rig.sp.state_at(o) for o in range(3)] == [(ACQUIRED, 1)] * 3


def test_in_flight_limit_is_checked_before_the_fetch_and_caps_the_window() -> None:
    """Kafka's ``SharePartition.canAcquireRecords``: the window SPEO - SPSO, checked before acquiring.

    A fetch may overshoot the limit (it takes whole batches); the next one gets nothing until the
    window shrinks or an in-flight record is Available again.
    """
    rig = make_rig(config=SharePartitionConfig(partition_max_record_locks=3), start_offset=0)
    rig.log.append(2)
    rig.log.append(2)
    rig.log.append(2)
    assert ranges(rig.sp.acquire("C1", 3)) == [(0, 3, 1)]  # the second batch is taken whole
    assert rig.sp.speo == 4
    assert rig.sp.acquire("C2", 10) == []  # 4 in flight >= 3
    rig.sp.acknowledge("C1", [ack(0, 0, ACCEPT)])
    assert rig.sp.acquire("C2", 10) == []  # 3 in flight (1-3): still at the limit
    rig.sp.acknowledge("C1", [ack(1, 1, RELEASE)])
    assert ranges(rig.sp.acquire("C2", 10)) == [(1, 1, 2), (4, 5, 1)]  # an Available record opens the fetch


def test_acquired_records_cap_and_window_cap_kip() -> None:
    """KIP-932, 'Fetching and acknowledging records': the lock limit caps the acquired records and the window."""
    config = SharePartitionConfig(partition_max_record_locks=3)
    rig = make_rig(config=config, start_offset=0, fidelity="kip")
    rig.log.append(5)
    assert ranges(rig.sp.acquire("C1", 10)) == [(0, 2, 1)]
    assert rig.sp.speo == 3  # the window is capped too: 3-4 stay beyond the SPEO
    assert rig.sp.acquire("C2", 10) == []
    rig.sp.acknowledge("C1", [ack(0, 0, ACCEPT)])
    assert ranges(rig.sp.acquire("C2", 10)) == [(3, 3, 1)]


def test_a_fetch_takes_the_whole_batch_beyond_max_records() -> None:
    """Kafka's ``SharePartition.acquireNewBatchRecords``: max_records is soft; a batch it reaches is taken whole."""
    rig = make_rig(start_offset=0)
    rig.log.append(4)
    rig.log.append(4)
    rig.log.append(4)
    assert ranges(rig.sp.acquire("C1", 6)) == [(0, 7, 1)]
    assert rig.sp.speo == 8
    assert list(rig.sp.lock_deadlines().values()) == [30_000]
    assert ranges(rig.sp.acquire("C2", 1)) == [(8, 11, 1)]


def test_whole_batches_share_one_lock_and_the_rest_of_a_cut_batch_waits_in_flight() -> None:
    """KIP-932's share-state example: max_records is a hard cap; a cut batch's rest waits Available in flight."""
    rig = make_rig(start_offset=0, fidelity="kip")
    rig.log.append(4)
    rig.log.append(4)
    assert ranges(rig.sp.acquire("C1", 6)) == [(0, 5, 1)]
    assert rig.sp.speo == 8 and rig.sp.state_at(7) == (AVAILABLE, 0)
    assert list(rig.sp.lock_deadlines().values()) == [30_000]
    assert [(v.first_offset, v.last_offset, v.state) for v in rig.sp.records()] == [
        (0, 3, ACQUIRED),
        (4, 5, ACQUIRED),
        (6, 7, AVAILABLE),
    ]


@pytest.mark.parametrize("fidelity", ["kafka", "kip"])
def test_gap_acknowledgement_archives_compacted_offsets(fidelity) -> None:
    """The leader hands out 0-4 although 2 was compacted away; the consumer acknowledges it as GAP.

    Kafka's ``SharePartition.acknowledge`` (GAP archives, as REJECT).
    """
    rig = make_rig(start_offset=0, fidelity=fidelity)
    rig.log.append(5)
    rig.log.compact([2])
    rig.sp.acquire("C1", 5)
    assert [r.offset for r in rig.log.read(0, 4)] == [0, 1, 3, 4]
    rig.sp.acknowledge("C1", [ack(0, 4, ACCEPT, ACCEPT, GAP, ACCEPT, ACCEPT)])
    assert rig.sp.spso == 5
    if fidelity == "kafka":
        assert rig.last_write() == (0, [(0, 1, 2, 1), (2, 2, 4, 1), (3, 4, 2, 1)])
    else:
        assert rig.last_write() == (5, [])


def test_log_start_moving_past_acquired_records_writes_nothing_and_late_acks_succeed() -> None:
    """Kafka's ``SharePartition.updateCacheAndOffsets`` / ``archiveAvailableRecordsOnLsoMovement``: retention to 3
    while 0-1 (C1) and 2 (C2) are acquired.

    The SPSO moves at once, in memory; nothing is written until the next change, whose write carries the new
    start offset. Only Available records are archived: 0-2 stay Acquired by their members. Acknowledging 1 is
    accepted and changes nothing (``acknowledgeBatchRecords`` skips offsets below the start), and C1's lock
    timing out archives 0-1 with a write (``releaseAcquisitionLockOnTimeout``: Archived below the start).
    """
    rig = make_rig(start_offset=0, config=SharePartitionConfig(record_lock_duration_ms=1_000))
    rig.log.append(2)
    rig.log.append(4)
    rig.log.append(1)
    rig.sp.acquire("C1", 2)
    rig.sp.acquire("C2", 4)
    rig.sp.acknowledge("C2", [ack(4, 4, ACCEPT)])
    rig.sp.acknowledge("C2", [ack(5, 5, RELEASE)])  # 5 is Available again, 6 never delivered
    sent = len(rig.persister.sent)
    rig.log.delete_records_before(7)
    assert rig.sp.move_log_start() is None
    assert len(rig.persister.sent) == sent
    assert rig.sp.spso == rig.sp.speo == 7
    assert rig.sp.acquired_count == 4  # 0-1 by C1, 2-3 by C2: the Available 5 was archived, 6 never came in
    assert [(o, rig.sp.state_at(o), rig.sp.owner_at(o)) for o in (1, 2, 5)] == [
        (1, (ACQUIRED, 1), "C1"),
        (2, (ACQUIRED, 1), "C2"),
        (5, (ARCHIVED, 0), None),
    ]
    assert rig.sp.acknowledge("C1", [ack(1, 1, REJECT)]) is None  # no error, nothing to write
    assert rig.sp.state_at(1) == (ACQUIRED, 1)
    assert rig.stored() == (0, [(4, 4, 2, 1), (5, 5, 0, 1)])
    rig.scheduler.advance(1_000)  # both locks time out: 0-1 and 2-3 are archived, in one write each
    first_timeout = rig.persister.sent[sent].request.topics[0].partitions[0]
    assert [(b.first_offset, b.last_offset, int(b.delivery_state)) for b in first_timeout.state_batches] == [(0, 1, 4)]
    assert len(rig.persister.sent) == sent + 2 and rig.last_write() == (7, [(2, 3, 4, 1)])
    assert rig.sp.acquired_count == 0 and rig.sp.state_at(1) == (ARCHIVED, 0)
    assert (new_leader(rig).spso, new_leader(rig).speo) == (7, 7)


def test_log_start_passing_acquired_records_unlocks_them_when_released() -> None:
    """Kafka's ``SharePartition.releaseAcquiredRecords`` (a share session ending): records the log start passed
    while acquired go to Archived, not Available, and the write says so."""
    rig = make_rig(start_offset=0)
    rig.log.append(3)
    rig.sp.acquire("C1", 3)
    rig.log.delete_records_before(2)
    rig.sp.move_log_start()
    write = rig.sp.release_member("C1")
    assert write is not None and rig.last_write() == (2, [(0, 1, 4, 1), (2, 2, 0, 1)])
    assert rig.sp.acquired_count == 0
    assert rig.sp.state_at(0) == (ARCHIVED, 0) and rig.sp.state_at(2) == (AVAILABLE, 1)


def test_log_start_moving_archives_what_it_passes_and_late_acks_succeed() -> None:
    """KIP-932, 'Log retention': retention to 3 while 1 is acquired archives it in one write; its ack succeeds."""
    rig = make_rig(start_offset=0, fidelity="kip")
    rig.log.append(6)
    rig.sp.acquire("C1", 2)
    rig.sp.acquire("C2", 4)
    rig.sp.acknowledge("C2", [ack(4, 4, ACCEPT)])
    rig.log.delete_records_before(3)
    rig.sp.move_log_start()
    assert rig.last_write() == (3, [])
    assert rig.sp.spso == 3 and rig.sp.acquired_count == 2  # 3 and 5 are still acquired by C2
    assert rig.sp.acknowledge("C1", [ack(1, 1, REJECT)]) is None  # no error, nothing to write
    assert rig.sp.state_at(1) == (ARCHIVED, 0)
    assert rig.stored() == (3, [(4, 4, 2, 1)])


def test_read_committed_skips_aborted_and_holds_at_the_last_stable_offset() -> None:
    """0-1 plain, 2-3 transactional (open, then aborted), 5 plain after the marker at 4."""
    config = SharePartitionConfig(isolation_level="read_committed")
    rig = make_rig(config=config, start_offset=0)
    rig.log.append(2)
    rig.log.append(2, producer_id=7, transactional=True)
    assert ranges(rig.sp.acquire("C1", 10)) == [(0, 1, 1)]  # the open transaction blocks: SPEO <= LSO
    assert rig.sp.speo == 2
    rig.log.end_transaction(7, commit=False)
    rig.log.append(1)
    assert ranges(rig.sp.acquire("C1", 10)) == [(5, 5, 1)]  # 2-3 aborted and the marker 4: never delivered
    assert [rig.sp.state_at(o) for o in (2, 3, 4)] == [(ARCHIVED, 0)] * 3
    uncommitted = make_rig(start_offset=0)
    uncommitted.log.append(2, producer_id=7, transactional=True)
    assert ranges(uncommitted.sp.acquire("C1", 10)) == [(0, 1, 1)]


def test_committed_transaction_is_delivered_under_read_committed() -> None:
    rig = make_rig(config=SharePartitionConfig(isolation_level="read_committed"), start_offset=0)
    rig.log.append(2, producer_id=7, transactional=True)
    assert rig.sp.acquire("C1", 10) == []
    rig.log.end_transaction(7, commit=True)
    assert ranges(rig.sp.acquire("C1", 10)) == [(0, 1, 1)]


def deferred_rig_with_acquired(*, produced: int, acquired: int) -> Rig:
    """A loaded share-partition whose writes wait for ``persister.deliver()``, with C1 holding some records."""
    rig = make_rig(deferred=True, start_offset=0)
    rig.persister.deliver()  # whatever loading queued is written; later writes wait for the test
    rig.log.append(produced)
    rig.sp.acquire("C1", acquired)
    return rig


def test_change_takes_effect_when_the_write_completes() -> None:
    """With a deferred persister the records stay Acquired (pending) until the share coordinator answers."""
    rig = deferred_rig_with_acquired(produced=3, acquired=3)
    write = rig.sp.acknowledge("C1", [ack(0, 2, ACCEPT)])
    assert write is not None and write.error is None
    assert rig.sp.state_at(0) == (ACQUIRED, 1) and rig.sp.spso == 0
    with pytest.raises(ApiError, match="in progress"):
        rig.sp.acknowledge("C1", [ack(0, 0, ACCEPT)])
    rig.scheduler.advance(30_000)  # the lock expires meanwhile: pending records are left alone
    assert rig.sp.state_at(0) == (ACQUIRED, 1)
    rig.persister.deliver()
    assert write.error is Errors.NONE
    assert rig.sp.spso == 3 and rig.sp.acquired_count == 0


def test_failed_write_leaves_records_acquired_and_times_out_an_expired_lock() -> None:
    """Kafka's ``SharePartition.rollbackOrProcessStateUpdates``: a refused acknowledgement rolls back.

    The lock ran out while the write was pending, so the records time out as soon as they are
    Acquired again (KAFKA-19476: an expired lock runs on rollback).
    """
    rig = deferred_rig_with_acquired(produced=2, acquired=2)
    write = rig.sp.acknowledge("C1", [ack(0, 1, ACCEPT)])
    rig.scheduler.advance(30_000)  # the lock runs out while the write is pending
    rig.persister.queue.clear()
    rig.sp.complete_write(write.write_id, Errors.COORDINATOR_LOAD_IN_PROGRESS)
    assert rig.sp.state_at(0) == (ACQUIRED, 1) and not rig.sp.pending_writes
    assert rig.sp.lock_deadlines() == {0: 30_000}  # due now
    rig.scheduler.advance(0)
    assert [w.origin for w in rig.sp.pending_writes] == ["lock 0 timeout"]


def test_a_lock_timeout_stands_when_its_write_fails() -> None:
    """Kafka's ``SharePartition.releaseAcquisitionLockOnTimeout``: the records move even if the write fails."""
    rig = deferred_rig_with_acquired(produced=2, acquired=2)
    rig.scheduler.advance(30_000)
    [write] = rig.sp.pending_writes
    rig.persister.queue.clear()
    rig.sp.complete_write(write.write_id, Errors.COORDINATOR_NOT_AVAILABLE)
    assert [rig.sp.state_at(o) for o in (0, 1)] == [(AVAILABLE, 1)] * 2
    assert rig.sp.acquired_count == 0 and rig.sp.lock_deadlines() == {}
    assert rig.stored() == (0, [])  # the share coordinator never heard of it
    assert ranges(rig.sp.acquire("C2", 2)) == [(0, 1, 2)]


def test_a_fenced_share_partition_stops() -> None:
    rig = deferred_rig_with_acquired(produced=3, acquired=2)
    write = rig.sp.acknowledge("C1", [ack(0, 0, ACCEPT)])
    rig.persister.queue.clear()
    rig.sp.complete_write(write.write_id, Errors.FENCED_STATE_EPOCH)
    assert rig.sp.fenced is Errors.FENCED_STATE_EPOCH
    assert rig.sp.lock_deadlines() == {}
    assert rig.sp.acquire("C2", 1) == [] and rig.sp.release_member("C1") is None
    with pytest.raises(ApiError, match="FENCED_STATE_EPOCH"):
        rig.sp.acknowledge("C1", [ack(1, 1, ACCEPT)])


def new_leader(rig: Rig) -> SharePartition:
    """The share-partition loaded afresh by the next leader (leader epoch 1), from the rig's log and persister."""
    return SharePartition.load(
        GROUP,
        TOPIC,
        0,
        rig.log,
        config=rig.sp.config,
        scheduler=rig.scheduler,
        persister=rig.persister,
        leader_epoch=1,
    )


def test_state_after_leader_failover_falls_back_to_durable_state() -> None:
    """Acquired is not persisted: a new leader sees the last durable states, and delivery counts undercount
    (derived from KIP-932, *Share-group state persistence*)."""
    rig = make_rig(100)
    rig.log.append(10)
    rig.sp.acquire("C1", 3)
    rig.sp.acknowledge("C1", [ack(100, 100, RELEASE)])
    rig.sp.acquire("C1", 1)  # 100 again, dc 2 (not persisted)
    rig.sp.acknowledge("C1", [ack(102, 102, ACCEPT)])
    new = new_leader(rig)
    assert [new.state_at(o) for o in range(100, 104)] == [
        (AVAILABLE, 1),
        (AVAILABLE, 0),
        (ACKNOWLEDGED, 1),
        (AVAILABLE, 0),
    ]
    assert (new.spso, new.speo) == (100, 103)
    with pytest.raises(ApiError, match="INVALID_RECORD_STATE"):
        new.acknowledge("C1", [ack(100, 100, ACCEPT)])


def test_a_new_leader_archives_what_retention_passed_since_the_last_write() -> None:
    """KIP-932, 'Log retention': the new leader's first act is one write moving the start to the log start."""
    rig = make_rig(start_offset=0, fidelity="kip")
    rig.log.append(5)
    rig.sp.acquire("C1", 5)
    rig.sp.acknowledge("C1", [ack(1, 1, RELEASE), ack(3, 3, ACCEPT)])
    rig.log.delete_records_before(2)
    new = new_leader(rig)
    assert rig.last_write() == (2, [])
    assert (new.spso, new.speo) == (2, 4)
    assert [new.state_at(o) for o in range(2, 5)] == [(AVAILABLE, 0), (ACKNOWLEDGED, 1), (AVAILABLE, 0)]
    assert rig.stored() == (2, [(3, 3, 2, 1)])


def test_a_zombie_holding_only_records_the_log_start_passed_is_fenced_when_it_releases_them() -> None:
    """Hypothesis case (kafka): produce 1, C1 acquires it, retention passes it, the leader fails over.

    The zombie still holds 0 Acquired below its start offset. Acknowledging it writes nothing (Kafka's
    ``acknowledgeBatchRecords`` skips offsets below the start), so that cannot fence it; releasing it writes
    (Archived below the start) and the share coordinator fences that write with the old leader epoch.
    """
    rig = make_rig(
        start_offset=0,
        config=SharePartitionConfig(
            delivery_count_limit=2, partition_max_record_locks=3, record_lock_duration_ms=1_000
        ),
    )
    rig.log.append(1)
    assert ranges(rig.sp.acquire("C1", 1)) == [(0, 0, 1)]
    rig.log.delete_records_before(1)
    assert rig.sp.move_log_start() is None
    zombie = rig.sp
    rig.sp = new = SharePartition.load(
        GROUP,
        TOPIC,
        0,
        rig.log,
        config=zombie.config,
        scheduler=rig.scheduler,
        persister=rig.persister,
        leader_epoch=zombie.leader_epoch + 1,
    )
    assert (new.spso, new.speo) == (1, 1) and new.acquired_count == 0
    assert [(v.first_offset, v.state, v.member_id) for v in zombie.records()] == [(0, ACQUIRED, "C1")]
    assert zombie.acknowledge("C1", [ack(0, 0, ACCEPT)]) is None  # below the start: nothing to write
    assert zombie.fenced is None
    write = zombie.release_member("C1")
    assert write is not None
    rig.persister.deliver()
    assert write.error is Errors.FENCED_LEADER_EPOCH and zombie.fenced is Errors.FENCED_LEADER_EPOCH


def test_config_names_and_bounds() -> None:
    """The diagram's delivery.attempt.limit is accepted as an alias; out-of-range values are refused."""
    assert SharePartitionConfig(delivery_attempt_limit=3).delivery_count_limit == 3
    with pytest.raises(ValueError, match="delivery_count_limit"):
        SharePartitionConfig(delivery_count_limit=11)
    with pytest.raises(ValueError, match="isolation_level"):
        SharePartitionConfig(isolation_level="serializable")


def test_a_refused_write_reaches_the_client_as_kafka_maps_it() -> None:
    """Kafka's ``SharePartition.fetchPersisterError``: the client's error for each share coordinator error."""
    rig = make_rig(start_offset=0)
    expected = {
        Errors.NOT_COORDINATOR: Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.COORDINATOR_NOT_AVAILABLE: Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.COORDINATOR_LOAD_IN_PROGRESS: Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.GROUP_ID_NOT_FOUND: Errors.INVALID_REQUEST,
        Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.INVALID_REQUEST,
        Errors.FENCED_STATE_EPOCH: Errors.FENCED_STATE_EPOCH,
        Errors.FENCED_LEADER_EPOCH: Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.INVALID_REQUEST: Errors.UNKNOWN_SERVER_ERROR,
        Errors.NONE: Errors.NONE,
    }
    assert {error: rig.sp.client_error(error) for error in expected} == expected
    kip = make_rig(start_offset=0, fidelity="kip")
    assert all(kip.sp.client_error(error) is error for error in expected)
