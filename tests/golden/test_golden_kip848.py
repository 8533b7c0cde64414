"""KIP-848's case studies ("Basic Case", "Third Member Joins", "Member Failure", "Partition Added")
as golden tests: every step of their tables.

Each step asserts the group epoch, the target (epoch and per-member partitions, in target
order), every member's cell (epoch, usable, pending, revoking), the group state, the
response the acting member got, and the records the step wrote. After every step a
coordinator rebuilt from the log must equal the live one.

Timing: the coordinator follows Kafka — a heartbeat that bumps the group epoch also computes
the target and reconciles its sender, writing one batch for each. The KIP draws those as
separate snapshots; we check them by replaying the log batch by batch (``per_batch``). The
response carries an assignment only on a full request or when the member's usable partitions
changed (Kafka); an epoch move alone shows ``None`` where the KIP's Response column repeats the
partitions. One consequence: a joining member is already at the new epoch when the KIP still
shows it at epoch 0 (Basic step 11 below), noted where it occurs. Where the two profiles part
ways (Member Failure, step 1), the case runs under both and asserts each.
"""

from __future__ import annotations

import pytest
from golden_support import Case, Snapshot, record_names, response_view

JOIN_RECORDS = [
    "MemberMetadata({m})",
    "Metadata",
    "TargetAssignmentMember",
    "TargetAssignmentMetadata",
    "CurrentMemberAssignment({m})",
]


def test_basic_case():
    """KIP-848, section "Basic Case" in "Case Studies", step by step; Kafka
    ``GroupMetadataManager.consumerGroupHeartbeat`` and ``CurrentAssignmentBuilder.computeNextAssignment`` decide
    each step."""
    case = Case(partitions=3)

    # Steps 0-2: A joins; the target gives it everything; it moves to epoch 1.
    result = case.join("A")
    assert record_names(result) == [
        "MemberMetadata(A)",
        "PartitionMetadata",
        "Metadata",
        "TargetAssignmentMember(A)",
        "TargetAssignmentMetadata",
        "CurrentMemberAssignment(A)",
    ]
    step0, step1, step2 = case.per_batch(result)
    assert step0 == Snapshot(1, 0, {}, {"A": "e0 []", "B": "-", "C": "-"}, "Assigning")
    assert step1 == Snapshot(1, 1, {"A": [0, 1, 2]}, {"A": "e0 []", "B": "-", "C": "-"}, "Reconciling")
    assert step2 == Snapshot(1, 1, {"A": [0, 1, 2]}, {"A": "e1 [0,1,2]", "B": "-", "C": "-"}, "Stable")
    assert response_view(result) == ("NONE", 1, [0, 1, 2], [])
    assert result.response.member_id == "A"
    case.assert_rebuild_equals_live()

    # Steps 3-5: B joins, target {A:[0,1], B:[2]}; B at epoch 2 waits for foo-2.
    result = case.join("B")
    assert record_names(result) == [
        "MemberMetadata(B)",
        "Metadata",
        "TargetAssignmentMember(A)",
        "TargetAssignmentMember(B)",
        "TargetAssignmentMetadata",
        "CurrentMemberAssignment(B)",
    ]
    step3, step4, step5 = case.per_batch(result)
    assert step3 == Snapshot(2, 1, {"A": [0, 1, 2]}, {"A": "e1 [0,1,2]", "B": "e0 []", "C": "-"}, "Assigning")
    assert step4 == Snapshot(2, 2, {"A": [0, 1], "B": [2]}, {"A": "e1 [0,1,2]", "B": "e0 []", "C": "-"}, "Reconciling")
    assert step5 == Snapshot(
        2, 2, {"A": [0, 1], "B": [2]}, {"A": "e1 [0,1,2]", "B": "e2 [] p[2]", "C": "-"}, "Reconciling"
    )
    assert response_view(result) == ("NONE", 2, [], [2])
    case.assert_rebuild_equals_live()

    # Step 6: A heartbeats and is told to revoke foo-2 — no new partitions, same epoch.
    result = case.heartbeat("A", owned=[0, 1, 2])
    assert response_view(result) == ("NONE", 1, [0, 1], [])
    assert record_names(result) == ["CurrentMemberAssignment(A)"]
    assert case.now() == Snapshot(
        2, 2, {"A": [0, 1], "B": [2]}, {"A": "e1 [0,1] r[2]", "B": "e2 [] p[2]", "C": "-"}, "Reconciling"
    )
    assert ("rebalance", "g", "A") in case.gc.timers()
    case.assert_rebuild_equals_live()

    # Step 7: A acknowledges (owned [0,1]); it moves to epoch 2, foo-2 is released.
    result = case.heartbeat("A", owned=[0, 1])
    assert response_view(result) == ("NONE", 2, None, None)
    assert record_names(result) == ["CurrentMemberAssignment(A)"]
    assert case.now().members == {"A": "e2 [0,1]", "B": "e2 [] p[2]", "C": "-"}
    assert ("rebalance", "g", "A") not in case.gc.timers()
    case.assert_rebuild_equals_live()

    # Step 8: B heartbeats and gets foo-2.
    result = case.heartbeat("B", owned=[])
    assert response_view(result) == ("NONE", 2, [2], [])
    assert record_names(result) == ["CurrentMemberAssignment(B)"]
    assert case.now() == Snapshot(2, 2, {"A": [0, 1], "B": [2]}, {"A": "e2 [0,1]", "B": "e2 [2]", "C": "-"}, "Stable")
    case.assert_rebuild_equals_live()

    # Steps 9, 10, 12: C joins, target {A:[0], B:[2], C:[1]}; C at epoch 3 waits for foo-1.
    result = case.join("C")
    assert record_names(result) == [
        "MemberMetadata(C)",
        "Metadata",
        "TargetAssignmentMember(A)",
        "TargetAssignmentMember(C)",
        "TargetAssignmentMetadata",
        "CurrentMemberAssignment(C)",
    ]
    step9, step10, step12_c = case.per_batch(result)
    assert step9 == Snapshot(3, 2, {"A": [0, 1], "B": [2]}, {"A": "e2 [0,1]", "B": "e2 [2]", "C": "e0 []"}, "Assigning")
    assert step10 == Snapshot(
        3, 3, {"A": [0], "B": [2], "C": [1]}, {"A": "e2 [0,1]", "B": "e2 [2]", "C": "e0 []"}, "Reconciling"
    )
    assert step12_c.members["C"] == "e3 [] p[1]"
    assert response_view(result) == ("NONE", 3, [], [1])
    case.assert_rebuild_equals_live()

    # Step 11: B has nothing to revoke and moves to epoch 3. (The KIP still shows C
    # at epoch 0 here; C already reconciled in its join heartbeat, as in Kafka.)
    result = case.heartbeat("B", owned=[2])
    assert response_view(result) == ("NONE", 3, None, None)
    assert record_names(result) == ["CurrentMemberAssignment(B)"]
    assert case.now().members == {"A": "e2 [0,1]", "B": "e3 [2]", "C": "e3 [] p[1]"}
    case.assert_rebuild_equals_live()

    # Step 12: C heartbeats; foo-1 is still held by A, nothing visible changes. As in
    # Kafka, the record is rewritten once so that previous_member_epoch catches up (0 -> 3).
    result = case.heartbeat("C", owned=[])
    assert response_view(result) == ("NONE", 3, None, None)
    assert record_names(result) == ["CurrentMemberAssignment(C)"]
    assert result.records[0].value.previous_member_epoch == 3
    assert case.heartbeat("C", owned=[]).records == []
    case.assert_rebuild_equals_live()

    # Step 13: A is told to revoke foo-1.
    result = case.heartbeat("A", owned=[0, 1])
    assert response_view(result) == ("NONE", 2, [0], [])
    assert case.now().members == {"A": "e2 [0] r[1]", "B": "e3 [2]", "C": "e3 [] p[1]"}
    case.assert_rebuild_equals_live()

    # Step 14: A acknowledges, moves to epoch 3, foo-1 is released.
    result = case.heartbeat("A", owned=[0])
    assert response_view(result) == ("NONE", 3, None, None)
    assert case.now().members == {"A": "e3 [0]", "B": "e3 [2]", "C": "e3 [] p[1]"}
    case.assert_rebuild_equals_live()

    # Step 15: C gets foo-1; everyone is at the group epoch.
    result = case.heartbeat("C", owned=[])
    assert response_view(result) == ("NONE", 3, [1], [])
    assert case.now() == Snapshot(
        3, 3, {"A": [0], "B": [2], "C": [1]}, {"A": "e3 [0]", "B": "e3 [2]", "C": "e3 [1]"}, "Stable"
    )
    case.assert_rebuild_equals_live()


def test_third_member_joins():
    """KIP-848, section "Third Member Joins" in "Case Studies"; Kafka ``GroupMetadataManager.consumerGroupHeartbeat``
    and ``CurrentAssignmentBuilder.computeNextAssignment``."""
    case = Case(partitions=6, start={"A": [0, 1, 2], "B": [3, 4, 5]}, epoch=21)
    # Step 0: the stable start, rebuilt from its records.
    assert case.now() == Snapshot(
        21, 21, {"A": [0, 1, 2], "B": [3, 4, 5]}, {"A": "e21 [0,1,2]", "B": "e21 [3,4,5]", "C": "-"}, "Stable"
    )

    # Steps 1-2: C joins, target {A:[0,1], B:[3,4], C:[2,5]}; C at 22 gets nothing yet.
    result = case.join("C")
    assert record_names(result) == [
        "MemberMetadata(C)",
        "Metadata",
        "TargetAssignmentMember(A)",
        "TargetAssignmentMember(B)",
        "TargetAssignmentMember(C)",
        "TargetAssignmentMetadata",
        "CurrentMemberAssignment(C)",
    ]
    joined, target, step2 = case.per_batch(result)
    assert (joined.group_epoch, joined.target_epoch, joined.state) == (22, 21, "Assigning")
    assert target.target == {"A": [0, 1], "B": [3, 4], "C": [2, 5]}
    assert step2 == Snapshot(
        22,
        22,
        {"A": [0, 1], "B": [3, 4], "C": [2, 5]},
        {"A": "e21 [0,1,2]", "B": "e21 [3,4,5]", "C": "e22 [] p[2,5]"},
        "Reconciling",
    )
    assert response_view(result) == ("NONE", 22, [], [2, 5])
    case.assert_rebuild_equals_live()

    # Step 3: A is told to revoke foo-2.
    assert response_view(case.heartbeat("A", owned=[0, 1, 2])) == ("NONE", 21, [0, 1], [])
    # Step 4: B is told to revoke foo-5.
    assert response_view(case.heartbeat("B", owned=[3, 4, 5])) == ("NONE", 21, [3, 4], [])
    assert case.now().members == {"A": "e21 [0,1] r[2]", "B": "e21 [3,4] r[5]", "C": "e22 [] p[2,5]"}
    case.assert_rebuild_equals_live()

    # Step 5: C heartbeats; nothing changes for it (no assignment in the response; the
    # record is rewritten once for previous_member_epoch, as in Kafka).
    result = case.heartbeat("C", owned=[])
    assert response_view(result) == ("NONE", 22, None, None)
    assert record_names(result) == ["CurrentMemberAssignment(C)"]

    # Step 6: A acknowledges, moves to 22; foo-2 is released.
    result = case.heartbeat("A", owned=[0, 1])
    assert response_view(result) == ("NONE", 22, None, None)
    assert record_names(result) == ["CurrentMemberAssignment(A)"]
    case.assert_rebuild_equals_live()

    # Step 7: C gets foo-2; foo-5 is still held by B.
    assert response_view(case.heartbeat("C", owned=[])) == ("NONE", 22, [2], [5])
    assert case.now().members == {"A": "e22 [0,1]", "B": "e21 [3,4] r[5]", "C": "e22 [2] p[5]"}

    # Step 8: B acknowledges, moves to 22; foo-5 is released.
    assert response_view(case.heartbeat("B", owned=[3, 4])) == ("NONE", 22, None, None)
    case.assert_rebuild_equals_live()

    # Step 9: C gets "foo-2 and foo-5" — the full usable set.
    assert response_view(case.heartbeat("C", owned=[2])) == ("NONE", 22, [2, 5], [])
    assert case.now() == Snapshot(
        22,
        22,
        {"A": [0, 1], "B": [3, 4], "C": [2, 5]},
        {"A": "e22 [0,1]", "B": "e22 [3,4]", "C": "e22 [2,5]"},
        "Stable",
    )
    case.assert_rebuild_equals_live()


@pytest.mark.parametrize("fidelity", ["kafka", "kip"])
def test_member_failure(fidelity):
    """KIP-848 "Member Failure" example. The profiles differ at step 1: Kafka's
    ``GroupMetadataManager.removeMember`` tombstones A's target entry with the removal, while the
    KIP's table still lists A in the target until the next target is computed (``kip``)."""
    kip = fidelity == "kip"
    case = Case(partitions=6, start={"A": [0, 1], "B": [3, 4], "C": [2, 5]}, epoch=22, fidelity=fidelity)
    assert case.now() == Snapshot(
        22,
        22,
        {"A": [0, 1], "B": [3, 4], "C": [2, 5]},
        {"A": "e22 [0,1]", "B": "e22 [3,4]", "C": "e22 [2,5]"},
        "Stable",
    )
    # B and C keep heartbeating every 5 s; A is silent. Its session was armed at load (t=0).
    for _ in range(8):
        assert case.gc.advance(5_000) == []
        case.heartbeat("B")
        case.heartbeat("C")
    assert case.gc.now_ms == 40_000
    assert case.gc.advance(4_999) == []  # nothing before the session timeout
    assert "A" in case.gc.groups["g"].members

    # Step 1: A's session expires at 45 s; A removed, GE 23.
    [expired] = case.gc.advance(1)
    assert case.gc.now_ms == 45_000
    assert expired.origin == "session timeout A"
    if kip:  # the target still lists A
        assert record_names(expired) == ["~CurrentMemberAssignment(A)", "~MemberMetadata(A)", "Metadata"]
        target = {"A": [0, 1], "B": [3, 4], "C": [2, 5]}
    else:
        assert record_names(expired) == [
            "~CurrentMemberAssignment(A)",
            "~TargetAssignmentMember(A)",
            "~MemberMetadata(A)",
            "Metadata",
        ]
        target = {"B": [3, 4], "C": [2, 5]}
    assert case.now() == Snapshot(23, 22, target, {"A": "-", "B": "e22 [3,4]", "C": "e22 [2,5]"}, "Assigning")
    case.assert_rebuild_equals_live()

    # Step 2: the new target {B:[3,4,0], C:[2,5,1]} (computed in B's heartbeat).
    result = case.heartbeat("B", owned=[3, 4])
    assert record_names(result) == [
        "TargetAssignmentMember(B)",
        "TargetAssignmentMember(C)",
        *(["~TargetAssignmentMember(A)"] if kip else []),
        "TargetAssignmentMetadata",
        "CurrentMemberAssignment(B)",
    ]
    step2, step3_b = case.per_batch(result)
    assert step2 == Snapshot(
        23, 23, {"B": [3, 4, 0], "C": [2, 5, 1]}, {"A": "-", "B": "e22 [3,4]", "C": "e22 [2,5]"}, "Reconciling"
    )
    # Step 3: B and C move to 23; foo-0 and foo-1 are free at once (no revocation).
    assert step3_b.members["B"] == "e23 [0,3,4]"
    assert response_view(result) == ("NONE", 23, [0, 3, 4], [])
    result = case.heartbeat("C", owned=[2, 5])
    assert response_view(result) == ("NONE", 23, [1, 2, 5], [])
    assert case.now() == Snapshot(
        23, 23, {"B": [3, 4, 0], "C": [2, 5, 1]}, {"A": "-", "B": "e23 [0,3,4]", "C": "e23 [1,2,5]"}, "Stable"
    )
    case.assert_rebuild_equals_live()


def test_partition_added():
    """KIP-848, section "Partition Added" in "Case Studies"; Kafka ``GroupMetadataManager.consumerGroupHeartbeat``
    (``hasMetadataExpired``) notices the new partition."""
    case = Case(partitions=1, start={"A": [0], "B": []}, epoch=22)
    case.members = ("A", "B")
    assert case.now() == Snapshot(22, 22, {"A": [0], "B": []}, {"A": "e22 [0]", "B": "e22 []"}, "Stable")

    # Steps 1-3: foo-1 is created; the coordinator notices it on the next heartbeat,
    # bumps the group epoch (step 1), computes {A:[0], B:[1]} (step 2), and A moves to 23.
    case.cluster.add_partitions("foo", 1)
    result = case.heartbeat("A")
    assert record_names(result) == [
        "PartitionMetadata",
        "Metadata",
        "TargetAssignmentMember(B)",
        "TargetAssignmentMetadata",
        "CurrentMemberAssignment(A)",
    ]
    step1, step2, step3_a = case.per_batch(result)
    assert step1 == Snapshot(23, 22, {"A": [0], "B": []}, {"A": "e22 [0]", "B": "e22 []"}, "Assigning")
    assert step2 == Snapshot(23, 23, {"A": [0], "B": [1]}, {"A": "e22 [0]", "B": "e22 []"}, "Reconciling")
    assert step3_a.members == {"A": "e23 [0]", "B": "e22 []"}
    assert response_view(result) == ("NONE", 23, None, None)  # A's partitions did not change
    case.assert_rebuild_equals_live()

    result = case.heartbeat("B")
    assert response_view(result) == ("NONE", 23, [1], [])
    assert case.now() == Snapshot(23, 23, {"A": [0], "B": [1]}, {"A": "e23 [0]", "B": "e23 [1]"}, "Stable")
    case.assert_rebuild_equals_live()
