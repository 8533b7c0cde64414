"""The KIP's notation for records and responses (``kip_lab.coordinator.view``)."""

from __future__ import annotations

from golden_support import Case

from kip_lab.coordinator.view import describe_record, describe_response


def test_describe_response_and_records_of_a_join_and_a_revocation():
    case = Case(partitions=3)
    join = case.join("A")
    assert describe_response(join.response) == "NONE, member epoch 1, use [0, 1, 2], pending []"
    assert [describe_record(r) for r in join.records][-1] == (
        "CurrentMemberAssignment(A): member_epoch=1, previous_member_epoch=0, topic_partitions=[0, 1, 2]"
    )
    assert describe_record(join.records[0], case.cluster).startswith("MemberMetadata(A): group_epoch=1")
    case.join("B")
    revoke = case.heartbeat("A", owned=[0, 1, 2])
    assert describe_response(revoke.response) == "NONE, member epoch 1, use [0, 1], pending []"
    assert describe_record(revoke.records[0], case.cluster).endswith("partitions_pending_revocation={'foo': [2]}")
    plain = case.heartbeat("A", owned=[0, 1])
    assert describe_response(plain.response) == "NONE, member epoch 2, no assignment"
