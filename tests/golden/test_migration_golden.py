"""KIP-848's 'Online Migration' case study as a golden test of every step, under both profiles.

Topic foo has 6 partitions. A classic group at generation 22 (A:[0,1], B:[3,4], C:[2,5]) is
upgraded member by member: A first, C stays classic (eager) throughout, B leaves and comes
back with the new protocol. Every step asserts the group and target epochs, the target, each
member's cell with its protocol and — for classic members — its classic state, the group
state, the response and the records written; after every step a coordinator rebuilt from the
log equals the live one.

Readings (docs/decisions.md M1-M6):

* The members are static (instance ids A, B, C). That is how A's new-protocol incarnation takes
  over A's classic identity and assignment (step 1): a static member restarts without
  LeaveGroup, and a consumer-protocol member may replace a classic static one at once (Kafka).
  Member ids change across incarnations (``a`` -> ``A``); the columns are the instance ids.
* Step 1 is where the profiles part. Under ``kip`` the conversion writes the partition metadata
  and A's takeover does not bump the epoch (the KIP's table: epoch 22). Kafka's conversion
  (``ConsumerGroup.createConsumerGroupRecords``) writes none, so A's heartbeat computes it and
  bumps the epoch to 23: b and c are behind and will be told to rejoin. From there on the story
  is the same, one epoch later under ``kafka``.
* The coordinator computes a target synchronously, in the request that needs it (Kafka): C's
  JoinGroup computes the next target (KIP steps 3 and 4 are that request's two batches); B's
  join writes KIP steps 7, 8 and 8a as three batches.
* Heartbeat answers REBALANCE_IN_PROGRESS when the member is behind the group epoch (Kafka);
  the classic state shown is PreparingRebalance when the member is behind the target epoch
  (the KIP: "triggers a rebalance for C" when the new target is installed).
"""

from __future__ import annotations

import pytest
from golden_support import GROUP, record_names, response_view
from migration_support import MigrationCase

from kip_lab.protocol.classic_group import LeaveGroupRequest, MemberIdentity
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment

B_TARGET_TOMBSTONE = "~TargetAssignmentMember(b)"


@pytest.mark.parametrize("fidelity", ["kip", "kafka"])
def test_online_migration_case_study(fidelity):
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat``, ``classicGroupJoinToConsumerGroup``,
    ``classicGroupSyncToConsumerGroup`` and ``ConsumerGroup.fromClassicGroup``, step by step against KIP-848's
    table (section "Online Migration" in "Case Studies")."""
    case = MigrationCase(fidelity=fidelity)
    kafka = fidelity == "kafka"
    e = 1 if kafka else 0  # Kafka's step 1 bumps the epoch: every later epoch is one higher

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

    # Step 1: A restarts with the new protocol. One batch holds the classic tombstone and the
    # consumer group built from generation 22; A's own records follow.
    result = case.consumer_join("A")
    # Within each kind, members as Kafka's new ``TimelineHashMap`` iterates a, b, c: c, b, a.
    conversion = ["~GroupMetadata", "MemberMetadata(c)", "MemberMetadata(b)", "MemberMetadata(a)"]
    conversion += [] if kafka else ["PartitionMetadata"]
    conversion += ["Metadata", "TargetAssignmentMember(c)", "TargetAssignmentMember(b)", "TargetAssignmentMember(a)"]
    conversion += ["TargetAssignmentMetadata"]
    conversion += ["CurrentMemberAssignment(c)", "CurrentMemberAssignment(b)", "CurrentMemberAssignment(a)"]
    names = record_names(result)
    assert names[: len(conversion)] == conversion
    takeover = names[len(conversion) :]
    # A takes over a's instance id: a is removed, A inherits its target, then reconciles. (The order
    # of these records is the consumer group's static-replacement rule, docs/decisions.md D13.)
    assert {
        "~CurrentMemberAssignment(a)",
        "~MemberMetadata(a)",
        "~TargetAssignmentMember(a)",
        "MemberMetadata(A)",
        "TargetAssignmentMember(A)",
    } <= set(takeover)
    assert takeover[-1] == "CurrentMemberAssignment(A)"
    # kafka: the partition metadata the conversion did not write, and the bump it causes; kip: neither.
    assert (takeover.count("PartitionMetadata"), takeover.count("Metadata")) == ((1, 1) if kafka else (0, 0))
    rows = case.per_batch(result)
    assert rows[0] == (
        22,
        22,
        {"A": [0, 1], "B": [3, 4], "C": [2, 5]},
        {"A": "classic e22 [0,1] Stable", "B": "classic e22 [3,4] Stable", "C": "classic e22 [2,5] Stable"},
        "Stable",
    )
    assert rows[1][3]["A"] == "new e0 [0,1]"  # the replacement, before it reconciles
    behind = "PreparingRebalance" if kafka else "Stable"  # b and c behind the target epoch under kafka
    assert rows[-1] == (
        22 + e,
        22 + e,
        {"A": [0, 1], "B": [3, 4], "C": [2, 5]},
        {"A": f"new e{22 + e} [0,1]", "B": f"classic e22 [3,4] {behind}", "C": f"classic e22 [2,5] {behind}"},
        "Reconciling" if kafka else "Stable",
    )
    assert response_view(result) == ("NONE", 22 + e, [0, 1], [])
    assert GROUP not in case.gc.classic_groups
    case.assert_rebuild_equals_live()

    # Step 2: B (classic) leaves: removed, GE bumped. Where b's target entry goes is the consumer
    # group's removal rule (docs/decisions.md D4): at removal or in the next target batch.
    result = case.gc.leave_group(LeaveGroupRequest(group_id=GROUP, members=[MemberIdentity(member_id="b")]))
    assert [m.error_code.name for m in result.response.members] == ["NONE"]
    removal = record_names(result)
    b_tombstones = removal.count(B_TARGET_TOMBSTONE)
    assert [n for n in removal if n != B_TARGET_TOMBSTONE] == [
        "~CurrentMemberAssignment(b)",
        "~MemberMetadata(b)",
        "Metadata",
    ]
    assert case.row() == (
        23 + e,
        22 + e,
        {"A": [0, 1], "C": [2, 5]},
        {"A": f"new e{22 + e} [0,1]", "B": "-", "C": f"classic e22 [2,5] {behind}"},
        "Assigning",
    )
    if not kafka:  # the KIP's table: the target still lists B
        assert case.gc.groups[GROUP].target["b"] == {case.foo: (3, 4)}
    case.assert_rebuild_equals_live()

    # Step 4, first half: C heartbeats and learns that a rebalance is required.
    assert case.classic_heartbeat("c", 22).response.error_code.name == "REBALANCE_IN_PROGRESS"

    # Steps 3-4: C (eager) revoked everything and sends JoinGroup. Its JoinGroup installs the next
    # target (step 3: a rebalance is triggered for C), then moves C to that epoch at once since it
    # owns nothing it must give up; the generation returned is that epoch.
    result = case.classic_join("c", owned=[], generation=22)
    names = record_names(result)
    b_tombstones += names.count(B_TARGET_TOMBSTONE)
    assert b_tombstones == 1
    assert [n for n in names if n != B_TARGET_TOMBSTONE] == [
        "TargetAssignmentMember(A)",
        "TargetAssignmentMember(c)",
        "TargetAssignmentMetadata",
        "CurrentMemberAssignment(c)",
    ]
    step3, step4 = case.per_batch(result)
    assert step3 == (
        23 + e,
        23 + e,
        {"A": [0, 1, 3], "C": [2, 5, 4]},
        {"A": f"new e{22 + e} [0,1]", "B": "-", "C": "classic e22 [2,5] PreparingRebalance"},
        "Reconciling",
    )
    # CompletingRebalance is soft state (C's SyncGroup deadline), so only the live coordinator shows it;
    # the coordinator replayed up to this batch sees C at the target epoch with nothing pending.
    assert step4 == (
        23 + e,
        23 + e,
        {"A": [0, 1, 3], "C": [2, 5, 4]},
        {"A": f"new e{22 + e} [0,1]", "B": "-", "C": f"classic e{23 + e} [2,4,5] Stable"},
        "Reconciling",
    )
    assert case.row()[3]["C"] == f"classic e{23 + e} [2,4,5] CompletingRebalance"
    assert (result.response.error_code.name, result.response.generation_id) == ("NONE", 23 + e)
    assert (result.response.member_id, result.response.protocol_name, result.response.leader) == ("c", "range", "")
    case.assert_rebuild_equals_live()

    # Step 5: A heartbeats and moves to the new epoch; foo-3 was B's and is free.
    result = case.consumer_heartbeat("A", [0, 1])
    assert record_names(result) == ["CurrentMemberAssignment(A)"]
    assert response_view(result) == ("NONE", 23 + e, [0, 1, 3], [])
    assert case.row() == (
        23 + e,
        23 + e,
        {"A": [0, 1, 3], "C": [2, 5, 4]},
        {"A": f"new e{23 + e} [0,1,3]", "B": "-", "C": f"classic e{23 + e} [2,4,5] CompletingRebalance"},
        "Stable",
    )
    case.assert_rebuild_equals_live()

    # Step 6: C's SyncGroup collects [2,5,4] (all free) and C is Stable.
    assert case.classic_sync("c", 23 + e) == [2, 4, 5]
    assert case.row()[3]["C"] == f"classic e{23 + e} [2,4,5] Stable"
    assert case.row()[4] == "Stable"
    case.assert_rebuild_equals_live()

    # Steps 7, 8, 8a: B rejoins with the new protocol and bumps the epoch; the new target moves
    # foo-3 and one of C's partitions to B and triggers a rebalance for C; B waits for both.
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
    # Of C's foo-4 and foo-5, which one moves to B is the uniform assignor's choice: the KIP's table
    # moves foo-4; Kafka's assignor decides by its hash-set order (docs/decisions.md, server-side assignors).
    moved = next(p for p in (4, 5) if p in step8[2]["B"])
    kept = 9 - moved
    if not kafka:
        assert moved == 4
    assert step7 == (
        24 + e,
        23 + e,
        {"A": [0, 1, 3], "C": [2, 5, 4]},
        {"A": f"new e{23 + e} [0,1,3]", "B": "new e0 []", "C": f"classic e{23 + e} [2,4,5] Stable"},
        "Assigning",
    )
    # The KIP's table already shows B's pending partitions here; ours appear when B reconciles (8a).
    assert step8 == (
        24 + e,
        24 + e,
        {"A": [0, 1], "B": [3, moved], "C": [2, kept]},
        {"A": f"new e{23 + e} [0,1,3]", "B": "new e0 []", "C": f"classic e{23 + e} [2,4,5] PreparingRebalance"},
        "Reconciling",
    )
    assert step8a[3]["B"] == f"new e{24 + e} [] p[3,{moved}]"
    assert response_view(result) == ("NONE", 24 + e, [], [3, moved])
    case.assert_rebuild_equals_live()

    # Step 9: A heartbeats and is told to revoke foo-3.
    result = case.consumer_heartbeat("A", [0, 1, 3])
    assert record_names(result) == ["CurrentMemberAssignment(A)"]
    assert response_view(result) == ("NONE", 23 + e, [0, 1], [])
    assert case.row()[3]["A"] == f"new e{23 + e} [0,1] r[3]"
    case.assert_rebuild_equals_live()

    # Step 10: C heartbeats, gets REBALANCE_IN_PROGRESS, revokes (eager: all) and rejoins.
    assert case.classic_heartbeat("c", 23 + e).response.error_code.name == "REBALANCE_IN_PROGRESS"

    # Step 11: C no longer owns the moved partition: the new epoch, CompletingRebalance; it is released.
    result = case.classic_join("c", owned=[], generation=23 + e)
    # C's subscription now carries its new generation: its classic metadata (the protocols) is rewritten.
    assert record_names(result) == ["MemberMetadata(c)", "CurrentMemberAssignment(c)"]
    assert (result.response.error_code.name, result.response.generation_id) == ("NONE", 24 + e)
    assert case.row() == (
        24 + e,
        24 + e,
        {"A": [0, 1], "B": [3, moved], "C": [2, kept]},
        {
            "A": f"new e{23 + e} [0,1] r[3]",
            "B": f"new e{24 + e} [] p[3,{moved}]",
            "C": f"classic e{24 + e} [2,{kept}] CompletingRebalance",
        },
        "Reconciling",
    )
    case.assert_rebuild_equals_live()

    # Step 11a: B heartbeats and receives the partition C released.
    result = case.consumer_heartbeat("B", [])
    assert response_view(result) == ("NONE", 24 + e, [moved], [3])
    assert case.row()[3]["B"] == f"new e{24 + e} [{moved}] p[3]"
    case.assert_rebuild_equals_live()

    # Step 12: C's SyncGroup collects what it keeps; C is Stable.
    assert case.classic_sync("c", 24 + e) == [2, kept]
    assert case.row()[3:] == (
        {
            "A": f"new e{23 + e} [0,1] r[3]",
            "B": f"new e{24 + e} [{moved}] p[3]",
            "C": f"classic e{24 + e} [2,{kept}] Stable",
        },
        "Reconciling",
    )
    case.assert_rebuild_equals_live()

    # Step 13: A confirms foo-3 is revoked: the new epoch; foo-3 is released.
    result = case.consumer_heartbeat("A", [0, 1])
    assert record_names(result) == ["CurrentMemberAssignment(A)"]
    # Only the epoch moved (usable partitions unchanged): Kafka sends no assignment (see test_golden_kip848).
    assert response_view(result) == ("NONE", 24 + e, None, None)
    assert case.row()[3]["A"] == f"new e{24 + e} [0,1]"
    case.assert_rebuild_equals_live()

    # Step 14: B heartbeats and gets its whole assignment; the group is Stable.
    result = case.consumer_heartbeat("B", [moved])
    assert response_view(result) == ("NONE", 24 + e, [3, moved], [])
    assert case.row() == (
        24 + e,
        24 + e,
        {"A": [0, 1], "B": [3, moved], "C": [2, kept]},
        {"A": f"new e{24 + e} [0,1]", "B": f"new e{24 + e} [3,{moved}]", "C": f"classic e{24 + e} [2,{kept}] Stable"},
        "Stable",
    )
    case.assert_rebuild_equals_live()
