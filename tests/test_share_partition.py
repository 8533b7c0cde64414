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


def test_poison_message_released_until_the_limit_then_archived_while_others_flow() -> None:
    """Record 1 fails every delivery; dc 1..5, then Archived; record 0 and 2 are consumed meanwhile."""
    rig = make_rig(config=SharePartitionConfig(delivery_count_limit=5), start_offset=0)
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
    assert writes[0] == (-1, [(0, 0, 2, 1), (1, 1, 0, 1), (2, 2, 2, 1)])
    assert writes[1:4] == [(-1, [(1, 1, 0, dc)]) for dc in (2, 3, 4)]
    assert writes[4] == (3, [])  # the 5th failure archives it and the SPSO passes it
    assert rig.sp.acquire("C1", 10) == []
    rig.log.append(2)
    assert ranges(rig.sp.acquire("C2", 10)) == [(3, 4, 1)]


def test_poison_message_by_lock_timeouts() -> None:
    rig = make_rig(config=SharePartitionConfig(delivery_count_limit=2, record_lock_duration_ms=1_000), start_offset=0)
    rig.log.append(1)
    rig.sp.acquire("C1", 1)
    rig.scheduler.advance(1_000)
    assert rig.sp.state_at(0) == (AVAILABLE, 1)
    assert ranges(rig.sp.acquire("C2", 1)) == [(0, 0, 2)]
    rig.scheduler.advance(1_000)
    assert rig.last_write() == (1, [])
    assert rig.sp.spso == 1


def test_reject_archives_whatever_the_delivery_count() -> None:
    rig = make_rig(start_offset=0)
    rig.log.append(2)
    rig.sp.acquire("C1", 2)
    rig.sp.acknowledge("C1", [ack(1, 1, REJECT)])
    assert rig.sp.state_at(1) == (ARCHIVED, 1)
    assert rig.last_write() == (-1, [(1, 1, 4, 1)])


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


def test_malformed_batches_are_invalid_requests() -> None:
    rig = make_rig(start_offset=0)
    rig.log.append(4)
    rig.sp.acquire("C1", 4)
    with pytest.raises(ApiError, match="INVALID_REQUEST"):
        rig.sp.acknowledge("C1", [ack(2, 3, ACCEPT), ack(0, 2, ACCEPT)])
    with pytest.raises(ValueError, match="acknowledge_types must hold 1 or 3"):
        ack(0, 2, ACCEPT, ACCEPT)


def test_acquired_records_cap_and_window_cap() -> None:
    """With max locks 3, C2 gets nothing until C1's records are settled."""
    rig = make_rig(config=SharePartitionConfig(partition_max_record_locks=3), start_offset=0)
    rig.log.append(5)
    assert ranges(rig.sp.acquire("C1", 10)) == [(0, 2, 1)]
    assert rig.sp.speo == 3  # the window is capped too: 3-4 stay beyond the SPEO
    assert rig.sp.acquire("C2", 10) == []
    rig.sp.acknowledge("C1", [ack(0, 0, ACCEPT)])
    assert ranges(rig.sp.acquire("C2", 10)) == [(3, 3, 1)]


def test_whole_batches_share_one_lock_and_the_rest_of_a_cut_batch_waits_in_flight() -> None:
    rig = make_rig(start_offset=0)
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


def test_gap_acknowledgement_archives_compacted_offsets() -> None:
    """The leader hands out 0-4 although 2 was compacted away; the consumer acks it as GAP."""
    rig = make_rig(start_offset=0)
    rig.log.append(5)
    rig.log.compact([2])
    rig.sp.acquire("C1", 5)
    assert [r.offset for r in rig.log.read(0, 4)] == [0, 1, 3, 4]
    rig.sp.acknowledge("C1", [ack(0, 4, ACCEPT, ACCEPT, GAP, ACCEPT, ACCEPT)])
    assert rig.sp.spso == 5
    assert rig.last_write() == (5, [])


def test_log_start_moving_archives_what_it_passes_and_late_acks_succeed() -> None:
    """Retention to 3 while 1 is acquired; its acknowledgement still succeeds."""
    rig = make_rig(start_offset=0)
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


def test_failed_write_leaves_records_acquired_and_retries_an_expired_lock() -> None:
    rig = deferred_rig_with_acquired(produced=2, acquired=2)
    write = rig.sp.acknowledge("C1", [ack(0, 1, ACCEPT)])
    rig.scheduler.advance(30_000)  # the lock runs out while the write is pending
    rig.persister.queue.clear()
    rig.sp.complete_write(write.write_id, Errors.COORDINATOR_LOAD_IN_PROGRESS)
    assert rig.sp.state_at(0) == (ACQUIRED, 1) and not rig.sp.pending_writes
    assert rig.sp.lock_deadlines() == {0: 60_000}  # the expiry is retried one lock duration later
    rig.scheduler.advance(30_000)
    assert [w.origin for w in rig.sp.pending_writes] == ["lock 0 timeout"]


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
        config=SharePartitionConfig(),
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
    rig = make_rig(start_offset=0)
    rig.log.append(5)
    rig.sp.acquire("C1", 5)
    rig.sp.acknowledge("C1", [ack(1, 1, RELEASE), ack(3, 3, ACCEPT)])
    rig.log.delete_records_before(2)
    new = new_leader(rig)
    assert rig.last_write() == (2, [])
    assert (new.spso, new.speo) == (2, 4)
    assert [new.state_at(o) for o in range(2, 5)] == [(AVAILABLE, 0), (ACKNOWLEDGED, 1), (AVAILABLE, 0)]
    assert rig.stored() == (2, [(3, 3, 2, 1)])


def test_config_names_and_bounds() -> None:
    """The diagram's delivery.attempt.limit is accepted as an alias; out-of-range values are refused."""
    assert SharePartitionConfig(delivery_attempt_limit=3).delivery_count_limit == 3
    with pytest.raises(ValueError, match="delivery_count_limit"):
        SharePartitionConfig(delivery_count_limit=11)
    with pytest.raises(ValueError, match="isolation_level"):
        SharePartitionConfig(isolation_level="serializable")
