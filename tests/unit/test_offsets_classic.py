"""OffsetCommit and OffsetFetch for classic groups, simple groups and classic members of a
consumer group, each test ported from the Kafka ``OffsetMetadataManagerTest`` method it names.

Kafka builds its groups by hand in these tests (``getOrMaybeCreateClassicGroup``,
``mkGenericMember``, ``transitionTo``); so do ``classic_group`` and ``generic_member`` here.
"""

from __future__ import annotations

import pytest
from migration_support import MigrationCase

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.coordinator.classic_group import (
    UNLOAD_TRIGGER,
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
)
from kip_lab.protocol import (
    Errors,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
)
from kip_lab.protocol.classic_group import JoinGroupRequest, JoinGroupRequestProtocol
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kip_lab.protocol.records import GroupMetadataKey, OffsetCommitKey
from kip_lab.protocol.share_group import ShareGroupHeartbeatRequest

FIRST_JOIN = "first member joins"
SESSION_MS = 5_000  # mkGenericMember's session and rebalance timeouts


# ---------------------------------------------------------------------------- Kafka's test context
def coordinator() -> GroupCoordinator:
    cluster = ClusterMetadata()
    cluster.create_topic("bar", 1)
    cluster.create_topic("foo", 2)
    return GroupCoordinator(CoordinatorConfig(), cluster)


def classic_group(gc: GroupCoordinator, group_id: str = "foo") -> ClassicGroup:
    """Kafka ``getOrMaybeCreateClassicGroup(groupId, true)``: an Empty classic group."""
    group = gc.classic_groups[group_id] = ClassicGroup(group_id)
    return group


def generic_member(member_id: str, instance_id: str | None = None) -> ClassicGroupMember:
    """Kafka ``OffsetMetadataManagerTest.mkGenericMember``."""
    return ClassicGroupMember(
        member_id=member_id,
        group_instance_id=instance_id,
        client_id="client-id",
        client_host="host",
        rebalance_timeout_ms=SESSION_MS,
        session_timeout_ms=SESSION_MS,
        protocol_type="consumer",
        supported_protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
    )


def at_generation_one(gc: GroupCoordinator, instance_id: str | None = "new-instance-id") -> ClassicGroup:
    """A group with "member", moved to its first generation (CompletingRebalance), as Kafka's tests do."""
    group = classic_group(gc)
    group.add(generic_member("member", instance_id))
    group.transition_to(ClassicGroupState.PREPARING_REBALANCE, FIRST_JOIN, gc.now_ms)
    group.init_next_generation(gc.now_ms)
    assert group.generation_id == 1
    return group


def commit(
    gc: GroupCoordinator,
    member_id: str = "",
    generation: int = -1,
    instance_id: str | None = None,
    group_id: str = "foo",
    version: int = 9,
    offset: int = 100,
):
    """Kafka's test request: offset 100 for bar-0."""
    request = OffsetCommitRequest(
        group_id=group_id,
        member_id=member_id,
        generation_id_or_member_epoch=generation,
        group_instance_id=instance_id,
        topics=[
            OffsetCommitRequestTopic(
                name="bar", partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)]
            )
        ],
        api_version=version,
    )
    return gc.offset_commit(request)


def commit_error(result) -> Errors:
    (code,) = [p.error_code for t in result.response.topics for p in t.partitions]
    return code


def refused(gc: GroupCoordinator, error: Errors, **request) -> None:
    """The commit is answered with ``error`` and writes nothing."""
    before = (gc.log.end_offset, dict(gc.offsets))
    result = commit(gc, **request)
    assert commit_error(result) == error
    assert result.records == []
    assert (gc.log.end_offset, dict(gc.offsets)) == before


def fetch(gc: GroupCoordinator, topics=None, member_id=None, member_epoch=-1, group_id="group"):
    result = gc.offset_fetch(
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    group_id=group_id, member_id=member_id, member_epoch=member_epoch, topics=topics
                )
            ]
        )
    )
    (group,) = result.response.groups
    return group


def fetched(group) -> dict[tuple[str | None, int], int]:
    return {(t.name, p.partition_index): p.committed_offset for t in group.topics for p in t.partitions}


FOO_AND_BAR = [
    OffsetFetchRequestTopic(name="foo", partition_indexes=[0, 1]),
    OffsetFetchRequestTopic(name="bar", partition_indexes=[0]),
]


# ---------------------------------------------------------------------------- OffsetCommit
@pytest.mark.parametrize("version", range(10))
def test_offset_commit_with_unknown_group(version):
    """Kafka ``testOffsetCommitWithUnknownGroup``: a generation to a group that does not exist is
    GROUP_ID_NOT_FOUND from OffsetCommit v9 on, ILLEGAL_GENERATION before."""
    gc = coordinator()
    expected = Errors.GROUP_ID_NOT_FOUND if version >= 9 else Errors.ILLEGAL_GENERATION
    refused(gc, expected, member_id="member", generation=10, version=version)
    assert "foo" not in gc.classic_groups


def test_generic_group_offset_commit_with_dead_group():
    """Kafka ``testGenericGroupOffsetCommitWithDeadGroup``: COORDINATOR_NOT_AVAILABLE."""
    gc = coordinator()
    classic_group(gc).transition_to(ClassicGroupState.DEAD, UNLOAD_TRIGGER, gc.now_ms)
    refused(gc, Errors.COORDINATOR_NOT_AVAILABLE, member_id="member", generation=10)


def test_generic_group_offset_commit_with_unknown_member_id():
    """Kafka ``testGenericGroupOffsetCommitWithUnknownMemberId``: an Empty group knows no member."""
    gc = coordinator()
    classic_group(gc)
    refused(gc, Errors.UNKNOWN_MEMBER_ID, member_id="member", generation=10)


def test_generic_group_offset_commit_with_illegal_generation():
    """Kafka ``testGenericGroupOffsetCommitWithIllegalGeneration``: a known member, another generation."""
    gc = coordinator()
    at_generation_one(gc)
    refused(gc, Errors.ILLEGAL_GENERATION, member_id="member", generation=10)


def test_generic_group_offset_commit_with_unknown_instance_id():
    """Kafka ``testGenericGroupOffsetCommitWithUnknownInstanceId``: an instance id the group does not
    have is UNKNOWN_MEMBER_ID, even from a known member."""
    gc = coordinator()
    classic_group(gc).add(generic_member("member"))
    refused(gc, Errors.UNKNOWN_MEMBER_ID, member_id="member", instance_id="instanceid", generation=10)


def test_generic_group_offset_commit_with_fenced_instance_id():
    """Kafka ``testGenericGroupOffsetCommitWithFencedInstanceId`` (which sends an unknown instance id:
    UNKNOWN_MEMBER_ID) and ``ClassicGroup.validateMember``: a known instance id held by another
    member id is FENCED_INSTANCE_ID — the commit of a static member's zombie."""
    gc = coordinator()
    classic_group(gc).add(generic_member("member", "new-instance-id"))
    refused(gc, Errors.UNKNOWN_MEMBER_ID, member_id="member", instance_id="old-instance-id", generation=10)
    refused(gc, Errors.FENCED_INSTANCE_ID, member_id="zombie", instance_id="new-instance-id", generation=10)


def test_generic_group_offset_commit_while_in_completing_rebalance_state():
    """Kafka ``testGenericGroupOffsetCommitWhileInCompletingRebalanceState``: the member has its
    generation but not yet its assignment: REBALANCE_IN_PROGRESS."""
    gc = coordinator()
    at_generation_one(gc)
    refused(gc, Errors.REBALANCE_IN_PROGRESS, member_id="member", generation=1)


def test_generic_group_offset_commit_without_member_id_and_generation():
    """Kafka ``testGenericGroupOffsetCommitWithoutMemberIdAndGeneration``: a commit naming nobody is
    refused by a group with members."""
    gc = coordinator()
    at_generation_one(gc)
    refused(gc, Errors.UNKNOWN_MEMBER_ID)


def test_generic_group_offset_commit_with_retention_time():
    """Kafka ``testGenericGroupOffsetCommitWithRetentionTime`` (the Lab has no offset retention): a
    member of a Stable group at its generation commits; one offset record, stamped now."""
    gc = coordinator()
    group = at_generation_one(gc)
    group.transition_to(ClassicGroupState.STABLE, "leader's SyncGroup stored", gc.now_ms)
    gc.advance(1_234)
    result = commit(gc, member_id="member", generation=1)
    assert commit_error(result) == Errors.NONE
    (record,) = result.records
    assert (record.key.group, record.key.topic, record.key.partition) == ("foo", "bar", 0)
    assert (record.value.offset, record.value.commit_timestamp, record.value.leader_epoch) == (100, 1_234, -1)
    assert gc.offsets["foo"][("bar", 0)].offset == 100


def test_generic_group_offset_commit_maintains_session():
    """Kafka ``testGenericGroupOffsetCommitMaintainsSession``: in a Stable group a commit re-arms the
    member's session, and the member is removed a full session after its last commit."""
    gc = coordinator()
    group = at_generation_one(gc, instance_id=None)
    group.transition_to(ClassicGroupState.STABLE, "leader's SyncGroup stored", gc.now_ms)
    gc._schedule_classic_session(group, "member", SESSION_MS)  # as the group's move to Stable would
    assert gc.advance(SESSION_MS // 2) == []
    assert commit_error(commit(gc, member_id="member", generation=1)) == Errors.NONE
    assert gc.advance(SESSION_MS // 2) == []
    assert "member" in group.members
    expired = gc.advance(SESSION_MS // 2)
    assert [r.origin for r in expired] == ["classic session timeout foo/member"]
    assert "member" not in group.members


def test_a_commit_in_completing_rebalance_does_not_keep_the_session():
    """Kafka ``OffsetMetadataManager.commitOffset``: only a Stable or PreparingRebalance group's
    commits count as heartbeats (and a refused commit never does)."""
    gc = coordinator()
    group = at_generation_one(gc, instance_id=None)
    gc._schedule_classic_session(group, "member", SESSION_MS)
    gc.advance(SESSION_MS // 2)
    refused(gc, Errors.REBALANCE_IN_PROGRESS, member_id="member", generation=1)
    assert gc.timers()[("classic session", "foo", "member")] == SESSION_MS


def test_simple_group_offset_commit():
    """Kafka ``testSimpleGroupOffsetCommit``: generation -1 to a group that does not exist is accepted
    and makes a simple group: a classic group, Empty, without protocol type or members. Its replay
    makes it too, so a failover has it."""
    gc = coordinator()
    result = commit(gc)
    assert commit_error(result) == Errors.NONE
    assert [type(r.key) for r in result.records] == [OffsetCommitKey]  # no group record: Kafka writes none
    group = gc.classic_groups["foo"]
    assert (group.state, group.protocol_type, group.members, group.generation_id) == (
        ClassicGroupState.EMPTY,
        None,
        {},
        0,
    )
    reloaded = GroupCoordinator.from_log(gc.log.truncated(gc.log.batch_count), gc.config, gc.cluster)
    assert reloaded.classic_state_snapshot() == gc.classic_state_snapshot()
    assert reloaded.offsets == gc.offsets
    # a second simple commit goes to the simple group, which accepts it (Empty, generation -1)
    assert commit_error(commit(gc, offset=101)) == Errors.NONE
    assert gc.offsets["foo"][("bar", 0)].offset == 101


def test_simple_group_offset_commit_with_instance_id():
    """Kafka ``testSimpleGroupOffsetCommitWithInstanceId``: the instance id of a simple commit is ignored."""
    gc = coordinator()
    result = commit(gc, instance_id="instance-id")
    assert commit_error(result) == Errors.NONE
    assert [(r.key.group, r.key.topic, r.value.offset) for r in result.records] == [("foo", "bar", 100)]


def test_a_simple_group_becomes_a_classic_groups_home_and_keeps_its_offsets():
    """Kafka ``GroupMetadataManager.getOrMaybeCreateClassicGroup``: a JoinGroup finds the simple
    group and joins it; the offsets committed before stay."""
    gc = coordinator()
    commit(gc, offset=7)
    first = gc.join_group(
        JoinGroupRequest(
            group_id="foo",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
        )
    )
    assert first.response.error_code == Errors.MEMBER_ID_REQUIRED
    assert gc.classic_groups["foo"].pending_members == {first.response.member_id}
    assert fetched(fetch(gc, group_id="foo")) == {("bar", 0): 7}


def test_a_consumer_group_join_replaces_an_empty_simple_group():
    """Kafka ``GroupMetadataManager.getOrMaybeCreateConsumerGroup`` (``maybeDeleteEmptyClassicGroup``):
    the first ConsumerGroupHeartbeat to a simple group tombstones it and makes a consumer group;
    the offsets stay."""
    gc = coordinator()
    commit(gc, offset=7)
    result = gc.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            group_id="foo",
            member_id="m1",
            member_epoch=0,
            rebalance_timeout_ms=60_000,
            subscribed_topic_names=["bar"],
            topic_partitions=[],
        )
    )
    assert result.response.error_code == Errors.NONE
    assert (result.records[0].key, result.records[0].value) == (GroupMetadataKey(group="foo"), None)
    assert "foo" not in gc.classic_groups and "foo" in gc.groups
    assert fetched(fetch(gc, group_id="foo")) == {("bar", 0): 7}


def test_a_share_group_id_takes_no_commit():
    """Kafka ``ShareGroup.validateOffsetCommit`` / ``validateOffsetFetch``: a share group is "not a
    consumer group", even for a commit without a generation (no simple group is made), and a fetch
    finds nothing."""
    gc = coordinator()
    gc.share_group_heartbeat(
        ShareGroupHeartbeatRequest(group_id="foo", member_id="s1", member_epoch=0, subscribed_topic_names=["bar"])
    )
    refused(gc, Errors.GROUP_ID_NOT_FOUND)
    assert "foo" not in gc.classic_groups
    assert fetched(fetch(gc, [OffsetFetchRequestTopic(name="bar", partition_indexes=[0])], group_id="foo")) == {
        ("bar", 0): -1
    }


# ---------------------------------------------------------------------------- classic members of a consumer group
def migrated() -> MigrationCase:
    """A consumer group whose members b and c still speak the classic protocol (A upgraded)."""
    case = MigrationCase(fidelity="kafka")
    assert case.consumer_join("A").response.error_code == Errors.NONE
    assert case.gc.groups["g"].members["b"].uses_classic_protocol
    return case


def group_commit(case: MigrationCase, member_id: str, epoch: int, version: int = 9) -> Errors:
    request = OffsetCommitRequest(
        group_id="g",
        member_id=member_id,
        generation_id_or_member_epoch=epoch,
        topics=[OffsetCommitRequestTopic(name="foo", partitions=[OffsetCommitRequestPartition(0, 5)])],
        api_version=version,
    )
    return commit_error(case.gc.offset_commit(request))


def test_consumer_group_offset_commit_with_illegal_generation_id():
    """Kafka ``testConsumerGroupOffsetCommitWithIllegalGenerationId``: a classic member of a consumer
    group commits with its generation, which must be its member epoch; a smaller or larger one is
    ILLEGAL_GENERATION (not STALE_MEMBER_EPOCH: a classic client does not know that error)."""
    case = migrated()
    epoch = case.gc.groups["g"].members["b"].member_epoch
    assert group_commit(case, "b", epoch - 1) == Errors.ILLEGAL_GENERATION
    assert group_commit(case, "b", epoch + 1) == Errors.ILLEGAL_GENERATION
    assert group_commit(case, "b", epoch) == Errors.NONE
    assert case.gc.offsets["g"][("foo", 0)].offset == 5


def test_consumer_group_offset_commit_below_version_9_only_from_classic_members():
    """Kafka ``ConsumerGroup.validateOffsetCommit``: a member on the consumer protocol must use
    OffsetCommit v9 or above (UNSUPPORTED_VERSION); a classic member may use any version."""
    case = migrated()
    members = case.gc.groups["g"].members
    a = next(m for m in members.values() if not m.uses_classic_protocol)
    assert group_commit(case, a.member_id, a.member_epoch, version=8) == Errors.UNSUPPORTED_VERSION
    assert group_commit(case, a.member_id, a.member_epoch, version=9) == Errors.NONE
    assert group_commit(case, "b", members["b"].member_epoch, version=2) == Errors.NONE


def test_consumer_group_offset_fetch_with_illegal_generation_id():
    """Kafka ``testConsumerGroupOffsetFetchWithIllegalGenerationId``: a fetch naming a classic member
    at another epoch is ILLEGAL_GENERATION for the group."""
    case = migrated()
    epoch = case.gc.groups["g"].members["b"].member_epoch
    assert fetch(case.gc, member_id="b", member_epoch=epoch + 10, group_id="g").error_code == Errors.ILLEGAL_GENERATION
    assert fetch(case.gc, member_id="b", member_epoch=epoch, group_id="g").error_code == Errors.NONE


def test_consumer_group_offset_fetch_with_unknown_member_id():
    """Kafka ``testConsumerGroupOffsetFetchWithUnknownMemberId``: an empty or unknown member id at
    epoch 0 is UNKNOWN_MEMBER_ID, for a fetch of named topics or of all of them."""
    case = migrated()
    for member_id in ("", "member"):
        for topics in ([OffsetFetchRequestTopic(name="foo", partition_indexes=[0])], None):
            group = fetch(case.gc, topics, member_id=member_id, member_epoch=0, group_id="g")
            assert (group.error_code, group.topics) == (Errors.UNKNOWN_MEMBER_ID, [])


# ---------------------------------------------------------------------------- OffsetFetch
def test_generic_group_fetch_offsets_with_dead_group():
    """Kafka ``testGenericGroupFetchOffsetsWithDeadGroup``: a Dead group has no offsets: every
    partition asked for is -1, without an error."""
    gc = coordinator()
    classic_group(gc, "group").transition_to(ClassicGroupState.DEAD, UNLOAD_TRIGGER, gc.now_ms)
    group = fetch(gc, FOO_AND_BAR)
    assert group.error_code == Errors.NONE
    assert fetched(group) == {("foo", 0): -1, ("foo", 1): -1, ("bar", 0): -1}


def test_fetch_offsets_with_unknown_group():
    """Kafka ``testFetchOffsetsWithUnknownGroup``: the same for a group that does not exist, even
    when the request names a member."""
    gc = coordinator()
    for member_id, epoch in ((None, -1), ("member", 3)):
        group = fetch(gc, FOO_AND_BAR, member_id=member_id, member_epoch=epoch)
        assert group.error_code == Errors.NONE
        assert fetched(group) == {("foo", 0): -1, ("foo", 1): -1, ("bar", 0): -1}


def test_generic_group_fetch_all_offsets_with_dead_group():
    """Kafka ``testGenericGroupFetchAllOffsetsWithDeadGroup``: no topic at all, even if offsets were stored."""
    gc = coordinator()
    commit(gc, group_id="group")  # a simple group with an offset
    gc.classic_groups["group"].transition_to(ClassicGroupState.DEAD, UNLOAD_TRIGGER, gc.now_ms)
    group = fetch(gc)
    assert (group.error_code, group.topics) == (Errors.NONE, [])


def test_fetch_all_offsets_with_unknown_group():
    """Kafka ``testFetchAllOffsetsWithUnknownGroup``."""
    group = fetch(coordinator())
    assert (group.error_code, group.topics) == (Errors.NONE, [])


def test_a_classic_group_answers_any_fetch():
    """Kafka ``ClassicGroup.validateOffsetFetch``: a live classic group does not check the member (a
    classic consumer names none), in any state."""
    gc = coordinator()
    commit(gc, group_id="group", offset=42)
    group = gc.classic_groups["group"]
    group.add(generic_member("member"))
    group.transition_to(ClassicGroupState.PREPARING_REBALANCE, FIRST_JOIN, gc.now_ms)
    for member_id, epoch in ((None, -1), ("someone", 7)):
        answer = fetch(gc, [OffsetFetchRequestTopic(name="bar", partition_indexes=[0])], member_id, epoch)
        assert (answer.error_code, fetched(answer)) == (Errors.NONE, {("bar", 0): 42})
