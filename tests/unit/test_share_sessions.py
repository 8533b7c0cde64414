"""Share sessions on the share-partition leader: KIP-932's 15-row session matrix, piggy-backing, rotation."""

from __future__ import annotations

import copy

import pytest
from share_support import GROUP, TOPIC, ack, initialize

from kip_lab.protocol.errors import Errors
from kip_lab.protocol.share import (
    AcknowledgeType,
    ForgottenTopic,
    ReadShareGroupStateRequest,
    ReadStateData,
    ReadStatePartition,
    ShareAcknowledgeRequest,
    ShareAcknowledgeRequestPartition,
    ShareAcknowledgeRequestTopic,
    ShareFetchRequest,
    ShareFetchRequestPartition,
    ShareFetchRequestTopic,
)
from kip_lab.runtime.scheduler import Scheduler
from kip_lab.share.config import ShareCoordinatorConfig, SharePartitionConfig
from kip_lab.share.coordinator import ShareCoordinator
from kip_lab.share.leader import SharePartitionLeader
from kip_lab.share.partition import ACQUIRED, AVAILABLE
from kip_lab.share.persister import CoordinatorPersister
from kip_lab.share.session import next_session_epoch
from kip_lab.share.topic_log import TopicLog

ACCEPT, RELEASE = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE


@pytest.fixture
def leader() -> SharePartitionLeader:
    """A broker leading topic_uuid:0 and :1 (each with 10 one-record batches), share group G1 initialized at 0."""
    coordinator = ShareCoordinator()
    leader = SharePartitionLeader(CoordinatorPersister(coordinator), scheduler=Scheduler())
    for partition in (0, 1):
        initialize(coordinator, partition=partition, start_offset=0)
        log = TopicLog(TOPIC, partition)
        for _ in range(10):
            log.append(1)
        leader.add_log(log)
    return leader


def fetch(epoch: int, partitions=(0,), acks=None, member="C1", max_records=500, forgotten=(), max_bytes=None):
    acks = acks or {}
    parts = [
        ShareFetchRequestPartition(
            partition_index=p,
            acknowledgement_batches=acks.get(p, []),
            **({} if max_bytes is None else {"partition_max_bytes": max_bytes}),
        )
        for p in sorted(set(partitions) | set(acks))
    ]
    return ShareFetchRequest(
        group_id=GROUP,
        member_id=member,
        share_session_epoch=epoch,
        max_records=max_records,
        topics=[ShareFetchRequestTopic(topic_id=TOPIC, partitions=parts)] if parts else [],
        forgotten_topics_data=[ForgottenTopic(topic_id=TOPIC, partitions=list(forgotten))] if forgotten else [],
    )


def acknowledge(epoch: int, acks, member="C1"):
    return ShareAcknowledgeRequest(
        group_id=GROUP,
        member_id=member,
        share_session_epoch=epoch,
        topics=[
            ShareAcknowledgeRequestTopic(
                topic_id=TOPIC,
                partitions=[
                    ShareAcknowledgeRequestPartition(partition_index=p, acknowledgement_batches=b)
                    for p, b in acks.items()
                ],
            )
        ],
    )


def acquired(response) -> dict[int, list[tuple[int, int, int]]]:
    return {
        p.partition_index: [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records]
        for t in response.responses
        for p in t.partitions
        if p.acquired_records
    }


def test_session_sequence_s09(leader: SharePartitionLeader) -> None:
    key = (GROUP, "C1")
    r = leader.share_fetch(fetch(0, max_records=4))  # 1: open
    assert r.error_code is Errors.NONE and acquired(r) == {0: [(0, 3, 1)]}
    assert leader.sessions[key].epoch == 1
    r = leader.share_fetch(fetch(1, acks={0: [ack(0, 1, ACCEPT)]}, max_records=2))  # 2: acks, then fetch
    assert leader.sessions[key].epoch == 2
    part = r.responses[0].partitions[0]
    assert part.acknowledge_error_code is Errors.NONE and acquired(r) == {0: [(4, 5, 1)]}
    assert [rec.offset for rec in part.records] == [4, 5]
    r = leader.share_acknowledge(acknowledge(2, {0: [ack(2, 2, ACCEPT)]}))  # 3
    assert r.error_code is Errors.NONE and leader.sessions[key].epoch == 3
    assert leader.share_fetch(fetch(2)).error_code is Errors.INVALID_SHARE_SESSION_EPOCH  # 4: stale
    assert leader.share_fetch(fetch(0, acks={0: [ack(3, 3, ACCEPT)]})).error_code is Errors.INVALID_REQUEST  # 5
    sp = leader.partitions[(GROUP, TOPIC, 0)]
    assert sp.state_at(3) == (ACQUIRED, 1)
    r = leader.share_fetch(fetch(0, max_records=1))  # 6: a new session releases the old one's records
    assert leader.sessions[key].epoch == 1
    assert acquired(r) == {0: [(3, 3, 2)]}  # 3 was released (dc 1) and is acquired again
    assert sp.state_at(4) == (AVAILABLE, 1)
    r = leader.share_fetch(fetch(-1, acks={0: [ack(3, 3, ACCEPT)]}, max_bytes=0))  # 7: final, with acknowledgements
    assert r.responses[0].partitions[0].acknowledge_error_code is Errors.NONE
    assert not r.responses[0].partitions[0].acquired_records and key not in leader.sessions
    assert leader.share_acknowledge(acknowledge(5, {0: []})).error_code is Errors.SHARE_SESSION_NOT_FOUND  # 8


@pytest.mark.parametrize(
    ("rpc", "epoch", "cached", "extra", "expected"),
    [
        ("fetch", 0, True, "acks", Errors.INVALID_REQUEST),  # row 1
        ("fetch", 0, False, "acks", Errors.INVALID_REQUEST),
        ("fetch", 0, True, None, Errors.NONE),  # row 2
        ("fetch", 0, False, None, Errors.NONE),  # row 3
        ("fetch", 1, False, None, Errors.SHARE_SESSION_NOT_FOUND),  # row 4
        ("fetch", 7, True, None, Errors.INVALID_SHARE_SESSION_EPOCH),  # row 5
        ("fetch", 1, True, None, Errors.NONE),  # row 6
        ("fetch", -1, True, "forget", Errors.NONE),  # row 7: Kafka ignores ForgottenTopicsData at -1
        ("fetch", -1, False, None, Errors.SHARE_SESSION_NOT_FOUND),  # row 8
        ("fetch", -1, True, None, Errors.NONE),  # row 9
        ("ack", 0, True, None, Errors.INVALID_SHARE_SESSION_EPOCH),  # row 10
        ("ack", 1, False, None, Errors.SHARE_SESSION_NOT_FOUND),  # row 11
        ("ack", 7, True, None, Errors.INVALID_SHARE_SESSION_EPOCH),  # row 12
        ("ack", 1, True, None, Errors.NONE),  # row 13
        ("ack", -1, False, None, Errors.SHARE_SESSION_NOT_FOUND),  # row 14
        ("ack", -1, True, None, Errors.NONE),  # row 15
    ],
)
def test_session_matrix(leader: SharePartitionLeader, rpc, epoch, cached, extra, expected) -> None:
    """KIP-932's share session table as Kafka's ``SharePartitionManager.newContext`` and ``acknowledgeSessionUpdate``
    answer it (a final ShareFetch names its partitions with PartitionMaxBytes 0)."""
    if cached:
        leader.share_fetch(fetch(0, max_records=1))
    before = leader.sessions.get((GROUP, "C1"))
    before_epoch = before.epoch if before else None
    if rpc == "fetch":
        request = fetch(
            epoch,
            acks={0: [ack(0, 0, ACCEPT)]} if extra == "acks" else None,
            forgotten=(0,) if extra == "forget" else (),
            max_bytes=0 if epoch == -1 else None,
        )
        response = leader.share_fetch(request)
    else:
        response = leader.share_acknowledge(acknowledge(epoch, {0: [ack(0, 0, ACCEPT)]}))
    assert response.error_code is expected
    session = leader.sessions.get((GROUP, "C1"))
    if expected is not Errors.NONE:
        assert (session.epoch if session else None) == before_epoch  # refused requests change nothing
    elif epoch == -1:
        assert session is None
    elif epoch == 0:
        assert session.epoch == 1
    else:
        assert session.epoch == before_epoch + 1


def test_a_final_share_fetch_that_fetches_is_invalid(leader: SharePartitionLeader) -> None:
    """Kafka's ``SharePartitionManager.newContext``: at epoch -1, PartitionMaxBytes > 0 is INVALID_REQUEST."""
    leader.share_fetch(fetch(0, max_records=1))
    assert leader.share_fetch(fetch(-1)).error_code is Errors.INVALID_REQUEST
    assert leader.sessions[(GROUP, "C1")].epoch == 1  # refused: the session stays


def test_a_final_share_fetch_that_forgets_is_invalid_kip() -> None:
    """KIP-932, 'Share sessions': a final ShareFetch that adds or forgets topics is INVALID_REQUEST."""
    coordinator = ShareCoordinator(ShareCoordinatorConfig(fidelity="kip"))
    kip = SharePartitionLeader(
        CoordinatorPersister(coordinator), scheduler=Scheduler(), config=SharePartitionConfig(fidelity="kip")
    )
    initialize(coordinator, start_offset=0)
    log = TopicLog(TOPIC, 0)
    log.append(3)
    kip.add_log(log)
    kip.share_fetch(fetch(0, max_records=1))
    assert kip.share_fetch(fetch(-1, forgotten=(0,))).error_code is Errors.INVALID_REQUEST
    assert kip.share_fetch(fetch(-1, acks={0: [ack(0, 0, ACCEPT)]})).error_code is Errors.NONE


def test_an_acknowledgement_error_is_per_partition_and_fetching_goes_on(leader: SharePartitionLeader) -> None:
    """Kafka's ``SharePartition.acknowledge``: offset 5 is past the in-flight records (INVALID_REQUEST)."""
    leader.share_fetch(fetch(0, partitions=(0, 1), max_records=2))
    r = leader.share_fetch(fetch(1, partitions=(0, 1), acks={0: [ack(5, 5, ACCEPT)]}, max_records=2))
    by_partition = {p.partition_index: p for p in r.responses[0].partitions}
    assert by_partition[0].acknowledge_error_code is Errors.INVALID_REQUEST
    assert sum(len(p.acquired_records) for p in by_partition.values()) >= 1


def test_acknowledge_only_partition_is_not_fetched(leader: SharePartitionLeader) -> None:
    leader.share_fetch(fetch(0, max_records=2))
    r = leader.share_fetch(fetch(1, acks={0: [ack(0, 1, ACCEPT)]}, max_bytes=0))
    assert acquired(r) == {}
    assert leader.partitions[(GROUP, TOPIC, 0)].spso == 2


def test_rotation_across_partitions(leader: SharePartitionLeader) -> None:
    """With a budget of 1 record, successive fetches start at successive partitions."""
    firsts = []
    r = leader.share_fetch(fetch(0, partitions=(0, 1), max_records=1))
    firsts.append(sorted(acquired(r)))
    for epoch in (1, 2, 3):
        r = leader.share_fetch(fetch(epoch, partitions=(), max_records=1))
        firsts.append(sorted(acquired(r)))
    assert firsts == [[0], [1], [0], [1]]


def test_forgotten_partition_leaves_the_session(leader: SharePartitionLeader) -> None:
    leader.share_fetch(fetch(0, partitions=(0, 1), max_records=2))
    leader.share_fetch(fetch(1, partitions=(), forgotten=(1,), max_records=1))
    assert leader.sessions[(GROUP, "C1")].partitions == [(TOPIC, 0)]


def test_idle_session_is_evicted_and_its_records_released(leader: SharePartitionLeader) -> None:
    leader.config = SharePartitionConfig(record_lock_duration_ms=300_000)  # locks outlive the session here
    leader.share_fetch(fetch(0, max_records=2))
    leader.scheduler.advance(100_000)
    leader.share_fetch(fetch(1, partitions=(), max_records=1))  # used again at 100000: the idle timer restarts
    leader.scheduler.advance(119_999)
    sp = leader.partitions[(GROUP, TOPIC, 0)]
    assert (GROUP, "C1") in leader.sessions and sp.acquired_count == 3
    leader.scheduler.advance(1)
    assert (GROUP, "C1") not in leader.sessions
    assert [sp.state_at(o) for o in range(3)] == [(AVAILABLE, 1)] * 3 and sp.acquired_count == 0


def test_connection_close_releases_records(leader: SharePartitionLeader) -> None:
    leader.share_fetch(fetch(0, max_records=3))
    leader.close_connection(GROUP, "C1")
    sp = leader.partitions[(GROUP, TOPIC, 0)]
    assert [sp.state_at(o) for o in range(3)] == [(AVAILABLE, 1)] * 3


def test_unknown_partition_is_a_partition_error(leader: SharePartitionLeader) -> None:
    r = leader.share_fetch(fetch(0, partitions=(5,)))
    assert r.responses[0].partitions[0].error_code is Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_admin_reset_reloads_the_share_partition_on_its_first_session(leader: SharePartitionLeader) -> None:
    """The state epoch moved, so the first session re-reads the state."""
    leader.share_fetch(fetch(0, max_records=2))
    leader.share_fetch(fetch(-1, max_bytes=0))
    coordinator = leader.persister.coordinator_for(GROUP, TOPIC, 0)
    initialize(coordinator, state_epoch=1, start_offset=7)
    r = leader.share_fetch(fetch(0, max_records=1, member="C2"))
    assert acquired(r) == {0: [(7, 7, 1)]}


def test_epoch_wraps_to_one() -> None:
    assert next_session_epoch(2**31 - 1) == 1
    assert next_session_epoch(5) == 6


def test_a_deep_copy_is_independent(leader: SharePartitionLeader) -> None:
    """Lab snapshots deep-copy the world: the copy's leader, persister and coordinator move on their own."""
    leader.share_fetch(fetch(0, max_records=2))
    clone = copy.deepcopy(leader)
    clone.share_fetch(fetch(1, acks={0: [ack(0, 1, ACCEPT)]}, max_records=1))
    assert clone.partitions[(GROUP, TOPIC, 0)].spso == 2
    assert leader.partitions[(GROUP, TOPIC, 0)].spso == 0
    original = leader.persister.coordinator_for(GROUP, TOPIC, 0)
    assert original.state(GROUP, TOPIC, 0).start_offset == 0
    assert clone.persister.coordinator_for(GROUP, TOPIC, 0) is not original
    clone.share_fetch(fetch(2, max_records=1))  # 2 acquired in the copy only
    clone.scheduler.advance(30_000)  # the copy's locks fire on the copy's clock
    assert clone.partitions[(GROUP, TOPIC, 0)].state_at(2) == (AVAILABLE, 1)
    assert leader.partitions[(GROUP, TOPIC, 0)].state_at(0) == (ACQUIRED, 1)


def test_the_answer_waits_for_the_write_with_a_deferred_persister() -> None:
    coordinator = ShareCoordinator()
    initialize(coordinator, start_offset=0)
    persister = CoordinatorPersister(coordinator, deferred=True)
    leader = SharePartitionLeader(persister, scheduler=Scheduler())
    log = TopicLog(TOPIC, 0)
    log.append(4)
    leader.add_log(log)
    leader.share_fetch(fetch(0, max_records=4))  # acquisition writes nothing: ready at once
    stored_start = coordinator.state(GROUP, TOPIC, 0).start_offset
    reply = leader.begin_share_acknowledge(acknowledge(1, {0: [ack(0, 3, ACCEPT)]}))
    assert not reply.ready and len(reply.writes) == 1
    with pytest.raises(RuntimeError, match="deliver the persister"):
        reply.response()
    sp = leader.partitions[(GROUP, TOPIC, 0)]
    assert sp.spso == 0 and sp.state_at(0) == (ACQUIRED, 1)  # not yet in effect
    persister.deliver()
    assert reply.ready and reply.response().responses[0].partitions[0].error_code is Errors.NONE
    assert sp.spso == 4
    assert coordinator.state(GROUP, TOPIC, 0).start_offset == stored_start == 0  # Kafka's write carries the old SPSO
    fetch_reply = leader.begin_share_fetch(fetch(2, acks={0: [ack(0, 0, ACCEPT)]}))  # below the SPSO: no write
    assert fetch_reply.ready and fetch_reply.response().responses[0].partitions[0].acknowledge_error_code is Errors.NONE


def test_a_refused_write_is_the_acknowledgement_error(leader: SharePartitionLeader) -> None:
    """A zombie leader: the share coordinator has seen leader epoch 1, this broker is still at 0.

    Kafka's ``SharePartition.fetchPersisterError``: FENCED_LEADER_EPOCH reaches the client as
    NOT_LEADER_OR_FOLLOWER, on the acknowledgement and on the fetch that reads the state again.
    """
    leader.share_fetch(fetch(0, max_records=2))
    coordinator = leader.persister.coordinator_for(GROUP, TOPIC, 0)
    coordinator.read_share_group_state(
        ReadShareGroupStateRequest(
            group_id=GROUP,
            topics=[ReadStateData(topic_id=TOPIC, partitions=[ReadStatePartition(partition=0, leader_epoch=1)])],
        )
    )
    r = leader.share_acknowledge(acknowledge(1, {0: [ack(0, 1, ACCEPT)]}))
    assert r.responses[0].partitions[0].error_code is Errors.NOT_LEADER_OR_FOLLOWER
    zombie = leader.partitions[(GROUP, TOPIC, 0)]
    assert zombie.fenced is Errors.FENCED_LEADER_EPOCH and zombie.state_at(0) == (ACQUIRED, 1)
    r = leader.share_fetch(fetch(2))  # the leader reads the state again and is refused: it is not the leader
    assert r.responses[0].partitions[0].error_code is Errors.NOT_LEADER_OR_FOLLOWER
    leader.add_log(leader.logs[(TOPIC, 0)], leader_epoch=1)  # this broker leads again, at epoch 1
    r = leader.share_fetch(fetch(3))
    assert acquired(r) == {0: [(0, 9, 1)]}  # the durable state had no delivery of 0-1: dc restarts at 1


def test_each_share_group_has_its_own_share_partition(leader: SharePartitionLeader) -> None:
    """Two groups reading topic_uuid:0 each get every record, with their own delivery counts."""
    coordinator = leader.persister.coordinator_for(GROUP, TOPIC, 0)
    initialize(coordinator, start_offset=0, group_id="G2")
    first = leader.share_fetch(fetch(0, max_records=10))
    other = ShareFetchRequest(
        group_id="G2",
        member_id="C1",
        share_session_epoch=0,
        topics=[ShareFetchRequestTopic(topic_id=TOPIC, partitions=[ShareFetchRequestPartition(partition_index=0)])],
    )
    second = leader.share_fetch(other)
    assert acquired(first) == acquired(second) == {0: [(0, 9, 1)]}
    assert sorted(leader.sessions) == [(GROUP, "C1"), ("G2", "C1")]
