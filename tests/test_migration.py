"""Online migration beyond the KIP's case: each migration policy, conversion both ways, the
rejections, classic members timing out or leaving mid-migration, static classic members, and a
classic member whose new partitions are not yet free (docs/decisions.md M-entries)."""

from __future__ import annotations

import pytest
from golden_support import GROUP, record_names
from migration_support import MigrationCase

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
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment


def upgraded(**config) -> MigrationCase:
    """The KIP's start, then A restarts with the consumer protocol (the group is converted)."""
    case = MigrationCase(**config)
    assert case.consumer_join("A").response.error_code.name == "NONE"
    return case


@pytest.mark.parametrize("policy", list(ConsumerGroupMigrationPolicy))
def test_upgrade_follows_the_policy(policy):
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
    case = upgraded(migration_policy=ConsumerGroupMigrationPolicy.UPGRADE)
    case.gc.config = case.gc.config.model_copy(update={"migration_policy": policy})
    result = case.consumer_heartbeat("A", epoch=-1)  # the last consumer-protocol member leaves
    assert result.response.error_code.name == "NONE"
    if policy.downgrade_enabled:
        assert record_names(result) == [
            "~CurrentMemberAssignment(A)",
            "~MemberMetadata(A)",
            "~CurrentMemberAssignment(b)",
            "~MemberMetadata(b)",
            "~CurrentMemberAssignment(c)",
            "~MemberMetadata(c)",
            "~TargetAssignmentMember(A)",
            "~TargetAssignmentMember(b)",
            "~TargetAssignmentMember(c)",
            "~TargetAssignmentMetadata",
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


def test_upgrade_needs_consumer_protocol_v3():
    case = MigrationCase(version=2)
    result = case.consumer_join("A")
    assert result.response.error_code.name == "INVALID_REQUEST"
    assert "v2" in result.response.error_message
    assert case.gc.classic_groups[GROUP].state is ClassicGroupState.STABLE


def test_an_empty_classic_group_id_is_reused_by_a_consumer_group():
    case = MigrationCase(start={"a": {"foo": [0, 1, 2, 3, 4, 5]}})
    case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="a")]))
    case.gc.advance(300_000)  # nobody rejoins: the group empties (generation 23)
    assert case.gc.classic_groups[GROUP].state is ClassicGroupState.EMPTY
    result = case.consumer_join("N")
    assert record_names(result)[0] == "~GroupMetadata"
    assert case.gc.groups[GROUP].group_epoch == 1  # a new group: nothing carried over
    case.assert_rebuild_equals_live()


def test_upgrade_of_a_rebalancing_classic_group_tells_parked_members_to_rejoin():
    case = MigrationCase()
    case.classic_join("b", [3, 4], 22, instance="B").response  # noqa: B018 - parks b's JoinGroup
    assert case.gc.classic_groups[GROUP].state is ClassicGroupState.PREPARING_REBALANCE
    result = case.consumer_join("A")
    assert {d.ref: d.response.error_code.name for d in result.deferred} == {"B-join": "REBALANCE_IN_PROGRESS"}
    assert case.gc.timers() and not any(k[0].startswith("classic ") for k in case.gc.timers())


def test_classic_member_session_timeout_in_a_consumer_group():
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
    case = upgraded()
    case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="b")]))
    assert case.classic_heartbeat("c", 22).response.error_code.name == "REBALANCE_IN_PROGRESS"
    assert ("join", GROUP, "c") in case.gc.timers()
    keep_alive(case, 295_000, {"c": 22})  # c heartbeats but never sends JoinGroup
    assert "c" in case.gc.groups[GROUP].members
    keep_alive(case, 5_000, {"c": 22})  # its rebalance timeout (300 s) passes
    assert "c" not in case.gc.groups[GROUP].members


def test_classic_member_that_does_not_sync_in_time_is_removed():
    case = upgraded()
    case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="b")]))
    case.classic_join("c", [], 22)
    assert case.gc.classic_member_state(GROUP, "c") == "CompletingRebalance"
    keep_alive(case, 295_000, {"c": 23})
    assert "c" in case.gc.groups[GROUP].members
    keep_alive(case, 5_000, {"c": 23})  # no SyncGroup within its rebalance timeout
    assert "c" not in case.gc.groups[GROUP].members


def test_classic_requests_into_a_consumer_group_are_validated():
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
    case = upgraded()
    request = JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=45_000,
        member_id="z",
        protocols=[JoinGroupRequestProtocol(name="roundrobin", metadata=b"{}")],
    )
    assert case.gc.join_group(request).response.error_code.name == "INCONSISTENT_GROUP_PROTOCOL"
    bad = request.model_copy(update={"protocols": [JoinGroupRequestProtocol(name="range", metadata=b"not json")]})
    assert case.gc.join_group(bad).response.error_code.name == "INCONSISTENT_GROUP_PROTOCOL"


def test_an_empty_consumer_group_id_is_reused_by_a_classic_group():
    case = upgraded(migration_policy=ConsumerGroupMigrationPolicy.UPGRADE)
    for member_id in ("b", "c"):
        case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id=member_id)]))
    case.consumer_heartbeat("A", epoch=-1)
    assert case.gc.groups[GROUP].state.value == "Empty"
    result = case.classic_join("", [], -1, instance=None)
    assert result.response.error_code.name == "MEMBER_ID_REQUIRED"
    assert record_names(result) == [
        "~TargetAssignmentMember(A)",  # the last target still listed the members that left
        "~TargetAssignmentMember(b)",
        "~TargetAssignmentMember(c)",
        "~TargetAssignmentMetadata",
        "~PartitionMetadata",
        "~Metadata",
        "GroupMetadata",  # the new, empty classic group (Kafka writes it so the group exists)
    ]
    assert GROUP not in case.gc.groups
    assert case.gc.classic_groups[GROUP].state is ClassicGroupState.EMPTY
    case.assert_rebuild_equals_live()


def test_downgrade_when_the_last_consumer_member_times_out():
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
    """M19: a cooperative member joins still owning what it keeps *and* what it must give up."""
    case = upgraded()
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


def test_classic_join_with_an_old_embedded_protocol_into_a_consumer_group_is_rejected():
    case = upgraded()
    result = case.classic_join("d", [], -1, instance="D", version=2)
    assert result.response.error_code.name == "INVALID_REQUEST"
    assert result.records == [] and "d" not in case.gc.groups[GROUP].members


def test_downgrade_when_a_classic_static_member_replaces_the_last_consumer_protocol_member():
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
    case = upgraded(migration_policy=ConsumerGroupMigrationPolicy.UPGRADE)
    result = case.classic_join("", [], -1, instance="A")
    assert GROUP in case.gc.groups and GROUP not in case.gc.classic_groups
    assert result.response.generation_id == 22
