"""KIP-848 client-side assignor mode: ShouldComputeAssignment, PrepareAssignment, InstallAssignment.

KIP-848, sections "Client Side Mode", "ConsumerGroupPrepareAssignment API" and
"ConsumerGroupInstallAssignment API"; the choices the KIP leaves open are docs/decisions.md D19-D21
(the computing member: highest maximum version of the selected assignor, then lowest member id;
a member that misses its deadline is skipped, not fenced). Kafka never shipped this mode.
"""

from __future__ import annotations

import pytest
from conftest import GROUP, Harness, record_kinds

from kip_lab.coordinator import GroupState
from kip_lab.protocol import (
    ClientAssignor,
    ConsumerGroupDescribeRequest,
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupPrepareAssignmentRequest,
    Errors,
    InstalledMemberAssignment,
)


def custom(maximum_version: int = 1, **fields) -> list[ClientAssignor]:
    return [ClientAssignor(name="custom", minimum_version=0, maximum_version=maximum_version, **fields)]


@pytest.fixture
def ch(make_harness) -> Harness:
    """A cluster with foo (4 partitions) and bar (2)."""
    return make_harness(topics=(("foo", 4), ("bar", 2)))


def join(h: Harness, member_id: str, names=("foo",), maximum_version: int = 1, **fields):
    result = h.join(member_id, names, client_assignors=custom(maximum_version), **fields)
    assert result.response.error_code == Errors.NONE, result.response
    return result


def prepare(h: Harness, member_id: str, member_epoch: int | None = None, group_id: str = GROUP):
    if member_epoch is None:
        member_epoch = h.member(member_id).member_epoch
    request = ConsumerGroupPrepareAssignmentRequest(group_id=group_id, member_id=member_id, member_epoch=member_epoch)
    return h.gc.consumer_group_prepare_assignment(request)


def install(
    h: Harness,
    member_id: str,
    group_epoch: int,
    assignment,
    member_epoch: int | None = None,
    group_id: str = GROUP,
):
    if member_epoch is None:
        member_epoch = h.member(member_id).member_epoch
    request = ConsumerGroupInstallAssignmentRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=member_epoch,
        group_epoch=group_epoch,
        members=[InstalledMemberAssignment(member_id=m, partitions=h.tps(a)) for m, a in assignment.items()],
    )
    return h.gc.consumer_group_install_assignment(request)


def two_members(h: Harness) -> None:
    """A joins first (and is chosen), then B: GE=2, no target yet (TE=0)."""
    a = join(h, "A")
    assert a.response.should_compute_assignment is True
    assert a.response.member_epoch == 0
    b = join(h, "B")
    assert b.response.should_compute_assignment is False
    assert (h.epoch(), h.group.assignment_epoch) == (2, 0)


HALVES = {"A": {"foo": [0, 1]}, "B": {"foo": [2, 3]}}


# ---------------------------------------------------------------------------------------
# Selection and notification
# ---------------------------------------------------------------------------------------
def test_join_selects_a_computing_member_and_no_server_side_target(ch):
    result = join(ch, "A")
    assert result.response.should_compute_assignment is True
    # The epoch bump is written, but no target: the group waits for an install.
    assert record_kinds(result) == [
        "ConsumerGroupMemberMetadataKey",
        "ConsumerGroupPartitionMetadataKey",
        "ConsumerGroupMetadataKey",
        "ConsumerGroupCurrentMemberAssignmentKey",
    ]
    assert ch.group.state is GroupState.ASSIGNING
    # The chosen member's deadline is its rebalance timeout, from the notification.
    assert ch.gc.timers()[("assignment", GROUP, "A")] == 30_000
    describe = ch.gc.consumer_group_describe(ConsumerGroupDescribeRequest(group_ids=[GROUP]))
    assert describe.response.groups[0].assignor_name == "custom"


@pytest.mark.parametrize("instance_id", [None, "i-b"], ids=["dynamic", "static"])
def test_member_waiting_for_the_first_target_can_heartbeat_without_bumping(ch, instance_id):
    """Before any install a member's epoch is 0, so epoch 0 is all it can send: not a new join."""
    join(ch, "A")
    join(ch, "B", instance_id=instance_id)
    before = ch.snapshot()
    for member_id in ("A", "B"):
        fields = {"instance_id": instance_id} if member_id == "B" and instance_id else {}
        result = join(ch, member_id, **fields)
        assert result.response.member_epoch == 0
        assert "ConsumerGroupMetadataKey" not in record_kinds(result)
    assert ch.epoch() == 2
    assert ch.snapshot()["groups"] == before["groups"]
    assert join(ch, "A").response.should_compute_assignment is True


def test_assignor_reason_or_metadata_change_bumps_once(ch):
    """T4b: a non-zero reason or new assignor metadata forces a new assignment."""
    two_members(ch)
    prepare(ch, "A")
    install(ch, "A", 2, HALVES)
    join(ch, "A")
    join(ch, "B")
    assert ch.group.state is GroupState.STABLE
    result = ch.heartbeat("B", 2, client_assignors=custom(reason=1))
    assert [r.value.epoch for r in result.records if type(r.key).__name__ == "ConsumerGroupMetadataKey"] == [3]
    assert ch.group.state is GroupState.ASSIGNING
    result = ch.heartbeat("B", 2, client_assignors=custom(reason=1, metadata_bytes=b"lag=3"))
    assert ch.epoch() == 4
    assert ch.heartbeat("B", 2, client_assignors=custom(reason=1, metadata_bytes=b"lag=3")).records == []
    assert ch.epoch() == 4  # the same metadata again is no change


def test_highest_maximum_version_then_lowest_member_id_is_chosen(ch):
    join(ch, "A", maximum_version=1)  # alone, so chosen for the first round
    join(ch, "C", maximum_version=3)
    join(ch, "B", maximum_version=3)
    assert prepare(ch, "A").response.group_epoch == 3
    # Install the round for epoch 3; then D joins and a new round chooses among A-D.
    assert install(ch, "A", 3, {"A": {"foo": [0, 1]}, "B": {"foo": [2]}, "C": {"foo": [3]}}).response.error_code == 0
    join(ch, "D", maximum_version=2)
    assert ch.epoch() == 4
    flags = {m: join_or_heartbeat(ch, m).response.should_compute_assignment for m in ("A", "B", "C", "D")}
    assert flags == {"A": False, "B": True, "C": False, "D": False}


def join_or_heartbeat(h: Harness, member_id: str):
    member = h.member(member_id)
    if member.member_epoch == 0:
        return join(h, member_id)
    return h.ack(member_id)


# ---------------------------------------------------------------------------------------
# PrepareAssignment
# ---------------------------------------------------------------------------------------
def test_prepare_returns_the_group_as_the_assignor_needs_it(ch):
    join(ch, "A", names=("foo", "bar"), rack_id="r1", instance_id="i-a")
    join(ch, "B", names=("foo",))
    result = prepare(ch, "A")
    response = result.response
    assert response.error_code == Errors.NONE
    assert result.records == []
    assert (response.group_epoch, response.assignor_name) == (2, "custom")
    foo, bar = ch.tid("foo"), ch.tid("bar")
    members = {m.member_id: m for m in response.members}
    assert list(members) == ["A", "B"]
    assert sorted(members["A"].subscribed_topic_ids) == sorted([foo, bar])
    assert members["B"].subscribed_topic_ids == [foo]
    assert (members["A"].instance_id, members["A"].rack_id, members["A"].member_epoch) == ("i-a", "r1", 0)
    assert members["A"].topic_partitions == []  # no target yet
    assert {(t.topic_id, t.topic_name, t.num_partitions) for t in response.topics} == {
        (foo, "foo", 4),
        (bar, "bar", 2),
    }


@pytest.mark.parametrize(
    ("group_id", "member_id", "member_epoch", "error", "mentions"),
    [
        ("", "A", 0, Errors.INVALID_REQUEST, "GroupId"),
        (GROUP, "", 0, Errors.INVALID_REQUEST, "MemberId"),
        (GROUP, "A", -1, Errors.INVALID_REQUEST, "MemberEpoch"),
        ("nope", "A", 0, Errors.GROUP_ID_NOT_FOUND, "nope"),
        (GROUP, "Z", 0, Errors.UNKNOWN_MEMBER_ID, "Z"),
        (GROUP, "A", 7, Errors.STALE_MEMBER_EPOCH, "7"),
        (GROUP, "B", 0, Errors.UNKNOWN_MEMBER_ID, "chosen"),
    ],
    ids=[
        "empty group",
        "empty member",
        "negative epoch",
        "unknown group",
        "unknown member",
        "stale epoch",
        "not chosen",
    ],
)
def test_prepare_errors(ch, group_id, member_id, member_epoch, error, mentions):
    two_members(ch)
    result = prepare(ch, member_id, member_epoch, group_id=group_id)
    assert result.response.error_code == error
    assert mentions in result.response.error_message
    assert result.response.members == []


# ---------------------------------------------------------------------------------------
# InstallAssignment
# ---------------------------------------------------------------------------------------
def test_install_sets_the_target_and_members_reconcile_to_it(ch):
    two_members(ch)
    assert prepare(ch, "A").response.group_epoch == 2
    result = install(ch, "A", 2, HALVES)
    assert result.response.error_code == Errors.NONE
    assert record_kinds(result) == [
        "ConsumerGroupTargetAssignmentMemberKey",
        "ConsumerGroupTargetAssignmentMemberKey",
        "ConsumerGroupTargetAssignmentMetadataKey",
    ]
    assert result.records[-1].value.assignment_epoch == 2
    assert (ch.epoch(), ch.group.assignment_epoch) == (2, 2)
    assert ch.target("A") == {"foo": [0, 1]} and ch.target("B") == {"foo": [2, 3]}
    assert ("assignment", GROUP, "A") not in ch.gc.timers()
    assert ch.group.state is GroupState.RECONCILING
    # Members reconcile on their next heartbeat (still at epoch 0, so they send 0).
    a = join(ch, "A")
    assert (a.response.member_epoch, ch.assigned(a), a.response.should_compute_assignment) == (
        2,
        {"foo": [0, 1]},
        False,
    )
    b = join(ch, "B")
    assert (b.response.member_epoch, ch.assigned(b)) == (2, {"foo": [2, 3]})
    assert ch.epoch() == 2
    assert ch.group.state is GroupState.STABLE
    ch.assert_replays()


@pytest.mark.parametrize(
    ("assignment", "mentions"),
    [
        ({"A": {"foo": [0, 1, 2]}, "B": {"foo": [2, 3]}}, "both"),
        ({"A": {"foo": [0, 1]}, "B": {"foo": [2]}}, "not assigned"),
        ({"A": {"foo": [0, 1]}, "B": {"foo": [2]}, "Z": {"foo": [3]}}, "Z"),
        ({"A": {"foo": [0, 1]}, "B": {"foo": [2, 3, 4]}}, "does not exist"),
        ({"A": {"foo": [0, 1], "bar": [0, 1]}, "B": {"foo": [2, 3]}}, "not subscribed"),
    ],
    ids=["partition twice", "partition missing", "unknown member", "unknown partition", "unsubscribed topic"],
)
def test_invalid_install_is_invalid_assignment_and_changes_nothing(ch, assignment, mentions):
    two_members(ch)
    prepare(ch, "A")
    before = ch.snapshot()
    result = install(ch, "A", 2, assignment)
    assert result.response.error_code == Errors.INVALID_ASSIGNMENT
    assert mentions in result.response.error_message
    assert result.records == []
    assert ch.snapshot() == before
    # The chosen member may still install a valid one.
    assert install(ch, "A", 2, HALVES).response.error_code == Errors.NONE


def test_install_without_prepare_is_invalid_assignment(ch):
    two_members(ch)
    result = install(ch, "A", 2, HALVES)
    assert result.response.error_code == Errors.INVALID_ASSIGNMENT
    assert "Prepare" in result.response.error_message
    prepare(ch, "A")
    assert install(ch, "A", 1, HALVES).response.error_code == Errors.INVALID_ASSIGNMENT  # not the prepared epoch


@pytest.mark.parametrize(
    ("group_id", "member_id", "member_epoch", "error"),
    [
        ("", "A", 0, Errors.INVALID_REQUEST),
        (GROUP, "", 0, Errors.INVALID_REQUEST),
        (GROUP, "A", -1, Errors.INVALID_REQUEST),
        ("nope", "A", 0, Errors.GROUP_ID_NOT_FOUND),
        (GROUP, "Z", 0, Errors.UNKNOWN_MEMBER_ID),
        (GROUP, "A", 3, Errors.STALE_MEMBER_EPOCH),
        (GROUP, "B", 0, Errors.UNKNOWN_MEMBER_ID),
    ],
    ids=[
        "empty group",
        "empty member",
        "negative epoch",
        "unknown group",
        "unknown member",
        "stale epoch",
        "not chosen",
    ],
)
def test_install_errors(ch, group_id, member_id, member_epoch, error):
    two_members(ch)
    prepare(ch, "A")
    before = ch.snapshot()
    result = install(ch, member_id, 2, HALVES, member_epoch=member_epoch, group_id=group_id)
    assert result.response.error_code == error
    assert result.response.error_message
    assert result.records == []
    assert ch.snapshot() == before


def test_install_for_an_older_epoch_is_installed_and_starts_a_new_round(ch):
    two_members(ch)
    assert prepare(ch, "A").response.group_epoch == 2
    join(ch, "C")  # the group moves on while A computes
    assert ch.epoch() == 3
    result = install(ch, "A", 2, HALVES)
    assert result.response.error_code == Errors.NONE
    assert result.records[-1].value.assignment_epoch == 2
    assert (ch.epoch(), ch.group.assignment_epoch) == (3, 2)
    assert ch.group.state is GroupState.ASSIGNING
    # A new computation starts at once: A (lowest id, same version) is asked again.
    a = join(ch, "A")
    assert a.response.should_compute_assignment is True
    assert (a.response.member_epoch, ch.assigned(a)) == (2, {"foo": [0, 1]})
    assert ch.gc.timers()[("assignment", GROUP, "A")] == 30_000
    assert prepare(ch, "A").response.group_epoch == 3
    second = install(ch, "A", 3, {"A": {"foo": [0, 1]}, "B": {"foo": [2]}, "C": {"foo": [3]}})
    assert second.response.error_code == Errors.NONE
    assert (ch.epoch(), ch.group.assignment_epoch) == (3, 3)
    for _ in range(3):
        for m in ("A", "B", "C"):
            join_or_heartbeat(ch, m)
    assert {m: ch.owns(m) for m in "ABC"} == {"A": {"foo": [0, 1]}, "B": {"foo": [2]}, "C": {"foo": [3]}}
    assert ch.group.state is GroupState.STABLE
    ch.assert_replays()


def test_chosen_member_missing_its_deadline_is_replaced_not_fenced(ch):
    two_members(ch)
    assert ch.gc.timers()[("assignment", GROUP, "A")] == 30_000
    fired = ch.gc.advance(30_000)
    assert [r.records for r in fired] == [[]]  # nothing written: no fencing
    assert set(ch.group.members) == {"A", "B"}
    assert ch.epoch() == 2
    assert join(ch, "B").response.should_compute_assignment is True
    assert join(ch, "A").response.should_compute_assignment is False
    assert prepare(ch, "A").response.error_code == Errors.UNKNOWN_MEMBER_ID
    assert prepare(ch, "B").response.error_code == Errors.NONE
    assert install(ch, "B", 2, HALVES).response.error_code == Errors.NONE
    assert ch.group.assignment_epoch == 2


def test_chosen_member_leaving_hands_the_round_to_another(ch):
    two_members(ch)
    left = ch.heartbeat("A", -1)
    assert left.response.error_code == Errors.NONE
    assert ("assignment", GROUP, "A") not in ch.gc.timers()
    assert join(ch, "B").response.should_compute_assignment is True


def test_member_without_a_common_client_assignor_is_unsupported_assignor(ch):
    two_members(ch)
    before = ch.snapshot()
    result = ch.join("C", client_assignors=[ClientAssignor(name="other", minimum_version=0, maximum_version=1)])
    assert result.response.error_code == Errors.UNSUPPORTED_ASSIGNOR
    assert result.records == []
    assert ch.snapshot() == before
    server_side = ch.join("D", server_assignor="range")
    assert server_side.response.error_code == Errors.UNSUPPORTED_ASSIGNOR
    assert "D" not in ch.group.members
