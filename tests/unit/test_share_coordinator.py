"""The share coordinator on ``__share_group_state``: records, replay, cadence, fencing, loading, pruning."""

from __future__ import annotations

from share_support import GROUP, TOPIC, ack, initialize, make_rig

from kip_lab.protocol.errors import Errors
from kip_lab.protocol.share import (
    AcknowledgeType,
    DeleteShareGroupStateRequest,
    DeleteStateData,
    DeleteStatePartition,
    DeliveryState,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    ReadStateData,
    ReadStatePartition,
    StateBatch,
    WriteShareGroupStateRequest,
    WriteStateData,
    WriteStatePartition,
)
from kip_lab.runtime.log import PartitionLog, Record
from kip_lab.share.config import ShareCoordinatorConfig
from kip_lab.share.coordinator import ShareCoordinator, java_string_hash, state_partition_for
from kip_lab.share.records import ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue


def batch(first: int, last: int, state: DeliveryState, count: int) -> StateBatch:
    return StateBatch(first_offset=first, last_offset=last, delivery_state=state, delivery_count=count)


def write(sc: ShareCoordinator, *, start: int = -1, batches=(), leader_epoch: int = 0, state_epoch: int = 0) -> Errors:
    data = WriteStatePartition(
        partition=0, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start, state_batches=list(batches)
    )
    request = WriteShareGroupStateRequest(group_id=GROUP, topics=[WriteStateData(topic_id=TOPIC, partitions=[data])])
    return sc.write_share_group_state(request).response.results[0].partitions[0].error_code


def read(sc: ShareCoordinator, leader_epoch: int = 0):
    request = ReadShareGroupStateRequest(
        group_id=GROUP,
        topics=[ReadStateData(topic_id=TOPIC, partitions=[ReadStatePartition(partition=0, leader_epoch=leader_epoch)])],
    )
    return sc.read_share_group_state(request).response.results[0].partitions[0]


def summary(sc: ShareCoordinator):
    request = ReadShareGroupStateSummaryRequest(
        group_id=GROUP, topics=[ReadStateData(topic_id=TOPIC, partitions=[ReadStatePartition(partition=0)])]
    )
    return sc.read_share_group_state_summary(request).response.results[0].partitions[0]


def delete(sc: ShareCoordinator) -> Errors:
    request = DeleteShareGroupStateRequest(
        group_id=GROUP, topics=[DeleteStateData(topic_id=TOPIC, partitions=[DeleteStatePartition(partition=0)])]
    )
    return sc.delete_share_group_state(request).response.results[0].partitions[0].error_code


def key(kind):
    return kind(group_id=GROUP, topic_id=TOPIC, partition=0)


def test_replay_with_snapshots_updates_and_a_stale_update() -> None:
    """The latest snapshot plus the updates of its snapshot epoch; a stale-epoch update is ignored."""
    log = PartitionLog("__share_group_state")
    av, acked = DeliveryState.AVAILABLE, DeliveryState.ACKNOWLEDGED
    log.append(
        [
            Record(
                key(ShareSnapshotKey),
                ShareSnapshotValue(snapshot_epoch=1, state_epoch=5, leader_epoch=-1, start_offset=-1),
            )
        ]
    )
    log.append([Record(key(ShareUpdateKey), ShareUpdateValue(snapshot_epoch=1, leader_epoch=3, start_offset=100))])
    log.append(
        [
            Record(
                key(ShareUpdateKey),
                ShareUpdateValue(
                    snapshot_epoch=1, leader_epoch=3, start_offset=-1, state_batches=[batch(110, 110, av, 1)]
                ),
            )
        ]
    )
    log.append(
        [
            Record(
                key(ShareSnapshotKey),
                ShareSnapshotValue(
                    snapshot_epoch=2,
                    state_epoch=5,
                    leader_epoch=3,
                    start_offset=110,
                    state_batches=[batch(110, 110, av, 1)],
                ),
            )
        ]
    )
    log.append(
        [
            Record(
                key(ShareUpdateKey),
                ShareUpdateValue(
                    snapshot_epoch=1, leader_epoch=3, start_offset=-1, state_batches=[batch(111, 111, acked, 1)]
                ),
            )
        ]
    )
    log.append(
        [
            Record(
                key(ShareUpdateKey),
                ShareUpdateValue(
                    snapshot_epoch=2, leader_epoch=3, start_offset=-1, state_batches=[batch(119, 119, acked, 1)]
                ),
            )
        ]
    )
    sc = ShareCoordinator.from_log(log)
    state = sc.state(GROUP, TOPIC, 0)
    assert (state.state_epoch, state.leader_epoch, state.snapshot_epoch) == (5, 3, 2)
    assert (state.start_offset, state.spans) == (110, ((110, 110, 0, 1), (119, 119, 2, 1)))
    assert sc.prunable_offset() == 3
    assert ShareCoordinator.from_log(log, start_offset=sc.prunable_offset()).states == sc.states
    # the deletion marker
    assert delete(sc) is Errors.NONE
    assert sc.state(GROUP, TOPIC, 0) is None
    assert read(sc, 3).error_code is Errors.INVALID_REQUEST
    assert ShareCoordinator.from_log(log).states == {}
    assert delete(sc) is Errors.NONE and log.end_offset == 7  # already gone: nothing written
    assert sc.prunable_offset() == log.end_offset


def test_snapshot_cadence() -> None:
    """After N updates the next write is a snapshot of the combined state (N=2 here)."""
    sc = ShareCoordinator(ShareCoordinatorConfig(snapshot_update_records_per_snapshot=2))
    initialize(sc, start_offset=0)
    av = DeliveryState.AVAILABLE
    for offset in range(4):
        assert write(sc, batches=[batch(offset, offset, av, 1)]) is Errors.NONE
    kinds = [(type(e.record.key).__name__, e.record.value.snapshot_epoch) for e in sc.log]
    assert kinds == [
        ("ShareSnapshotKey", 0),
        ("ShareUpdateKey", 0),
        ("ShareUpdateKey", 0),
        ("ShareSnapshotKey", 1),
        ("ShareUpdateKey", 1),
    ]
    assert sc.log.entries(3, 4)[0].record.value.state_batches == [batch(0, 2, av, 1)]
    assert sc.prunable_offset() == 3
    assert ShareCoordinator.from_log(sc.log).states == sc.states
    assert ShareCoordinator.from_log(sc.log, start_offset=3).states == sc.states


def test_every_write_a_snapshot_with_zero_updates_per_snapshot() -> None:
    sc = ShareCoordinator(ShareCoordinatorConfig(snapshot_update_records_per_snapshot=0))
    initialize(sc, start_offset=0)
    write(sc, batches=[batch(0, 0, DeliveryState.AVAILABLE, 1)])
    assert all(type(e.record.key) is ShareSnapshotKey for e in sc.log)


def test_zombie_leader_is_fenced() -> None:
    """The new leader (epoch 1) reads; the old leader's (epoch 0) write is fenced and changes nothing."""
    rig = make_rig(10)
    rig.log.append(3)
    rig.sp.acquire("C1", 3)
    assert read(rig.coordinator, leader_epoch=1).error_code is Errors.NONE
    stored = rig.stored()
    rig.sp.acknowledge("C1", [ack(10, 12, AcknowledgeType.ACCEPT)])
    assert rig.persister.sent[-1].write.error is Errors.FENCED_LEADER_EPOCH
    assert rig.sp.state_at(10) == ("Acquired", 1)  # the change never took effect
    assert rig.stored() == stored
    assert ShareCoordinator.from_log(rig.coordinator.log).states == rig.coordinator.states


def test_state_epoch_fencing_and_reinitialization() -> None:
    """After a reset with a newer state epoch, a write with the old one is fenced."""
    sc = ShareCoordinator()
    initialize(sc, state_epoch=3, start_offset=0)
    assert write(sc, start=5, state_epoch=3) is Errors.NONE
    initialize(sc, state_epoch=4, start_offset=500)
    assert (read(sc).state_epoch, read(sc).start_offset, read(sc).state_batches) == (4, 500, [])
    assert write(sc, start=6, state_epoch=3) is Errors.FENCED_STATE_EPOCH
    assert (
        initialize(sc, state_epoch=2, start_offset=0).response.results[0].partitions[0].error_code
        is Errors.FENCED_STATE_EPOCH
    )
    assert (summary(sc).state_epoch, summary(sc).start_offset) == (4, 500)
    assert sc.state(GROUP, TOPIC, 0).leader_epoch == 0  # the reads recorded leader epoch 0


def test_unknown_share_partition() -> None:
    """Kafka's ``ShareCoordinatorShard.writeState`` / ``readState`` since KAFKA-19338: no state, INVALID_REQUEST.

    A write does not create the state (at the reference commit it did; KAFKA-19338 made it an error).
    """
    sc = ShareCoordinator()
    answer = read(sc)
    assert answer.error_code is Errors.INVALID_REQUEST
    assert answer.error_message == "Read operation on uninitialized share partition not allowed."
    assert write(sc, start=0) is Errors.INVALID_REQUEST
    assert summary(sc).error_code is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert len(sc.log) == 0


def test_unknown_share_partition_kip() -> None:
    """KIP-932, 'Using the share coordinator from the share-partition leader': UNKNOWN_TOPIC_OR_PARTITION."""
    sc = ShareCoordinator(ShareCoordinatorConfig(fidelity="kip"))
    assert read(sc).error_code is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert write(sc, start=0) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert summary(sc).error_code is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert len(sc.log) == 0


def test_a_write_combines_as_kafkas_batch_combiner() -> None:
    """Kafka's ``PersisterStateBatchCombiner.combineStateBatches``, at the share coordinator.

    Equal ranges: the higher delivery count wins, then the higher state; a write's own
    overlapping batches are merged; batches below the start offset are dropped.
    """
    sc = ShareCoordinator()
    initialize(sc, start_offset=0)
    acked, available, archived = DeliveryState.ACKNOWLEDGED, DeliveryState.AVAILABLE, DeliveryState.ARCHIVED
    assert write(sc, batches=[batch(0, 9, available, 2)]) is Errors.NONE
    assert write(sc, batches=[batch(0, 9, available, 1)]) is Errors.NONE  # a lower count loses
    assert sc.state(GROUP, TOPIC, 0).spans == ((0, 9, 0, 2),)
    assert write(sc, batches=[batch(0, 9, acked, 2)]) is Errors.NONE  # same count: the higher state wins
    assert sc.state(GROUP, TOPIC, 0).spans == ((0, 9, 2, 2),)
    overlapping = [batch(10, 15, available, 1), batch(12, 20, archived, 1), batch(18, 25, available, 3)]
    assert write(sc, batches=overlapping) is Errors.NONE
    assert sc.state(GROUP, TOPIC, 0).spans == ((0, 9, 2, 2), (10, 11, 0, 1), (12, 17, 4, 1), (18, 25, 0, 3))
    assert write(sc, start=14) is Errors.NONE
    assert sc.state(GROUP, TOPIC, 0).spans == ((14, 17, 4, 1), (18, 25, 0, 3))
    assert ShareCoordinator.from_log(sc.log).states == sc.states


def test_loading_refuses_every_rpc_until_replayed() -> None:
    rig = make_rig(10)
    rig.log.append(3)
    rig.sp.acquire("C1", 3)
    rig.sp.acknowledge("C1", [ack(10, 10, AcknowledgeType.RELEASE)])
    loading = ShareCoordinator.loading(rig.coordinator.log)
    assert read(loading).error_code is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert write(loading, start=11) is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert summary(loading).error_code is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert delete(loading) is Errors.COORDINATOR_LOAD_IN_PROGRESS
    steps = 1
    while not loading.load_step():
        steps += 1
    assert steps == rig.coordinator.log.batch_count
    assert loading.states == rig.coordinator.states
    assert read(loading).state_batches == [batch(10, 10, DeliveryState.AVAILABLE, 1)]


def test_failover_at_every_step_of_a_run() -> None:
    """A coordinator rebuilt from any prefix of the log equals the live one at that point."""
    rig = make_rig(0)
    live_states = [(rig.coordinator.log.batch_count, dict(rig.coordinator.states))]
    rig.log.append(6)
    for member, (first, last, kind) in [
        ("C1", (0, 1, AcknowledgeType.ACCEPT)),
        ("C1", (2, 2, AcknowledgeType.RELEASE)),
        ("C1", (3, 3, AcknowledgeType.REJECT)),
        ("C1", (4, 5, AcknowledgeType.ACCEPT)),
    ]:
        rig.sp.acquire(member, 6)
        rig.sp.acknowledge(member, [ack(first, last, kind)])
        live_states.append((rig.coordinator.log.batch_count, dict(rig.coordinator.states)))
    for batches, state in live_states:
        assert ShareCoordinator.from_log(rig.coordinator.log.truncated(batches)).states == state
    assert len({batches for batches, _ in live_states}) == len(live_states)  # every step wrote something


def test_state_partition_follows_kafkas_string_hash() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Utils.abs maps it to 0
    assert java_string_hash("") == 0
    expected = abs(java_string_hash("G1:topic_uuid:3")) % 50
    assert state_partition_for("G1", "topic_uuid", 3) == expected
    assert {state_partition_for("G1", "topic_uuid", p, 4) for p in range(40)} == {0, 1, 2, 3}


def test_a_negative_partition_is_invalid_request() -> None:
    """Kafka ``ShareCoordinatorShard.maybeGetWriteStateError`` / ``maybeGetReadStateError``: partition -1 is
    INVALID_REQUEST, "The partition id cannot be a negative number.", checked before anything else (even on a
    share-partition with state, and without writing a record)."""
    rig = make_rig(start_offset=0)
    sc = rig.coordinator
    data = WriteStatePartition(partition=-1, state_epoch=0, leader_epoch=0, start_offset=0)
    written = sc.write_share_group_state(
        WriteShareGroupStateRequest(group_id=GROUP, topics=[WriteStateData(topic_id=TOPIC, partitions=[data])])
    )
    answer = written.response.results[0].partitions[0]
    assert (answer.partition, answer.error_code) == (-1, Errors.INVALID_REQUEST)
    assert answer.error_message == "The partition id cannot be a negative number."
    assert written.records == []
    request = ReadShareGroupStateRequest(
        group_id=GROUP, topics=[ReadStateData(topic_id=TOPIC, partitions=[ReadStatePartition(partition=-1)])]
    )
    read_answer = sc.read_share_group_state(request).response.results[0].partitions[0]
    assert (read_answer.error_code, read_answer.error_message) == (
        Errors.INVALID_REQUEST,
        "The partition id cannot be a negative number.",
    )
