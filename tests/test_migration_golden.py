"""The KIP's Online Migration case study as a golden test of every step.

Topic foo has 6 partitions. A classic group at generation 22 (A:[0,1], B:[3,4], C:[2,5]) is
upgraded member by member: A first, C stays classic (eager) throughout, B leaves and comes
back with the new protocol. Every step asserts the group and target epochs, the target, each
member's cell with its protocol and — for classic members — its classic state,
the group state, the response and the records written; after every step a coordinator
rebuilt from the log equals the live one.

Readings (docs/decisions.md M1-M6):

* The members are static (instance ids A, B, C). That is how A's new-protocol incarnation takes
  over A's classic identity and assignment at epoch 22 without a bump (the KIP's step 1): a
  static member restarts without LeaveGroup, and a consumer-protocol member may replace a
  classic static one at once (Kafka). Member ids change across incarnations (``a`` -> ``A``);
  the columns are the instance ids.
* The coordinator computes a target synchronously, in the request that needs it (Kafka): C's
  JoinGroup computes the target of generation 23 (the KIP's steps 3 and 4 are that request's two
  batches); B's join writes the KIP's steps 7, 8 and 8a as three batches.
* Heartbeat answers REBALANCE_IN_PROGRESS when the member is behind the group epoch (Kafka);
  the classic state shown is PreparingRebalance when the member is behind the target epoch
  (the KIP: "triggers a rebalance for C" when the new target is installed).
"""

from __future__ import annotations

from golden_support import GROUP, record_names, response_view
from migration_support import MigrationCase

from kip_lab.protocol.classic_group import LeaveGroupRequest, MemberIdentity
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment


def test_online_migration_case_l3214():
    case = MigrationCase()

    # Step 0: a classic group at generation 22, Stable.
    classic = case.gc.classic_groups[GROUP]
    assert (classic.state.value, classic.generation_id, classic.protocol_name) == ("Stable", 22, "range")
    owned = {
        m.group_instance_id: [p for _, p in ConsumerProtocolAssignment.decode(m.assignment).assigned_partitions]
        for m in classic.members.values()
    }
    assert owned == {"A": [0, 1], "B": [3, 4], "C": [2, 5]}
    assert GROUP not in case.gc.groups
    case.assert_rebuild_equals_live()

    # Step 1: A restarts with the new protocol. The group is converted at GE 22 (no bump):
    # one batch holds the classic tombstone and the consumer group built from generation 22.
    result = case.consumer_join("A")
    assert record_names(result) == [
        "~GroupMetadata",
        "MemberMetadata(a)",
        "MemberMetadata(b)",
        "MemberMetadata(c)",
        "PartitionMetadata",
        "Metadata",
        "TargetAssignmentMember(a)",
        "TargetAssignmentMember(b)",
        "TargetAssignmentMember(c)",
        "TargetAssignmentMetadata",
        "CurrentMemberAssignment(a)",
        "CurrentMemberAssignment(b)",
        "CurrentMemberAssignment(c)",
        # A takes over a's instance id: a is removed, A inherits its target, then reconciles.
        "~CurrentMemberAssignment(a)",
        "~MemberMetadata(a)",
        "~TargetAssignmentMember(a)",
        "MemberMetadata(A)",
        "TargetAssignmentMember(A)",
        "CurrentMemberAssignment(A)",
        "CurrentMemberAssignment(A)",
    ]
    converted, replaced, reconciled = case.per_batch(result)
    assert converted == (
        22,
        22,
        {"A": [0, 1], "B": [3, 4], "C": [2, 5]},
        {"A": "classic e22 [0,1] Stable", "B": "classic e22 [3,4] Stable", "C": "classic e22 [2,5] Stable"},
        "Stable",
    )
    assert replaced[3]["A"] == "new e0 [0,1]"  # the replacement, before it reconciles
    assert reconciled == (
        22,
        22,
        {"A": [0, 1], "B": [3, 4], "C": [2, 5]},
        {"A": "new e22 [0,1]", "B": "classic e22 [3,4] Stable", "C": "classic e22 [2,5] Stable"},
        "Stable",
    )
    assert response_view(result) == ("NONE", 22, [0, 1], [])
    assert GROUP not in case.gc.classic_groups
    case.assert_rebuild_equals_live()

    # Step 2: B (classic) leaves: removed, GE bumped; the target still lists B.
    result = case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="b")]))
    assert [m.error_code.name for m in result.response.members] == ["NONE"]
    assert record_names(result) == ["~CurrentMemberAssignment(b)", "~MemberMetadata(b)", "Metadata"]
    assert case.row() == (
        23,
        22,
        {"A": [0, 1], "C": [2, 5]},
        {"A": "new e22 [0,1]", "B": "-", "C": "classic e22 [2,5] Stable"},
        "Assigning",
    )
    assert case.gc.groups[GROUP].target["b"] == {case.foo: (3, 4)}  # the target still lists B
    case.assert_rebuild_equals_live()

    # Step 4, first half: C heartbeats and learns that a rebalance is required.
    assert case.classic_heartbeat("c", 22).response.error_code.name == "REBALANCE_IN_PROGRESS"

    # Steps 3-4: C (eager) revoked everything and sends JoinGroup. Its JoinGroup
    # installs the target of GE 23 (step 3: a rebalance is triggered for C), then moves C to
    # epoch 23 at once since it owns nothing it must give up; the generation returned is 23.
    result = case.classic_join("c", owned=[], generation=22)
    assert record_names(result) == [
        "TargetAssignmentMember(A)",
        "TargetAssignmentMember(c)",
        "~TargetAssignmentMember(b)",
        "TargetAssignmentMetadata",
        "CurrentMemberAssignment(c)",
    ]
    step3, step4 = case.per_batch(result)
    assert step3 == (
        23,
        23,
        {"A": [0, 1, 3], "C": [2, 5, 4]},
        {"A": "new e22 [0,1]", "B": "-", "C": "classic e22 [2,5] PreparingRebalance"},
        "Reconciling",
    )
    # CompletingRebalance is soft state (C's SyncGroup deadline), so only the live coordinator shows it;
    # the coordinator replayed up to this batch sees C at the target epoch with nothing pending.
    assert step4 == (
        23,
        23,
        {"A": [0, 1, 3], "C": [2, 5, 4]},
        {"A": "new e22 [0,1]", "B": "-", "C": "classic e23 [2,4,5] Stable"},
        "Reconciling",
    )
    assert case.row()[3]["C"] == "classic e23 [2,4,5] CompletingRebalance"
    assert (result.response.error_code.name, result.response.generation_id) == ("NONE", 23)
    assert (result.response.member_id, result.response.protocol_name, result.response.leader) == ("c", "range", "")
    case.assert_rebuild_equals_live()

    # Step 5: A heartbeats and moves to epoch 23; foo-3 was B's and is free.
    result = case.consumer_heartbeat("A", [0, 1])
    assert record_names(result) == ["CurrentMemberAssignment(A)"]
    assert response_view(result) == ("NONE", 23, [0, 1, 3], [])
    assert case.row() == (
        23,
        23,
        {"A": [0, 1, 3], "C": [2, 5, 4]},
        {"A": "new e23 [0,1,3]", "B": "-", "C": "classic e23 [2,4,5] CompletingRebalance"},
        "Stable",
    )
    case.assert_rebuild_equals_live()

    # Step 6: C's SyncGroup collects [2,5,4] (all free) and C is Stable.
    assert case.classic_sync("c", 23) == [2, 4, 5]
    assert case.row()[3]["C"] == "classic e23 [2,4,5] Stable"
    assert case.row()[4] == "Stable"
    case.assert_rebuild_equals_live()

    # Steps 7, 8, 8a: B rejoins with the new protocol: GE 24; the target of 24
    # moves foo-3 and foo-4 to B and triggers a rebalance for C; B waits for both.
    result = case.consumer_join("B")
    assert record_names(result) == [
        "MemberMetadata(B)",
        "Metadata",
        "TargetAssignmentMember(A)",
        "TargetAssignmentMember(B)",
        "TargetAssignmentMember(c)",
        "TargetAssignmentMetadata",
        "CurrentMemberAssignment(B)",
    ]
    step7, step8, step8a = case.per_batch(result)
    assert step7 == (
        24,
        23,
        {"A": [0, 1, 3], "C": [2, 5, 4]},
        {"A": "new e23 [0,1,3]", "B": "new e0 []", "C": "classic e23 [2,4,5] Stable"},
        "Assigning",
    )
    # The KIP already shows B's pending [3,4] here; ours appear when B reconciles (8a).
    assert step8 == (
        24,
        24,
        {"A": [0, 1], "B": [3, 4], "C": [2, 5]},
        {"A": "new e23 [0,1,3]", "B": "new e0 []", "C": "classic e23 [2,4,5] PreparingRebalance"},
        "Reconciling",
    )
    assert step8a[3]["B"] == "new e24 [] p[3,4]"
    assert response_view(result) == ("NONE", 24, [], [3, 4])
    case.assert_rebuild_equals_live()

    # Step 9: A heartbeats and is told to revoke foo-3.
    result = case.consumer_heartbeat("A", [0, 1, 3])
    assert record_names(result) == ["CurrentMemberAssignment(A)"]
    assert response_view(result) == ("NONE", 23, [0, 1], [])
    assert case.row()[3]["A"] == "new e23 [0,1] r[3]"
    case.assert_rebuild_equals_live()

    # Step 10: C heartbeats, gets REBALANCE_IN_PROGRESS, revokes (eager: all) and rejoins.
    assert case.classic_heartbeat("c", 23).response.error_code.name == "REBALANCE_IN_PROGRESS"

    # Step 11: C no longer owns foo-4: epoch 24, CompletingRebalance; foo-4 is released.
    result = case.classic_join("c", owned=[], generation=23)
    # C's subscription now says generation 23: its classic metadata (the protocols) is rewritten.
    assert record_names(result) == ["MemberMetadata(c)", "CurrentMemberAssignment(c)"]
    assert (result.response.error_code.name, result.response.generation_id) == ("NONE", 24)
    assert case.row() == (
        24,
        24,
        {"A": [0, 1], "B": [3, 4], "C": [2, 5]},
        {"A": "new e23 [0,1] r[3]", "B": "new e24 [] p[3,4]", "C": "classic e24 [2,5] CompletingRebalance"},
        "Reconciling",
    )
    case.assert_rebuild_equals_live()

    # Step 11a: B heartbeats and receives foo-4.
    result = case.consumer_heartbeat("B", [])
    assert response_view(result) == ("NONE", 24, [4], [3])
    assert case.row()[3]["B"] == "new e24 [4] p[3]"
    case.assert_rebuild_equals_live()

    # Step 12: C's SyncGroup collects [2,5]; C is Stable.
    assert case.classic_sync("c", 24) == [2, 5]
    assert case.row()[3:] == (
        {"A": "new e23 [0,1] r[3]", "B": "new e24 [4] p[3]", "C": "classic e24 [2,5] Stable"},
        "Reconciling",
    )
    case.assert_rebuild_equals_live()

    # Step 13: A confirms foo-3 is revoked: epoch 24; foo-3 is released.
    result = case.consumer_heartbeat("A", [0, 1])
    assert record_names(result) == ["CurrentMemberAssignment(A)"]
    # Only the epoch moved (usable partitions unchanged): Kafka sends no assignment (see test_golden_kip848).
    assert response_view(result) == ("NONE", 24, None, None)
    assert case.row()[3]["A"] == "new e24 [0,1]"
    case.assert_rebuild_equals_live()

    # Step 14: B heartbeats and gets its whole assignment; the group is Stable.
    result = case.consumer_heartbeat("B", [4])
    assert response_view(result) == ("NONE", 24, [3, 4], [])
    assert case.row() == (
        24,
        24,
        {"A": [0, 1], "B": [3, 4], "C": [2, 5]},
        {"A": "new e24 [0,1]", "B": "new e24 [3,4]", "C": "classic e24 [2,5] Stable"},
        "Stable",
    )
    case.assert_rebuild_equals_live()
