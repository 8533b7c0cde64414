"""KIP-932's worked examples, every step asserted: the in-flight records example and the share-state writes.

States are compared offset by offset (state, delivery count); writes as (StartOffset,
[(FirstOffset, LastOffset, DeliveryState, DeliveryCount)]); the share coordinator's stored
state after replaying its records, and a coordinator rebuilt from its log, after every step.
Under ``fidelity="kip"`` the writes are exactly the KIP's (section 'Examples with share-group
state'); under ``kafka`` the same steps write what Kafka's ``SharePartition`` writes.
"""

from __future__ import annotations

from share_support import Rig, ack, make_rig

from kip_lab.protocol.share import AcknowledgeType
from kip_lab.share.partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, LockTimer

ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT
AV, ACKED, ARCH = 0, 2, 4  # DeliveryState codes


def window(rig: Rig) -> dict[int, tuple[str, int]]:
    return {o: rig.sp.state_at(o) for o in range(rig.sp.spso, rig.sp.speo)}


def expand(*runs: tuple[int, int, str, int]) -> dict[int, tuple[str, int]]:
    return {o: (state, dc) for first, last, state, dc in runs for o in range(first, last + 1)}


def assert_replay_matches(rig: Rig) -> None:
    assert rig.rebuilt().states == rig.coordinator.states


# -- the share-state writes example ------------------------------------------------
def test_share_state_writes_example_every_step() -> None:
    """KIP-932, 'Examples with share-group state': every write of the example, as printed."""
    rig = make_rig(100, fidelity="kip")  # a topic-partition whose latest offset is 100; StartOffset -1
    sent = 0  # the load writes the resolved start offset (step 0)

    def step(expected_window, spso, speo, write, stored) -> None:
        nonlocal sent
        assert (rig.sp.spso, rig.sp.speo) == (spso, speo)
        assert window(rig) == expected_window
        if write is None:  # acquisition is never persisted
            assert len(rig.persister.sent) == sent
        else:
            assert len(rig.persister.sent) == sent + 1
            assert rig.last_write() == write
            assert rig.persister.sent[-1].write.error is not None  # the leader waited for the answer
        sent = len(rig.persister.sent)
        assert rig.stored() == stored
        assert_replay_matches(rig)

    # 0: starting state, latest offset 100
    step({}, 100, 100, (100, []), (100, []))
    # 1: fetch 100-109
    rig.log.append(10)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in rig.sp.acquire("C1", 10)] == [(100, 109, 1)]
    step(expand((100, 109, ACQUIRED, 1)), 100, 110, None, (100, []))
    # 2: acknowledge 100-109
    rig.sp.acknowledge("C1", [ack(100, 109, ACCEPT)])
    step({}, 110, 110, (110, []), (110, []))
    # 3: fetch 110-119: consumer 1 gets 110-112, consumer 2 gets 113-118, consumer 3 gets 119
    rig.log.append(10)
    assert rig.sp.acquire("C1", 3)[0].last_offset == 112
    rig.scheduler.advance(1_000)
    assert rig.sp.acquire("C2", 6)[0].first_offset == 113
    rig.scheduler.advance(1_000)
    assert rig.sp.acquire("C3", 1)[0].first_offset == 119
    step(expand((110, 119, ACQUIRED, 1)), 110, 120, None, (110, []))
    assert [rig.sp.owner_at(o) for o in (110, 112, 113, 118, 119)] == ["C1", "C1", "C2", "C2", "C3"]
    # 4: release 110 (consumer 1)
    rig.sp.acknowledge("C1", [ack(110, 110, RELEASE)])
    step(
        expand((110, 110, AVAILABLE, 1), (111, 119, ACQUIRED, 1)),
        110,
        120,
        (-1, [(110, 110, AV, 1)]),
        (110, [(110, 110, AV, 1)]),
    )
    # 5: acknowledge 119 (consumer 3)
    rig.sp.acknowledge("C3", [ack(119, 119, ACCEPT)])
    step(
        expand((110, 110, AVAILABLE, 1), (111, 118, ACQUIRED, 1), (119, 119, ACKNOWLEDGED, 1)),
        110,
        120,
        (-1, [(119, 119, ACKED, 1)]),
        (110, [(110, 110, AV, 1), (119, 119, ACKED, 1)]),
    )
    # 6: fetch records 110, 120 (consumer 1)
    rig.log.append(1)
    got = rig.sp.acquire("C1", 10)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [(110, 110, 2), (120, 120, 1)]
    step(
        expand((110, 110, ACQUIRED, 2), (111, 118, ACQUIRED, 1), (119, 119, ACKNOWLEDGED, 1), (120, 120, ACQUIRED, 1)),
        110,
        121,
        None,
        (110, [(110, 110, AV, 1), (119, 119, ACKED, 1)]),
    )
    # 7: lock timeout elapsed on 111, 112 (consumer 1's records from step 3; 110 was re-locked at step 6)
    fired = rig.scheduler.run(30_000)
    assert [f.key for f in fired] == [LockTimer(1)]  # step 1's lock was disarmed when 100-109 were acknowledged
    step(
        expand(
            (110, 110, ACQUIRED, 2),
            (111, 112, AVAILABLE, 1),
            (113, 118, ACQUIRED, 1),
            (119, 119, ACKNOWLEDGED, 1),
            (120, 120, ACQUIRED, 1),
        ),
        110,
        121,
        (-1, [(111, 112, AV, 1)]),
        (110, [(110, 112, AV, 1), (119, 119, ACKED, 1)]),
    )
    # 8: acknowledge 113-118 (consumer 2), before its own lock (t=31000) runs out
    rig.sp.acknowledge("C2", [ack(113, 118, ACCEPT)])
    step(
        expand((110, 110, ACQUIRED, 2), (111, 112, AVAILABLE, 1), (113, 119, ACKNOWLEDGED, 1), (120, 120, ACQUIRED, 1)),
        110,
        121,
        (-1, [(113, 118, ACKED, 1)]),
        (110, [(110, 112, AV, 1), (113, 119, ACKED, 1)]),
    )
    # 9: fetch records 111, 112 (consumer 3)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in rig.sp.acquire("C3", 10)] == [(111, 112, 2)]
    step(
        expand((110, 112, ACQUIRED, 2), (113, 119, ACKNOWLEDGED, 1), (120, 120, ACQUIRED, 1)),
        110,
        121,
        None,
        (110, [(110, 112, AV, 1), (113, 119, ACKED, 1)]),
    )
    # 10: acknowledge 110 (consumer 1): the SPSO moves to 111 but the KIP's write keeps StartOffset -1
    rig.sp.acknowledge("C1", [ack(110, 110, ACCEPT)])
    step(
        expand((111, 112, ACQUIRED, 2), (113, 119, ACKNOWLEDGED, 1), (120, 120, ACQUIRED, 1)),
        111,
        121,
        (-1, [(110, 110, ACKED, 2)]),
        (110, [(110, 110, ACKED, 2), (111, 112, AV, 1), (113, 119, ACKED, 1)]),
    )
    # 11: acknowledge 111, 112 (consumer 3)
    rig.sp.acknowledge("C3", [ack(111, 112, ACCEPT)])
    step(expand((120, 120, ACQUIRED, 1)), 120, 121, (120, []), (120, []))


def test_share_state_writes_records_on_the_state_topic() -> None:
    """KIP-932, 'Share-group state records': a write leaving no batches is a (small) ShareSnapshot."""
    rig = make_rig(100, fidelity="kip")
    rig.log.append(10)
    rig.sp.acquire("C1", 10)
    rig.sp.acknowledge("C1", [ack(100, 109, ACCEPT)])
    rig.log.append(10)
    rig.sp.acquire("C1", 10)
    rig.sp.acknowledge("C1", [ack(110, 110, RELEASE)])
    kinds = [
        (type(e.record.key).__name__, e.record.value.snapshot_epoch, e.record.value.start_offset)
        for e in rig.coordinator.log
    ]
    assert kinds == [
        ("ShareSnapshotKey", 0, -1),  # InitializeShareGroupState
        ("ShareSnapshotKey", 1, -1),  # the leader's read recorded leader epoch 0
        ("ShareSnapshotKey", 2, 100),  # {100, []}
        ("ShareSnapshotKey", 3, 110),  # {110, []}
        ("ShareUpdateKey", 3, -1),  # {-1, [110 Available dc1]}
    ]


# -- the in-flight records example ----------------------------------------------------
def test_in_flight_records_example() -> None:
    """KIP-932, 'In-flight records example': the states of offsets 0-9, built by the example's steps."""
    rig = make_rig(fidelity="kip")
    rig.log.append(2)  # offsets 0-1
    rig.log.append(7)  # offsets 2-8, one batch
    rig.sp.acquire("C1", 2)
    rig.sp.acknowledge("C1", [ack(0, 1, ACCEPT, REJECT)])
    rig.sp.acquire("C1", 5)  # 2-6 acquired; the rest of the batch (7, 8) comes into flight Available
    rig.sp.acknowledge("C1", [ack(3, 3, RELEASE), ack(5, 6, ACCEPT, REJECT)])
    assert rig.sp.acquire("C2", 1)[0].first_offset == 3  # the second delivery of record 3
    rig.sp.acknowledge("C2", [ack(3, 3, RELEASE)])
    rig.log.append(5)  # offsets 9.. are beyond the SPEO

    expected = [
        (ARCHIVED, 0),
        (ARCHIVED, 0),
        (ACQUIRED, 1),
        (AVAILABLE, 2),
        (ACQUIRED, 1),
        (ACKNOWLEDGED, 1),
        (ARCHIVED, 1),
        (AVAILABLE, 0),
        (AVAILABLE, 0),
        (AVAILABLE, 0),
    ]
    assert [rig.sp.state_at(o) for o in range(10)] == expected
    assert (rig.sp.spso, rig.sp.speo) == (2, 9)  # in-flight offsets 2..8
    # Durable: the SPSO, dc 2 at offset 3, Acknowledged 5, Archived 6; acquired 2 and 4 are not persisted.
    assert rig.stored() == (2, [(3, 3, AV, 2), (5, 5, ACKED, 1), (6, 6, ARCH, 1)])
    assert_replay_matches(rig)


# -- the same steps under Kafka's behaviour -------------------------------------------------------
def test_share_state_writes_example_under_kafka() -> None:
    """The share-state example's steps as Kafka's ``SharePartition.writeShareGroupState`` writes them.

    Every write carries the SPSO as it was before the change, and the changed ranges; loading a
    StartOffset of -1 writes nothing. The log holds one record per batch, so that acquisitions
    split as in the example (Kafka takes a fetched batch whole). The windows match the KIP's.
    """
    rig = make_rig(100)
    sent = 0

    def step(spso, speo, write, stored) -> None:
        nonlocal sent
        assert (rig.sp.spso, rig.sp.speo) == (spso, speo)
        if write is None:
            assert len(rig.persister.sent) == sent
        else:
            assert len(rig.persister.sent) == sent + 1
            assert rig.last_write() == write
        sent = len(rig.persister.sent)
        assert rig.stored() == stored
        assert_replay_matches(rig)

    def produce(count: int) -> None:
        for _ in range(count):
            rig.log.append(1)

    step(100, 100, None, (-1, []))  # 0: nothing written at load
    produce(10)
    rig.sp.acquire("C1", 10)  # 1
    step(100, 110, None, (-1, []))
    rig.sp.acknowledge("C1", [ack(100, 109, ACCEPT)])  # 2
    step(110, 110, (100, [(100, 109, ACKED, 1)]), (100, [(100, 109, ACKED, 1)]))
    produce(10)  # 3
    rig.sp.acquire("C1", 3)
    rig.scheduler.advance(1_000)
    rig.sp.acquire("C2", 6)
    rig.scheduler.advance(1_000)
    rig.sp.acquire("C3", 1)
    step(110, 120, None, (100, [(100, 109, ACKED, 1)]))
    rig.sp.acknowledge("C1", [ack(110, 110, RELEASE)])  # 4: the write's start prunes 100-109
    step(110, 120, (110, [(110, 110, AV, 1)]), (110, [(110, 110, AV, 1)]))
    rig.sp.acknowledge("C3", [ack(119, 119, ACCEPT)])  # 5
    step(110, 120, (110, [(119, 119, ACKED, 1)]), (110, [(110, 110, AV, 1), (119, 119, ACKED, 1)]))
    produce(1)  # 6
    got = rig.sp.acquire("C1", 10)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [(110, 110, 2), (120, 120, 1)]
    step(110, 121, None, (110, [(110, 110, AV, 1), (119, 119, ACKED, 1)]))
    assert [f.key for f in rig.scheduler.run(30_000)] == [LockTimer(1)]  # 7: 111-112 time out
    step(110, 121, (110, [(111, 112, AV, 1)]), (110, [(110, 112, AV, 1), (119, 119, ACKED, 1)]))
    rig.sp.acknowledge("C2", [ack(113, 118, ACCEPT)])  # 8
    step(110, 121, (110, [(113, 118, ACKED, 1)]), (110, [(110, 112, AV, 1), (113, 119, ACKED, 1)]))
    assert [(r.first_offset, r.last_offset) for r in rig.sp.acquire("C3", 10)] == [(111, 112)]  # 9
    step(110, 121, None, (110, [(110, 112, AV, 1), (113, 119, ACKED, 1)]))
    rig.sp.acknowledge("C1", [ack(110, 110, ACCEPT)])  # 10
    step(
        111, 121, (110, [(110, 110, ACKED, 2)]), (110, [(110, 110, ACKED, 2), (111, 112, AV, 1), (113, 119, ACKED, 1)])
    )
    rig.sp.acknowledge("C3", [ack(111, 112, ACCEPT)])  # 11
    step(120, 121, (111, [(111, 112, ACKED, 2)]), (111, [(111, 112, ACKED, 2), (113, 119, ACKED, 1)]))


def test_share_state_records_under_kafka() -> None:
    """Kafka's ``ShareCoordinatorShard.generateShareStateRecord``: ShareUpdates until the snapshot is due."""
    rig = make_rig(100)
    rig.log.append(10)
    rig.sp.acquire("C1", 10)
    rig.sp.acknowledge("C1", [ack(100, 109, ACCEPT)])
    rig.log.append(10)
    rig.sp.acquire("C1", 10)
    rig.sp.acknowledge("C1", [ack(110, 110, RELEASE)])
    kinds = [
        (type(e.record.key).__name__, e.record.value.snapshot_epoch, e.record.value.start_offset)
        for e in rig.coordinator.log
    ]
    assert kinds == [
        ("ShareSnapshotKey", 0, -1),  # InitializeShareGroupState
        ("ShareUpdateKey", 0, -1),  # the leader's read recorded leader epoch 0
        ("ShareUpdateKey", 0, 100),  # {100, [100-109 Acknowledged]}
        ("ShareUpdateKey", 0, 110),  # {110, [110 Available dc1]}
    ]


def test_in_flight_records_example_under_kafka() -> None:
    """The in-flight example's steps under Kafka's ``SharePartition.acquire``: the 7-record batch is taken whole.

    The states of 2-8 are the KIP's except that 7 and 8 were delivered with the batch (Acquired,
    delivery count 1) instead of waiting Available in flight.
    """
    rig = make_rig()
    rig.log.append(2)
    rig.log.append(7)
    rig.sp.acquire("C1", 2)
    rig.sp.acknowledge("C1", [ack(0, 1, ACCEPT, REJECT)])
    assert [(r.first_offset, r.last_offset) for r in rig.sp.acquire("C1", 5)] == [(2, 8)]
    rig.sp.acknowledge("C1", [ack(3, 3, RELEASE), ack(5, 6, ACCEPT, REJECT)])
    assert rig.sp.acquire("C2", 1)[0].first_offset == 3
    rig.sp.acknowledge("C2", [ack(3, 3, RELEASE)])
    rig.log.append(5)
    expected = [(ACQUIRED, 1), (AVAILABLE, 2), (ACQUIRED, 1), (ACKNOWLEDGED, 1), (ARCHIVED, 1), (ACQUIRED, 1)]
    assert [rig.sp.state_at(o) for o in range(2, 8)] == expected
    assert (rig.sp.spso, rig.sp.speo) == (2, 9)
    assert rig.stored() == (2, [(3, 3, AV, 2), (5, 5, ACKED, 1), (6, 6, ARCH, 1)])
    assert_replay_matches(rig)
