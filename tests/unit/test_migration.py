"""Online migration beyond the KIP's case study: each migration policy, conversion both ways, the
rejections, classic members timing out or leaving mid-migration, static classic members, and a
classic member whose new partitions are not yet free (docs/decisions.md M-entries)."""

from __future__ import annotations

import pytest
from golden_support import GROUP, record_names
from migration_support import MigrationCase

from kip_lab.assignors.java_hash_order import timeline_hash_map_order
from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.coordinator.classic_group import ClassicGroupState
from kip_lab.coordinator.config import ConsumerGroupMigrationPolicy
from kip_lab.coordinator.group import ConsumerGroup
from kip_lab.protocol.classic_group import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
)
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kip_lab.runtime.result import CoordinatorResult


def upgraded(fidelity: str = "kip", **config) -> MigrationCase:
    """The case study's start, then A restarts with the consumer protocol (the group is converted).

    Under ``kip`` (the default here) the conversion writes the partition metadata, so A's takeover
    does not bump the epoch and b and c stay current at 22, as in the KIP's case study; the tests
    of Kafka's own conversion pass ``fidelity="kafka"``.
    """
    case = MigrationCase(fidelity=fidelity, **config)
    assert case.consumer_join("A").response.error_code.name == "NONE"
    return case


@pytest.mark.parametrize("policy", list(ConsumerGroupMigrationPolicy))
def test_upgrade_follows_the_policy(policy):
    """Kafka ``GroupMetadataManager.validateOnlineUpgrade``: a classic group converts only when
    ``group.consumer.migration.policy`` allows upgrades."""
    case = MigrationCase(migration_policy=policy)
    result = case.consumer_join("A")
    if policy.upgrade_enabled:
        assert result.response.error_code.name == "NONE"
        assert isinstance(case.gc.groups[GROUP], ConsumerGroup)
        assert GROUP not in case.gc.classic_groups
        assert record_names(result)[0] == "~GroupMetadata"
    else:
        assert result.response.error_code.name == "GROUP_ID_NOT_FOUND"
        assert "online upgrade is disabled" in result.response.error_message
        assert result.records == []
        assert case.gc.classic_groups[GROUP].state is ClassicGroupState.STABLE
        assert GROUP not in case.gc.groups


@pytest.mark.parametrize("policy", list(ConsumerGroupMigrationPolicy))
def test_downgrade_follows_the_policy(policy):
    """Kafka ``GroupMetadataManager.validateOnlineDowngradeWithFencedMember`` and ``convertToClassicGroup``:
    the batch is ``ConsumerGroup.createGroupTombstoneRecords`` then the classic group's record."""
    case = upgraded(migration_policy=ConsumerGroupMigrationPolicy.UPGRADE)
    case.gc.config = case.gc.config.model_copy(update={"migration_policy": policy})
    result = case.consumer_heartbeat("A", epoch=-1)  # the last consumer-protocol member leaves
    assert result.response.error_code.name == "NONE"
    if policy.downgrade_enabled:
        # Kafka's ConsumerGroup.createGroupTombstoneRecords order, then ClassicGroup.createClassicGroupRecords.
        assert record_names(result) == [
            "~CurrentMemberAssignment(A)",
            "~CurrentMemberAssignment(b)",
            "~CurrentMemberAssignment(c)",
            "~TargetAssignmentMember(A)",
            "~TargetAssignmentMember(b)",
            "~TargetAssignmentMember(c)",
            "~TargetAssignmentMetadata",
            "~MemberMetadata(A)",
            "~MemberMetadata(b)",
            "~MemberMetadata(c)",
            "~PartitionMetadata",
            "~Metadata",
            "GroupMetadata",
        ]
        assert GROUP not in case.gc.groups
        classic = case.gc.classic_groups[GROUP]
        # generation = the consumer group's epoch; the survivors must rejoin (a rebalance starts)
        assert (classic.generation_id, classic.state) == (22, ClassicGroupState.PREPARING_REBALANCE)
        assert sorted(classic.members) == ["b", "c"]
        assignments = {
            m: [p for _, p in ConsumerProtocolAssignment.decode(v.assignment).assigned_partitions]
            for m, v in classic.members.items()
        }
        assert assignments == {"b": [3, 4], "c": [2, 5]}
    else:
        group = case.gc.groups[GROUP]
        assert sorted(group.members) == ["b", "c"] and group.group_epoch == 23
        assert GROUP not in case.gc.classic_groups


def test_downgraded_group_rebalances_as_a_classic_group_and_survives_failover():
    """Kafka ``GroupMetadataManager.convertToClassicGroup``: the downgraded group rebalances as a classic group, and
    its ``GroupMetadataValue`` survives a failover."""
    case = upgraded()
    case.consumer_heartbeat("A", epoch=-1)
    assert case.classic_heartbeat("b", 22, instance="B").response.error_code.name == "REBALANCE_IN_PROGRESS"
    assert case.classic_join("b", [3, 4], 22, instance="B").response is None  # parked: c has not rejoined
    done = case.classic_join("c", [2, 5], 22, instance="C")
    classic = case.gc.classic_groups[GROUP]
    assert done.response.generation_id == 23 and classic.state is ClassicGroupState.COMPLETING_REBALANCE
    assert {d.ref: d.response.generation_id for d in done.deferred} == {"B-join": 23}
    # Until the leader syncs, a failover only knows the downgrade record (generation 22, Stable).
    rebuilt = type(case.gc).from_log(case.gc.log, case.config, case.cluster)
    assert (rebuilt.classic_groups[GROUP].generation_id, rebuilt.classic_groups[GROUP].state.value) == (22, "Stable")


def test_rejoin_with_the_consumer_protocol_after_downgrade_upgrades_again():
    """Kafka ``GroupMetadataManager.convertToConsumerGroup``: after a downgrade, a consumer-protocol join converts the
    group again."""
    case = upgraded()
    case.consumer_heartbeat("A", epoch=-1)
    case.classic_join("b", [3, 4], 22, instance="B")
    case.classic_join("c", [2, 5], 22, instance="C")
    leader = case.gc.classic_groups[GROUP].leader_id
    case.gc.sync_group(
        SyncGroupRequest(group_id=GROUP, generation_id=23, member_id=leader, group_instance_id=leader.upper())
    )
    assert case.gc.classic_groups[GROUP].state is ClassicGroupState.STABLE
    result = case.consumer_join("A", member_id="A2")
    assert result.response.error_code.name == "NONE"
    group = case.gc.groups[GROUP]
    assert group.group_epoch == 24  # converted at generation 23, then A2 is a new member: bump
    case.assert_rebuild_equals_live()


def test_kip_upgrade_needs_consumer_protocol_v3():
    """KIP-848, 'Kafka Consumer Migration': members below embedded protocol v3 are refused with INVALID_REQUEST."""
    case = MigrationCase(version=2, fidelity="kip")
    result = case.consumer_join("A")
    assert result.response.error_code.name == "INVALID_REQUEST"
    assert "v2" in result.response.error_message
    assert case.gc.classic_groups[GROUP].state is ClassicGroupState.STABLE


@pytest.mark.parametrize("version", [0, 1, 2])
def test_kafka_upgrade_accepts_every_consumer_protocol_version(version):
    """Kafka ``ConsumerGroup.fromClassicGroup`` reads any embedded subscription version: no version check."""
    case = MigrationCase(version=version)
    result = case.consumer_join("A")
    assert result.response.error_code.name == "NONE"
    assert GROUP not in case.gc.classic_groups
    b = case.gc.groups[GROUP].members["b"]
    assert (b.member_epoch, b.subscribed_topic_names, b.uses_classic_protocol) == (22, ("foo",), True)


def test_an_empty_classic_group_id_is_reused_by_a_consumer_group():
    """Kafka ``GroupMetadataManager.getOrMaybeCreateConsumerGroup``: a classic group in state Empty is deleted and its
    id starts a new consumer group."""
    case = MigrationCase(start={"a": {"foo": [0, 1, 2, 3, 4, 5]}})
    case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="a")]))
    case.gc.advance(300_000)  # nobody rejoins: the group empties (generation 23)
    assert case.gc.classic_groups[GROUP].state is ClassicGroupState.EMPTY
    result = case.consumer_join("N")
    assert record_names(result)[0] == "~GroupMetadata"
    assert case.gc.groups[GROUP].group_epoch == 1  # a new group: nothing carried over
    case.assert_rebuild_equals_live()


def test_upgrade_of_a_rebalancing_classic_group_tells_parked_members_to_rejoin():
    """Kafka ``GroupMetadataManager.convertToConsumerGroup``: a classic group mid-rebalance converts, and its parked
    JoinGroup is answered REBALANCE_IN_PROGRESS."""
    case = MigrationCase()
    case.classic_join("b", [3, 4], 22, instance="B").response  # noqa: B018 - parks b's JoinGroup
    assert case.gc.classic_groups[GROUP].state is ClassicGroupState.PREPARING_REBALANCE
    result = case.consumer_join("A")
    assert {d.ref: d.response.error_code.name for d in result.deferred} == {"B-join": "REBALANCE_IN_PROGRESS"}
    assert case.gc.timers() and not any(k[0].startswith("classic ") for k in case.gc.timers())


def test_classic_member_session_timeout_in_a_consumer_group():
    """Kafka ``GroupMetadataManager.classicGroupHeartbeatToConsumerGroup``: a classic member's session follows its
    JoinGroup session timeout; missing it removes the member."""
    case = upgraded(session_timeout_ms=10_000)
    for _ in range(4):  # A and C keep their sessions; B never heartbeats
        case.gc.advance(3_000)
        case.consumer_heartbeat("A")
        case.classic_heartbeat("c", 22)
    group = case.gc.groups[GROUP]
    assert "b" not in group.members and group.group_epoch == 23


def keep_alive(case: MigrationCase, ms: int, classic: dict[str, int]) -> None:
    """Advance ``ms`` in 5 s steps, A heartbeating and each classic member (id -> generation) too."""
    for _ in range(ms // 5_000):
        case.gc.advance(5_000)
        if "A" in case.gc.groups[GROUP].members:
            case.consumer_heartbeat("A")
        for member_id, generation in classic.items():
            if member_id in case.gc.groups[GROUP].members:
                case.classic_heartbeat(member_id, generation, member_id.upper())


def test_classic_member_that_does_not_rejoin_in_time_is_removed():
    """Kafka ``GroupMetadataManager.scheduleConsumerGroupJoinTimeoutIfAbsent``: a classic member told to rejoin that
    sends no JoinGroup within its rebalance timeout is removed."""
    case = upgraded()
    case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="b")]))
    assert case.classic_heartbeat("c", 22).response.error_code.name == "REBALANCE_IN_PROGRESS"
    assert ("join", GROUP, "c") in case.gc.timers()
    keep_alive(case, 295_000, {"c": 22})  # c heartbeats but never sends JoinGroup
    assert "c" in case.gc.groups[GROUP].members
    keep_alive(case, 5_000, {"c": 22})  # its rebalance timeout (300 s) passes
    assert "c" not in case.gc.groups[GROUP].members


def test_classic_member_that_does_not_sync_in_time_is_removed():
    """Kafka ``GroupMetadataManager.scheduleConsumerGroupSyncTimeout``: a classic member that sends no SyncGroup within
    its rebalance timeout is removed."""
    case = upgraded()
    case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="b")]))
    case.classic_join("c", [], 22)
    assert case.gc.classic_member_state(GROUP, "c") == "CompletingRebalance"
    keep_alive(case, 295_000, {"c": 23})
    assert "c" in case.gc.groups[GROUP].members
    keep_alive(case, 5_000, {"c": 23})  # no SyncGroup within its rebalance timeout
    assert "c" not in case.gc.groups[GROUP].members


def test_classic_requests_into_a_consumer_group_are_validated():
    """Kafka ``GroupMetadataManager.classicGroupHeartbeatToConsumerGroup``, ``classicGroupSyncToConsumerGroup``:
    generation, instance id and protocol checks."""
    case = upgraded()
    assert case.classic_heartbeat("c", 21).response.error_code.name == "ILLEGAL_GENERATION"
    assert case.classic_heartbeat("x", 22).response.error_code.name == "FENCED_INSTANCE_ID"
    assert case.classic_heartbeat("A", 22, instance=None).response.error_code.name == "UNKNOWN_MEMBER_ID"  # not classic
    assert case.classic_sync_result("c", 21).response.error_code.name == "ILLEGAL_GENERATION"
    assert case.classic_heartbeat("c", 22).response.error_code.name == "NONE"
    assert case.classic_sync("c", 22) == [2, 5]
    left = case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="A")]))
    assert [m.error_code.name for m in left.response.members] == ["UNKNOWN_MEMBER_ID"]  # A is no classic member


def test_new_classic_member_gets_only_free_partitions_then_is_asked_to_rejoin_for_the_rest():
    """Kafka ``GroupMetadataManager.classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``: SyncGroup
    hands out the usable partitions; the rest come after a rejoin."""
    case = upgraded()
    first = case.classic_join("", [], -1, instance=None)
    assert first.response.error_code.name == "MEMBER_ID_REQUIRED"
    d = first.response.member_id
    result = case.classic_join(d, [], -1, instance=None)
    epoch = result.response.generation_id
    group = case.gc.groups[GROUP]
    assert epoch == group.group_epoch == 23
    target = sorted(p for parts in group.target_of(d).values() for p in parts)
    assert target and group.members[d].assigned == {}  # all of its target is still held by others
    assert case.classic_sync(d, epoch, instance=None) == []  # withheld (docs/decisions.md M5)
    assert case.classic_heartbeat(d, epoch, instance=None).response.error_code.name == "NONE"  # still waiting
    # Everyone else gives up what the new target moved to d.
    for member_id in ("A", "b", "c"):
        m = group.members[member_id]
        keep = sorted(p for parts in group.target_of(member_id).values() for p in parts)
        if member_id == "A":
            case.consumer_heartbeat("A", sorted(p for parts in m.assigned.values() for p in parts))
            case.consumer_heartbeat("A", keep)
        else:
            gen = m.member_epoch
            instance = member_id.upper()
            assert case.classic_heartbeat(member_id, gen, instance).response.error_code.name == "REBALANCE_IN_PROGRESS"
            joined = case.classic_join(member_id, [], gen, instance=instance)
            case.classic_sync(member_id, joined.response.generation_id, instance=instance)
    # Now d's pending partitions are free: its heartbeat sends it back to JoinGroup to collect them.
    assert case.classic_heartbeat(d, epoch, instance=None).response.error_code.name == "REBALANCE_IN_PROGRESS"
    again = case.classic_join(d, [], epoch, instance=None)
    assert case.classic_sync(d, again.response.generation_id, instance=None) == target
    case.assert_rebuild_equals_live()


def test_static_classic_member_restart_inside_a_consumer_group_keeps_its_assignment():
    """Kafka ``GroupMetadataManager.getOrMaybeSubscribeStaticConsumerGroupMember``: a classic static member's new
    process replaces the old one without an epoch bump."""
    case = upgraded()
    result = case.classic_join("", [], -1, instance="C")  # a new process for instance C, unknown member id
    new_id = result.response.member_id
    group = case.gc.groups[GROUP]
    assert new_id != "c" and "c" not in group.members
    assert group.group_epoch == 22  # replaced, no bump
    assert group.static_members["C"] == new_id
    assert sorted(p for parts in group.members[new_id].assigned.values() for p in parts) == [2, 5]
    assert result.response.generation_id == 22
    assert case.classic_sync(new_id, 22) == [2, 5]
    assert case.classic_heartbeat("c", 22).response.error_code.name == "FENCED_INSTANCE_ID"  # the old process
    case.assert_rebuild_equals_live()


def test_classic_join_into_a_consumer_group_with_an_incompatible_protocol_is_rejected():
    """Kafka ``ConsumerGroup.supportsClassicProtocols``: a JoinGroup whose protocols the group's classic members do not
    share is INCONSISTENT_GROUP_PROTOCOL."""
    case = upgraded()
    request = JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=45_000,
        member_id="z",
        protocols=[JoinGroupRequestProtocol(name="roundrobin", metadata=b"{}")],
    )
    assert case.gc.join_group(request).response.error_code.name == "INCONSISTENT_GROUP_PROTOCOL"
    # Kafka ``deserializeSubscription``: a malformed embedded protocol is an IllegalStateException.
    bad = request.model_copy(update={"protocols": [JoinGroupRequestProtocol(name="range", metadata=b"not json")]})
    assert case.gc.join_group(bad).response.error_code.name == "UNKNOWN_SERVER_ERROR"


@pytest.mark.parametrize("fidelity", ["kafka", "kip"])
def test_an_empty_consumer_group_id_is_reused_by_a_classic_group(fidelity):
    """Kafka ``GroupMetadataManager.maybeDeleteEmptyConsumerGroup`` (``ConsumerGroup.createGroupTombstoneRecords``
    of a group without members), then the new classic group's record."""
    case = upgraded(fidelity=fidelity, migration_policy=ConsumerGroupMigrationPolicy.UPGRADE)
    for member_id in ("b", "c"):
        case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id=member_id)]))
    case.consumer_heartbeat("A", epoch=-1)
    assert case.gc.groups[GROUP].state.value == "Empty"
    # Target entries the members left behind (the removal rule, docs/decisions.md D4) go too.
    leftover = sorted(case.gc.groups[GROUP].target)
    result = case.classic_join("", [], -1, instance=None)
    assert result.response.error_code.name == "MEMBER_ID_REQUIRED"
    assert record_names(result) == [
        *[f"~TargetAssignmentMember({m})" for m in leftover],
        "~TargetAssignmentMetadata",
        "~PartitionMetadata",
        "~Metadata",
        "GroupMetadata",  # the new, empty classic group (Kafka writes it so the group exists)
    ]
    assert GROUP not in case.gc.groups
    assert case.gc.classic_groups[GROUP].state is ClassicGroupState.EMPTY
    case.assert_rebuild_equals_live()


def test_downgrade_when_the_last_consumer_member_times_out():
    """Kafka ``GroupMetadataManager.validateOnlineDowngradeWithFencedMember``: when the last consumer-protocol member
    times out, the group converts back."""
    case = upgraded()
    for _ in range(10):  # b and c heartbeat; A (consumer protocol) has crashed
        case.gc.advance(5_000)
        for member_id in ("b", "c"):
            if GROUP in case.gc.groups:
                case.classic_heartbeat(member_id, 22, member_id.upper())
    assert GROUP not in case.gc.groups
    classic = case.gc.classic_groups[GROUP]
    assert sorted(classic.members) == ["b", "c"] and classic.generation_id == 22


def test_cooperative_classic_member_revokes_then_rejoins_for_the_next_epoch():
    """A cooperative member joins still owning what it keeps *and* what it must give up.

    Under the "kip" fidelity, as the KIP's table: c keeps foo-2 and foo-5 (Kafka keeps foo-2 and foo-4)."""
    case = upgraded(fidelity="kip")
    case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="b")]))
    joined = case.classic_join("c", owned=[2, 5], generation=22)  # target of 23: c gets foo-4 too
    assert (joined.response.generation_id, case.classic_sync("c", 23)) == (23, [2, 4, 5])
    case.consumer_join("B")  # target of 24 takes foo-4 back from c
    assert case.classic_heartbeat("c", 23).response.error_code.name == "REBALANCE_IN_PROGRESS"
    still_owning = case.classic_join("c", owned=[2, 4, 5], generation=23)
    member = case.gc.groups[GROUP].members["c"]
    assert still_owning.response.generation_id == 23  # the current epoch: it must revoke first
    assert member.state.value == "UNREVOKED_PARTITIONS"
    assert case.classic_sync("c", 23) == [2, 5]  # what it keeps; the cooperative client revokes foo-4
    assert case.classic_heartbeat("c", 23).response.error_code.name == "REBALANCE_IN_PROGRESS"
    revoked = case.classic_join("c", owned=[2, 5], generation=23)
    assert revoked.response.generation_id == 24
    assert case.classic_sync("c", 24) == [2, 5]
    assert case.gc.classic_member_state(GROUP, "c") == "Stable"
    case.assert_rebuild_equals_live()


def test_kip_classic_join_with_an_old_embedded_protocol_into_a_consumer_group_is_rejected():
    """KIP-848, 'Supporting Online Consumer Group Upgrade' (JoinGroup handling): the embedded protocol must be v3+."""
    case = upgraded()
    result = case.classic_join("", [], -1, instance="D", version=2)
    assert result.response.error_code.name == "INVALID_REQUEST"
    assert result.records == [] and not any(m.instance_id == "D" for m in case.gc.groups[GROUP].members.values())


@pytest.mark.parametrize("version", [0, 1, 2])
def test_kafka_classic_join_with_an_old_embedded_protocol_into_a_consumer_group_is_accepted(version):
    """Kafka ``GroupMetadataManager.classicGroupJoinToConsumerGroup`` deserializes any subscription version."""
    case = upgraded(fidelity="kafka")
    result = case.classic_join("", [], -1, instance="D", version=version)
    assert result.response.error_code.name == "NONE"
    member = case.gc.groups[GROUP].members[result.response.member_id]
    assert (member.instance_id, member.uses_classic_protocol) == ("D", True)
    assert result.response.generation_id == member.member_epoch
    # SyncGroup answers in the member's own version (Kafka ``prepareAssignment``).
    sync = case.classic_sync_result(member.member_id, member.member_epoch, instance="D").response
    assert sync.error_code.name == "NONE"
    assert ConsumerProtocolAssignment.decode(sync.assignment).version == version


def test_downgrade_when_a_classic_static_member_replaces_the_last_consumer_protocol_member():
    """Kafka ``GroupMetadataManager.validateOnlineDowngradeWithReplacedMemberId``: a classic static member replacing
    the last consumer-protocol member converts the group back."""
    case = upgraded()  # A (consumer protocol, instance A) took over a
    result = case.classic_join("", [], -1, instance="A")  # A rolls back to the classic protocol
    new_id = result.response.member_id
    assert (result.response.error_code.name, result.response.generation_id) == ("NONE", 22)
    assert record_names(result)[-1] == "GroupMetadata" and GROUP not in case.gc.groups
    classic = case.gc.classic_groups[GROUP]
    # no member left: no rebalance, the generation goes on (Kafka)
    assert (classic.state, classic.generation_id) == (ClassicGroupState.STABLE, 22)
    assert sorted(classic.members) == sorted([new_id, "b", "c"]) and classic.static_members["A"] == new_id
    assert case.classic_sync(new_id, 22, instance="A") == [0, 1]
    assert case.classic_heartbeat("b", 22, instance="B").response.error_code.name == "NONE"
    case.assert_rebuild_equals_live()


def test_no_downgrade_by_replacement_when_the_policy_forbids_it():
    """Kafka ``GroupMetadataManager.validateOnlineDowngradeWithReplacedMemberId``: no downgrade when the migration
    policy forbids it."""
    case = upgraded(migration_policy=ConsumerGroupMigrationPolicy.UPGRADE)
    result = case.classic_join("", [], -1, instance="A")
    assert GROUP in case.gc.groups and GROUP not in case.gc.classic_groups
    assert result.response.generation_id == 22


# ---------------------------------------------------------------------------- Kafka's behaviour, record by record
def batch_names(batch) -> list[str]:
    return record_names(CoordinatorResult(None, (batch,)))


def test_kafka_conversion_batch_then_the_join_bumps_the_epoch():
    """Kafka ``GroupMetadataManager.convertToConsumerGroup`` / ``ConsumerGroup.createConsumerGroupRecords``:
    no partition metadata at conversion, so the joining member's heartbeat writes it and bumps the epoch. Within
    each kind the members come as the new group's ``TimelineHashMap`` iterates a, b and c: c, b, a."""
    case = MigrationCase()
    result = case.consumer_join("A")
    assert timeline_hash_map_order(["a", "b", "c"]) == ["c", "b", "a"]
    assert batch_names(result.batches[0]) == [
        "~GroupMetadata",
        "MemberMetadata(c)",
        "MemberMetadata(b)",
        "MemberMetadata(a)",
        "Metadata",
        "TargetAssignmentMember(c)",
        "TargetAssignmentMember(b)",
        "TargetAssignmentMember(a)",
        "TargetAssignmentMetadata",
        "CurrentMemberAssignment(c)",
        "CurrentMemberAssignment(b)",
        "CurrentMemberAssignment(a)",
    ]
    later = [name for batch in result.batches[1:] for name in batch_names(batch)]
    assert later.count("PartitionMetadata") == 1 and later.count("Metadata") == 1
    group = case.gc.groups[GROUP]
    assert (group.group_epoch, group.assignment_epoch, result.response.member_epoch) == (23, 23, 23)
    # The classic members are behind the new epoch: their next Heartbeat tells them to rejoin.
    assert case.classic_heartbeat("b", 22, instance="B").response.error_code.name == "REBALANCE_IN_PROGRESS"
    case.assert_rebuild_equals_live()


def test_kip_conversion_writes_partition_metadata_and_the_takeover_does_not_bump():
    """KIP-848, 'Case Studies: Online Migration' (step 1): A takes over its classic identity at epoch 22, no bump."""
    case = MigrationCase(fidelity="kip")
    result = case.consumer_join("A")
    assert batch_names(result.batches[0])[4:6] == ["PartitionMetadata", "Metadata"]
    assert case.gc.groups[GROUP].group_epoch == 22


def rebalancing_classic_group_without_members(**config) -> GroupCoordinator:
    """A new classic group whose only member joined (initial delay running) and left: no member, PreparingRebalance."""
    cluster = ClusterMetadata()
    cluster.create_topic("foo", 2)
    gc = GroupCoordinator(CoordinatorConfig(**config), cluster)
    metadata = ConsumerProtocolSubscription(version=3, topics=["foo"]).encode()
    request = JoinGroupRequest(
        group_id=GROUP, session_timeout_ms=45_000, protocols=[JoinGroupRequestProtocol(name="range", metadata=metadata)]
    )
    member_id = gc.join_group(request).response.member_id
    assert gc.join_group(request.model_copy(update={"member_id": member_id})).response is None  # parked
    gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id=member_id)]))
    classic = gc.classic_groups[GROUP]
    assert (len(classic.members), classic.state) == (0, ClassicGroupState.PREPARING_REBALANCE)
    return gc


def join_request(member: str) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id=GROUP,
        member_id=member,
        member_epoch=0,
        rebalance_timeout_ms=60_000,
        subscribed_topic_names=["foo"],
        topic_partitions=[],
    )


def test_kafka_a_classic_group_without_members_but_not_empty_is_not_reused_when_migration_is_disabled():
    """Kafka ``ClassicGroup.isEmpty`` (state Empty) in ``GroupMetadataManager.getOrMaybeCreateConsumerGroup``."""
    gc = rebalancing_classic_group_without_members(migration_policy=ConsumerGroupMigrationPolicy.DISABLED)
    result = gc.consumer_group_heartbeat(join_request("N"))
    assert result.response.error_code.name == "GROUP_ID_NOT_FOUND"
    assert result.records == [] and GROUP not in gc.groups


def test_kafka_a_classic_group_without_members_but_not_empty_is_converted():
    """Kafka ``GroupMetadataManager.convertToConsumerGroup`` of a group with no member: three records."""
    gc = rebalancing_classic_group_without_members()
    result = gc.consumer_group_heartbeat(join_request("N"))
    assert result.response.error_code.name == "NONE"
    assert batch_names(result.batches[0]) == ["~GroupMetadata", "Metadata", "TargetAssignmentMetadata"]
    assert gc.groups[GROUP].group_epoch == 1  # generation 0 (no rebalance completed), bumped by N's join


def test_kafka_known_member_id_with_unknown_instance_id_is_unknown_member():
    """Kafka ``GroupMetadataManager.getOrMaybeSubscribeStaticConsumerGroupMember`` (unknown static member)."""
    case = upgraded(fidelity="kafka")
    result = case.classic_join("z", [], -1, instance="Z")
    assert result.response.error_code.name == "UNKNOWN_MEMBER_ID"
    assert result.records == [] and "z" not in case.gc.groups[GROUP].members


def test_kafka_sync_group_echoes_null_protocol_type_and_name():
    """Kafka ``GroupMetadataManager.classicGroupSyncToConsumerGroup`` answers with the request's type and name."""
    case = upgraded(fidelity="kafka")
    joined = case.classic_join("c", [2, 5], 22)
    request = SyncGroupRequest(
        group_id=GROUP, generation_id=joined.response.generation_id, member_id="c", group_instance_id="C"
    )
    response = case.gc.sync_group(request).response
    assert (response.error_code.name, response.protocol_type, response.protocol_name) == ("NONE", None, None)
    assert [p for _, p in ConsumerProtocolAssignment.decode(response.assignment).assigned_partitions] == [2, 5]
    named = case.classic_sync_result("c", joined.response.generation_id).response
    assert (named.protocol_type, named.protocol_name) == ("consumer", "range")


def test_kafka_leave_group_of_several_classic_members_bumps_the_epoch_once():
    """Kafka ``GroupMetadataManager.classicGroupLeaveToConsumerGroup``: one batch, every removal, then one bump."""
    case = upgraded(fidelity="kafka")
    epoch = case.gc.groups[GROUP].group_epoch
    result = case.gc.leave_group(
        LeaveGroupRequest(
            group_id=GROUP,
            members=[MemberIdentity(member_id="c"), MemberIdentity(member_id="x"), MemberIdentity(member_id="b")],
        )
    )
    assert [(m.member_id, m.error_code.name) for m in result.response.members] == [
        ("c", "NONE"),
        ("x", "UNKNOWN_MEMBER_ID"),
        ("b", "NONE"),
    ]
    assert len(result.batches) == 1
    names = record_names(result)
    assert names[-1] == "Metadata" and names.count("Metadata") == 1
    assert names.index("~CurrentMemberAssignment(c)") < names.index("~CurrentMemberAssignment(b)")
    assert {"~MemberMetadata(b)", "~MemberMetadata(c)"} <= set(names)
    group = case.gc.groups[GROUP]
    assert group.group_epoch == epoch + 1 and sorted(group.members) == ["A"]
    case.assert_rebuild_equals_live()


def test_leave_group_of_several_classic_members_bumps_once_under_kip_too():
    """Kafka ``GroupMetadataManager.classicGroupLeaveToConsumerGroup``; the KIP says nothing else (both profiles)."""
    case = upgraded()
    result = case.gc.leave_group(
        LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="b"), MemberIdentity(member_id="c")])
    )
    assert record_names(result).count("Metadata") == 1 and case.gc.groups[GROUP].group_epoch == 23


@pytest.mark.parametrize("fidelity", ["kafka", "kip"])
def test_a_classic_member_leaving_never_downgrades(fidelity):
    """Kafka ``ConsumerGroup.allMembersUseClassicProtocolExcept`` in ``validateOnlineDowngradeWithFencedMember``
    (and KIP-848, 'Kafka Consumer Migration': the group goes back when the last new-protocol consumer leaves)."""
    case = upgraded(fidelity=fidelity, migration_policy=ConsumerGroupMigrationPolicy.UPGRADE)
    case.consumer_heartbeat("A", epoch=-1)  # downgrades forbidden: b and c stay in the consumer group
    case.gc.config = case.gc.config.model_copy(update={"migration_policy": ConsumerGroupMigrationPolicy.BIDIRECTIONAL})
    case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="b")]))
    assert GROUP in case.gc.groups and GROUP not in case.gc.classic_groups
    assert sorted(case.gc.groups[GROUP].members) == ["c"]


def test_kafka_join_group_with_no_protocols_into_a_consumer_group():
    """Kafka ``ConsumerGroup.supportsClassicProtocols`` (via ``throwIfClassicProtocolIsNotSupported``)."""
    case = upgraded(fidelity="kafka")
    request = JoinGroupRequest(group_id=GROUP, session_timeout_ms=45_000, member_id="", protocols=[])
    result = case.gc.join_group(request)
    assert result.response.error_code.name == "INCONSISTENT_GROUP_PROTOCOL" and result.records == []


def test_kafka_downgrade_by_static_replacement_batch():
    """Kafka ``GroupMetadataManager.classicGroupJoinToConsumerGroup`` step 4 and ``convertToClassicGroup``:
    the join's records, then the consumer group's tombstones and the classic group's record."""
    case = upgraded(fidelity="kafka")
    result = case.classic_join("", [], -1, instance="A")
    new_id = result.response.member_id
    members = sorted([new_id, "b", "c"])
    assert batch_names(result.batches[-1]) == [
        *[f"~CurrentMemberAssignment({m})" for m in members],
        *[f"~TargetAssignmentMember({m})" for m in members],
        "~TargetAssignmentMetadata",
        *[f"~MemberMetadata({m})" for m in members],
        "~PartitionMetadata",
        "~Metadata",
        "GroupMetadata",
    ]
    classic = case.gc.classic_groups[GROUP]
    assert (classic.state, classic.generation_id) == (ClassicGroupState.STABLE, 23)
    assert (result.response.generation_id, result.response.protocol_name) == (23, "range")
    case.assert_rebuild_equals_live()
