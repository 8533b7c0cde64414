"""KIP-848 group coordinator: one test per rule of `docs/rules.md`.

Rule ids (T1-T9, RC1-RC13, SM1-SM4, F1-F4, R1-R3) refer to
``docs/rules.md``, which quotes the KIP sentence each stands for. Where the KIP is silent the expected values
are Apache Kafka's ``GroupMetadataManager`` behaviour.
"""

from __future__ import annotations

import pytest
from conftest import GROUP, Harness, batch_kinds, record_kinds, tombstones
from pydantic import ValidationError

from kip_lab.assignors import PartitionAssignorError, RangeAssignor, UniformAssignor
from kip_lab.coordinator import ConsumerGroup, CoordinatorConfig, GroupCoordinator, GroupState, MemberState
from kip_lab.protocol import (
    ClientAssignor,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    Errors,
    TopicPartitions,
)

CUSTOM = ClientAssignor(name="custom", minimum_version=0, maximum_version=1)
SESSION_MS = 45_000

MEMBER_METADATA = "ConsumerGroupMemberMetadataKey"
PARTITION_METADATA = "ConsumerGroupPartitionMetadataKey"
GROUP_METADATA = "ConsumerGroupMetadataKey"
TARGET_MEMBER = "ConsumerGroupTargetAssignmentMemberKey"
TARGET_METADATA = "ConsumerGroupTargetAssignmentMetadataKey"
CURRENT_ASSIGNMENT = "ConsumerGroupCurrentMemberAssignmentKey"


def stable_ab(h: Harness, names_a=("foo",), names_b=("foo",), **join_a) -> None:
    """A and B, both reconciled: with foo alone, A has foo-0..2 and B foo-3..5."""
    assert h.join("A", names_a, **join_a).response.error_code == Errors.NONE
    assert h.join("B", names_b).response.error_code == Errors.NONE
    h.settle()


def group_epoch_records(result) -> list[int]:
    return [r.value.epoch for r in result.records if type(r.key).__name__ == GROUP_METADATA]


# ---------------------------------------------------------------------------------------
# request validation (KIP-848 *Consumer Group Heartbeat API → Request Validation*)
# ---------------------------------------------------------------------------------------
JOIN = {"member_epoch": 0, "rebalance_timeout_ms": 30_000, "subscribed_topic_names": ["foo"]}

INVALID_HEARTBEATS = {
    "empty group id": ({**JOIN, "group_id": ""}, "GroupId"),
    "empty member id, epoch > 0": ({"member_epoch": 3}, "MemberId"),
    "empty member id, epoch -1": ({"member_epoch": -1}, "MemberId"),
    "empty member id, epoch -2": ({"member_epoch": -2, "instance_id": "i"}, "MemberId"),
    "empty instance id": ({**JOIN, "instance_id": ""}, "InstanceId"),
    "empty rack id": ({**JOIN, "rack_id": ""}, "RackId"),
    "epoch below -2": ({"member_id": "A", "member_epoch": -3}, "MemberEpoch"),
    "join without rebalance timeout": ({**JOIN, "rebalance_timeout_ms": -1}, "RebalanceTimeoutMs"),
    "join with zero rebalance timeout": ({**JOIN, "rebalance_timeout_ms": 0}, "RebalanceTimeoutMs"),
    "join with owned partitions": (
        {**JOIN, "topic_partitions": [TopicPartitions(topic_id="x" * 22, partitions=[0])]},
        "TopicPartitions",
    ),
    "join without subscription": ({**JOIN, "subscribed_topic_names": None}, "SubscribedTopicNames"),
    "join with empty names": ({**JOIN, "subscribed_topic_names": []}, "SubscribedTopicNames"),
    "static leave without instance id": ({"member_id": "A", "member_epoch": -2}, "InstanceId"),
    "names and regex together": ({**JOIN, "subscribed_topic_regex": "foo.*"}, "SubscribedTopicRegex"),
    "backreference regex": (
        {**JOIN, "subscribed_topic_names": None, "subscribed_topic_regex": r"(a)\1"},
        "SubscribedTopicRegex",
    ),
    "lookahead regex": (
        {**JOIN, "subscribed_topic_names": None, "subscribed_topic_regex": "(?=x)foo"},
        "SubscribedTopicRegex",
    ),
    "server and client assignors": (
        {**JOIN, "server_assignor": "range", "client_assignors": [CUSTOM]},
        "ServerAssignor",
    ),
    "client assignor without name": ({**JOIN, "client_assignors": [ClientAssignor(name="")]}, "name"),
    "client assignor minimum < -1": (
        {**JOIN, "client_assignors": [ClientAssignor(name="c", minimum_version=-2, metadata_version=0)]},
        "MinimumVersion",
    ),
    "client assignor maximum < 0": (
        {
            **JOIN,
            "client_assignors": [ClientAssignor(name="c", minimum_version=-1, maximum_version=-1, metadata_version=-1)],
        },
        "MaximumVersion",
    ),
    "client assignor maximum < minimum": (
        {
            **JOIN,
            "client_assignors": [ClientAssignor(name="c", minimum_version=3, maximum_version=2, metadata_version=2)],
        },
        "MaximumVersion",
    ),
    "client assignor metadata version out of range": (
        {
            **JOIN,
            "client_assignors": [ClientAssignor(name="c", minimum_version=0, maximum_version=1, metadata_version=2)],
        },
        "MetadataVersion",
    ),
}


@pytest.mark.parametrize(("fields", "mentions"), INVALID_HEARTBEATS.values(), ids=INVALID_HEARTBEATS.keys())
def test_invalid_heartbeat_is_invalid_request_and_changes_nothing(h, fields, mentions):
    stable_ab(h)
    before, log_end, timers = h.snapshot(), h.gc.log.end_offset, h.gc.timers()
    request = ConsumerGroupHeartbeatRequest(**{"group_id": GROUP, **fields})
    result = h.gc.consumer_group_heartbeat(request)
    assert result.response.error_code == Errors.INVALID_REQUEST
    assert mentions in (result.response.error_message or "")
    assert result.response.member_id is None
    assert result.records == []
    assert h.gc.log.end_offset == log_end
    assert h.snapshot() == before
    assert h.gc.timers() == timers


def test_unknown_server_assignor_is_unsupported_assignor(h):
    stable_ab(h)
    before = h.snapshot()
    result = h.join("C", server_assignor="sticky")
    assert result.response.error_code == Errors.UNSUPPORTED_ASSIGNOR
    assert "sticky" in result.response.error_message
    assert "uniform" in result.response.error_message  # lists the supported ones, as Kafka does
    assert result.records == []
    assert h.snapshot() == before
    assert "C" not in h.group.members


def test_names_then_regex_on_a_later_heartbeat_is_invalid_request(h):
    """The member's merged subscription may not hold names and a regex together."""
    stable_ab(h)
    before = h.snapshot()
    result = h.heartbeat("A", h.member("A").member_epoch, subscribed_topic_regex="ba.*")
    assert result.response.error_code == Errors.INVALID_REQUEST
    assert "SubscribedTopicRegex" in result.response.error_message
    assert result.records == []
    assert h.snapshot() == before


def test_config_rejects_session_timeout_out_of_bounds():
    with pytest.raises(ValidationError) as exc:
        CoordinatorConfig(session_timeout_ms=10)
    assert "session_timeout_ms" in str(exc.value)


# ---------------------------------------------------------------------------------------
# Join (T1, J1, C2, RC1, W1/W3/W4)
# ---------------------------------------------------------------------------------------
def test_join_generates_a_deterministic_member_id(make_harness):
    ids = []
    for _ in range(2):
        h = make_harness(seed=0)
        response = h.join("").response
        assert response.error_code == Errors.NONE
        assert response.member_id and response.member_id in h.group.members
        ids.append(response.member_id)
    assert ids[0] == ids[1]
    assert make_harness(seed=1).join("").response.member_id != ids[0]
    # Two joins on one coordinator get two distinct ids.
    h = make_harness(seed=0)
    assert h.join("").response.member_id != h.join("").response.member_id


def test_join_accepts_a_client_provided_member_id_and_answers_member_id_only_on_join(h):
    joined = h.join("consumer-1-uuid").response
    assert joined.member_id == "consumer-1-uuid"
    assert set(h.group.members) == {"consumer-1-uuid"}
    steady = h.heartbeat("consumer-1-uuid", joined.member_epoch).response
    assert steady.error_code == Errors.NONE
    assert steady.member_id is None
    assert steady.member_epoch == joined.member_epoch


def test_first_join_bumps_computes_and_reconciles_in_three_batches(h):
    result = h.join("A", rebalance_timeout_ms=12_345, client_id="cid", client_host="/10.0.0.1")
    response = result.response
    assert batch_kinds(result) == [
        [MEMBER_METADATA, PARTITION_METADATA, GROUP_METADATA],
        [TARGET_MEMBER, TARGET_METADATA],
        [CURRENT_ASSIGNMENT],
    ]
    member_metadata = result.records[0].value
    assert (member_metadata.client_id, member_metadata.client_host) == ("cid", "/10.0.0.1")
    assert member_metadata.subscribed_topic_names == ["foo"]
    assert member_metadata.rebalance_timeout_ms == 12_345
    assert result.records[1].value.topics[0].num_partitions == 6
    assert group_epoch_records(result) == [1]
    assert result.records[4].value.assignment_epoch == 1
    assert result.records[5].value.member_epoch == 1
    assert (response.member_epoch, response.heartbeat_interval_ms) == (1, 5_000)
    assert h.assigned(result) == {"foo": [0, 1, 2, 3, 4, 5]}
    assert h.pending(result) == {}
    assert (h.group.group_epoch, h.group.assignment_epoch, h.group.state) == (1, 1, GroupState.STABLE)
    assert h.gc.timers() == {("session", GROUP, "A"): SESSION_MS}
    h.assert_replays()


def test_second_join_gets_pending_partitions_until_released(h):
    """RC2: the joiner jumps to TE; partitions still held by A are pending, not usable."""
    h.join("A")
    result = h.join("B")
    assert group_epoch_records(result) == [2]
    assert result.response.member_epoch == 2
    assert h.assigned(result) == {}
    assert h.pending(result) == {"foo": [3, 4, 5]}
    assert h.member("B").state is MemberState.UNRELEASED_PARTITIONS
    assert h.group.state is GroupState.RECONCILING
    h.assert_replays()


# ---------------------------------------------------------------------------------------
# Group epoch triggers: exactly +1 each
# ---------------------------------------------------------------------------------------
def test_t1_join_bumps_once(h):
    stable_ab(h)
    before = h.epoch()
    result = h.join("C")
    assert group_epoch_records(result) == [before + 1]
    assert h.epoch() == h.group.assignment_epoch == before + 1
    h.assert_replays()


def test_t2_leave_bumps_once_and_frees_partitions_without_revocation(h):
    stable_ab(h)
    before = h.epoch()
    a_had = h.owns("A")
    result = h.heartbeat("A", -1)
    assert result.response.error_code == Errors.NONE
    assert result.response.member_epoch == -1
    assert result.response.assignment is None
    assert batch_kinds(result) == [[CURRENT_ASSIGNMENT, MEMBER_METADATA, GROUP_METADATA]]
    assert tombstones(result) == [(CURRENT_ASSIGNMENT, "A"), (MEMBER_METADATA, "A")]
    assert group_epoch_records(result) == [before + 1]
    assert "A" not in h.group.members
    assert ("session", GROUP, "A") not in h.gc.timers()
    # Accepted reading: the removed member's target entry stays until the next computation.
    assert h.target("A") == a_had
    assert h.group.state is GroupState.ASSIGNING

    # RC7: B's next heartbeat computes the new target; A's partitions are free at once.
    b = h.heartbeat("B", h.member("B").member_epoch)
    assert (TARGET_MEMBER, "A") in tombstones(b)
    assert b.response.member_epoch == before + 1
    assert h.assigned(b) == {"foo": [0, 1, 2, 3, 4, 5]}
    assert h.pending(b) == {}
    assert h.group.state is GroupState.STABLE
    assert h.epoch() == before + 1  # the recomputation itself does not bump
    h.assert_replays()


def test_t3_session_timeout_removes_the_member_and_bumps_once(h):
    stable_ab(h)
    before = h.epoch()
    h.gc.advance(SESSION_MS - 5_000)
    h.heartbeat("B", h.member("B").member_epoch)
    assert h.gc.advance(4_999) == []
    assert "A" in h.group.members
    fired = h.gc.advance(1)
    assert len(fired) == 1
    assert fired[0].origin == "session timeout A"
    assert tombstones(fired[0]) == [(CURRENT_ASSIGNMENT, "A"), (MEMBER_METADATA, "A")]
    assert group_epoch_records(fired[0]) == [before + 1]
    assert set(h.group.members) == {"B"}
    assert h.gc.timers() == {("session", GROUP, "B"): 2 * SESSION_MS - 5_000}
    b = h.heartbeat("B", h.member("B").member_epoch)
    assert h.assigned(b) == {"foo": [0, 1, 2, 3, 4, 5]}
    h.assert_replays()


@pytest.mark.parametrize(
    ("change", "expected_target_topics"),
    [
        ({"subscribed_topic_names": ["foo", "bar"]}, {"foo", "bar"}),
        ({"server_assignor": "range"}, {"foo"}),
    ],
    ids=["names", "server assignor"],
)
def test_t4_subscription_change_bumps_once(h, change, expected_target_topics):
    stable_ab(h)
    before = h.epoch()
    result = h.heartbeat("A", h.member("A").member_epoch, **change)
    assert result.response.error_code == Errors.NONE
    assert batch_kinds(result)[0][0] == MEMBER_METADATA
    assert batch_kinds(result)[0][-1] == GROUP_METADATA
    assert group_epoch_records(result) == [before + 1]
    assert h.epoch() == h.group.assignment_epoch == before + 1
    assert set(h.target("A")) | set(h.target("B")) == expected_target_topics
    h.assert_replays()


def test_t4_regex_change_bumps_once(h):
    h.join("R", None, subscribed_topic_regex="fo.*")
    h.settle()
    assert h.target("R") == {"foo": [0, 1, 2, 3, 4, 5]}
    before = h.epoch()
    result = h.heartbeat("R", h.member("R").member_epoch, subscribed_topic_regex="ba.*")
    assert group_epoch_records(result) == [before + 1]
    assert [type(r.key).__name__ for r in result.batches[0]] == [
        MEMBER_METADATA,
        PARTITION_METADATA,
        GROUP_METADATA,
    ]
    assert h.target("R") == {"bar": [0, 1, 2]}
    assert h.assigned(result) == {}  # revoke foo first (RC3)
    h.assert_replays()


def test_t4_client_assignors_change_bumps_once_and_switches_to_client_side_mode(h):
    h.join("A")
    before = h.epoch()
    result = h.heartbeat("A", 1, client_assignors=[CUSTOM])
    assert group_epoch_records(result) == [before + 1]
    assert h.group.assignment_epoch == before  # no server-side computation any more
    assert h.group.state is GroupState.ASSIGNING
    assert result.response.should_compute_assignment is True
    h.assert_replays()


def test_t5_partition_count_change_bumps_once_on_next_heartbeat(h):
    stable_ab(h)
    before = h.epoch()
    h.cluster.add_partitions("foo", 2)
    assert h.epoch() == before  # detected on the next request, not by the cluster change itself
    result = h.heartbeat("A", h.member("A").member_epoch)
    assert batch_kinds(result)[0] == [PARTITION_METADATA, GROUP_METADATA]
    assert result.records[0].value.topics[0].num_partitions == 8
    assert group_epoch_records(result) == [before + 1]
    assert h.group.assignment_epoch == before + 1
    assert sorted(h.target("A")["foo"] + h.target("B")["foo"]) == list(range(8))
    h.settle()
    assert h.epoch() == before + 1
    h.assert_replays()


def test_t5_created_topic_matching_subscribed_name_bumps_once(h):
    h.join("A", ["foo", "baz"])
    assert h.target("A") == {"foo": [0, 1, 2, 3, 4, 5]}
    before = h.epoch()
    h.cluster.create_topic("baz", 2)
    result = h.heartbeat("A", 1)
    assert group_epoch_records(result) == [before + 1]
    assert h.target("A") == {"baz": [0, 1], "foo": [0, 1, 2, 3, 4, 5]}
    assert h.assigned(result) == {"baz": [0, 1], "foo": [0, 1, 2, 3, 4, 5]}
    h.assert_replays()


def test_t6_created_topic_matching_regex_bumps_once(h):
    h.join("R", None, subscribed_topic_regex="foo.*")
    assert h.target("R") == {"foo": [0, 1, 2, 3, 4, 5]}
    before = h.epoch()
    h.cluster.create_topic("foo2", 2)
    h.cluster.create_topic("other", 2)
    result = h.heartbeat("R", 1)
    assert group_epoch_records(result) == [before + 1]
    assert MEMBER_METADATA not in record_kinds(result)  # the member did not change
    assert h.target("R") == {"foo": [0, 1, 2, 3, 4, 5], "foo2": [0, 1]}
    assert h.assigned(result) == {"foo": [0, 1, 2, 3, 4, 5], "foo2": [0, 1]}
    h.assert_replays()


def test_topic_deletion_bumps_once_and_revokes_its_partitions(h):
    h.join("A", ["foo", "bar"])
    before = h.epoch()
    h.cluster.delete_topic("bar")
    result = h.heartbeat("A", 1)
    assert group_epoch_records(result) == [before + 1]
    assert h.target("A") == {"foo": [0, 1, 2, 3, 4, 5]}
    assert h.assigned(result) == {"foo": [0, 1, 2, 3, 4, 5]}  # bar left out: revoke it
    assert result.response.member_epoch == before  # still revoking (RC3)
    assert h.member("A").state is MemberState.UNREVOKED_PARTITIONS
    h.settle()
    assert h.member("A").member_epoch == before + 1
    h.assert_replays()


def test_topic_recreation_revokes_old_id_then_assigns_new_id(h):
    h.join("A")
    old_id = h.tid("foo")
    before = h.epoch()
    new_id = h.cluster.recreate_topic("foo")
    assert new_id != old_id
    first = h.heartbeat("A", 1)
    assert group_epoch_records(first) == [before + 1]
    assert first.response.member_epoch == before
    assert first.response.assignment.assigned_topic_partitions == []  # old id revoked, nothing new yet
    assert first.response.assignment.pending_topic_partitions == []
    assert h.member("A").pending_revocation == {old_id: frozenset(range(6))}
    second = h.heartbeat("A", before, topic_partitions=[])
    assert second.response.member_epoch == before + 1
    assert second.response.assignment.assigned_topic_partitions == [
        TopicPartitions(topic_id=new_id, partitions=[0, 1, 2, 3, 4, 5])
    ]
    h.assert_replays()


def test_t8_fenced_member_is_removed_and_bumps_once(h):
    stable_ab(h)
    before = h.epoch()
    result = h.heartbeat("A", before + 5)
    assert result.response.error_code == Errors.FENCED_MEMBER_EPOCH
    assert group_epoch_records(result) == [before + 1]
    assert "A" not in h.group.members
    h.heartbeat("B", h.member("B").member_epoch)
    h.assert_replays()


def test_t9_static_member_not_back_within_session_timeout_is_removed_and_bumps_once(h):
    h.join("A", instance_id="i-a")
    h.join("B")
    h.settle()
    before = h.epoch()
    h.gc.advance(1_000)
    h.heartbeat("B", h.member("B").member_epoch)
    left = h.heartbeat("A", -2, instance_id="i-a")
    assert left.response.member_epoch == -2
    assert h.epoch() == before
    fired = h.gc.advance(SESSION_MS - 1_000)  # A's session runs from its last heartbeat (t=0)
    assert [r.origin for r in fired] == ["session timeout A"]
    assert group_epoch_records(fired[0]) == [before + 1]
    assert "A" not in h.group.members and h.group.static_member("i-a") is None
    b = h.heartbeat("B", h.member("B").member_epoch)
    assert h.assigned(b) == {"foo": [0, 1, 2, 3, 4, 5]}
    h.assert_replays()


# ---------------------------------------------------------------------------------------
# Not triggers and Kafka's rack / rebalance timeout handling
# ---------------------------------------------------------------------------------------
def test_plain_heartbeat_writes_nothing_and_answers_no_assignment(h):
    stable_ab(h)
    before, log_end = h.snapshot(), h.gc.log.end_offset
    result = h.heartbeat("A", h.member("A").member_epoch)
    assert result.response.error_code == Errors.NONE
    assert result.records == []
    assert result.response.assignment is None  # RC9: converged, nothing changed
    assert h.gc.log.end_offset == log_end
    assert h.snapshot() == before


def test_full_heartbeat_always_carries_the_assignment(h):
    stable_ab(h)
    epoch = h.member("A").member_epoch
    result = h.heartbeat(
        "A",
        epoch,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=["foo"],
        topic_partitions=h.tps(h.owns("A")),
    )
    assert result.records == []
    assert h.assigned(result) == {"foo": [0, 1, 2]}


def test_reconciliation_steps_never_bump(h):
    h.join("A")
    h.join("B")
    epoch = h.epoch()
    log_end = h.gc.log.end_offset
    h.settle()
    written = [entry.record for entry in h.gc.log.entries(log_end)]
    assert written and {type(r.key).__name__ for r in written} == {CURRENT_ASSIGNMENT}
    assert h.epoch() == epoch


@pytest.mark.parametrize(
    ("change", "field", "value"),
    [
        ({"rack_id": "rack-2"}, "rack_id", "rack-2"),
        ({"rebalance_timeout_ms": 99_000}, "rebalance_timeout_ms", 99_000),
    ],
    ids=["rack id", "rebalance timeout"],
)
def test_rack_or_rebalance_timeout_change_writes_member_record_without_bump(h, change, field, value):
    """Kafka: the member record is rewritten, but only a subscription change bumps the epoch."""
    stable_ab(h)
    before = h.epoch()
    result = h.heartbeat("A", h.member("A").member_epoch, **change)
    assert result.response.error_code == Errors.NONE
    assert record_kinds(result) == [MEMBER_METADATA]
    assert getattr(result.records[0].value, field) == value
    assert getattr(h.member("A"), field) == value
    assert h.epoch() == before
    h.assert_replays()


# ---------------------------------------------------------------------------------------
# Fencing (F1, F2, F4 / RC13)
# ---------------------------------------------------------------------------------------
def test_unknown_member_is_unknown_member_id(h):
    stable_ab(h)
    before = h.snapshot()
    result = h.heartbeat("Z", h.epoch())
    assert result.response.error_code == Errors.UNKNOWN_MEMBER_ID
    assert "Z" in result.response.error_message
    assert result.records == []
    assert h.snapshot() == before


@pytest.mark.parametrize("epoch", [1, -1])
def test_unknown_group_is_unknown_member_id_and_creates_nothing(h, epoch):
    result = h.heartbeat("A", epoch, group_id="nope")
    assert result.response.error_code == Errors.UNKNOWN_MEMBER_ID
    assert result.records == []
    assert "nope" not in h.gc.groups


@pytest.mark.parametrize(("delta", "word"), [(+1, "greater"), (-1, "smaller")], ids=["ahead", "behind"])
def test_wrong_epoch_is_fenced_and_removes_the_member(h, delta, word):
    stable_ab(h)
    h.join("C")
    h.settle()
    before = h.epoch()
    epoch, previous = h.member("A").member_epoch, h.member("A").previous_member_epoch
    assert (epoch, previous) == (3, 2)
    # Behind: an epoch that is neither the current nor the previous one.
    sent = epoch + 1 if delta > 0 else previous - 1
    result = h.heartbeat("A", sent)
    assert result.response.error_code == Errors.FENCED_MEMBER_EPOCH
    assert word in result.response.error_message
    assert result.response.member_epoch == sent
    assert batch_kinds(result) == [[CURRENT_ASSIGNMENT, MEMBER_METADATA, GROUP_METADATA]]
    assert tombstones(result) == [(CURRENT_ASSIGNMENT, "A"), (MEMBER_METADATA, "A")]
    assert group_epoch_records(result) == [before + 1]
    assert "A" not in h.group.members
    assert all(key[2] != "A" for key in h.gc.timers())
    h.settle()
    h.assert_replays()


def lost_response_setup(h: Harness) -> None:
    """A moves from epoch 1 to 2 after revoking foo-3..5; the response with epoch 2 is 'lost'."""
    h.join("A")
    h.join("B")
    revoke = h.heartbeat("A", 1)
    assert h.assigned(revoke) == {"foo": [0, 1, 2]}
    acked = h.heartbeat("A", 1, topic_partitions=h.tps({"foo": [0, 1, 2]}))
    assert acked.response.member_epoch == 2
    assert (h.member("A").member_epoch, h.member("A").previous_member_epoch) == (2, 1)


def test_previous_epoch_with_owned_subset_is_accepted(h):
    lost_response_setup(h)
    before = h.epoch()
    result = h.heartbeat("A", 1, topic_partitions=h.tps({"foo": [0, 1]}))
    assert result.response.error_code == Errors.NONE
    assert result.response.member_epoch == 2
    assert "A" in h.group.members
    assert h.epoch() == before


def test_previous_epoch_with_owned_not_subset_is_fenced(h):
    lost_response_setup(h)
    result = h.heartbeat("A", 1, topic_partitions=h.tps({"foo": [0, 1, 2, 3]}))
    assert result.response.error_code == Errors.FENCED_MEMBER_EPOCH
    assert "A" not in h.group.members


def test_previous_epoch_without_owned_partitions_is_fenced(h):
    lost_response_setup(h)
    assert h.heartbeat("A", 1).response.error_code == Errors.FENCED_MEMBER_EPOCH


def test_previous_epoch_is_fenced_when_the_grace_is_switched_off(make_harness):
    h = make_harness(CoordinatorConfig(accept_previous_epoch=False))
    lost_response_setup(h)
    result = h.heartbeat("A", 1, topic_partitions=h.tps({"foo": [0, 1, 2]}))
    assert result.response.error_code == Errors.FENCED_MEMBER_EPOCH
    assert "A" not in h.group.members


# ---------------------------------------------------------------------------------------
# Static membership (SM1-SM4)
# ---------------------------------------------------------------------------------------
def static_group(h: Harness) -> None:
    h.join("A", instance_id="i-a")
    h.join("B")
    h.settle()
    assert h.owns("A") == {"foo": [0, 1, 2]}


def test_static_temporary_leave_keeps_the_assignment(h):
    static_group(h)
    before = h.epoch()
    result = h.heartbeat("A", -2, instance_id="i-a")
    assert result.response.error_code == Errors.NONE
    assert result.response.member_epoch == -2
    assert record_kinds(result) == [CURRENT_ASSIGNMENT]
    value = result.records[0].value
    assert value.member_epoch == -2
    assert value.topic_partitions == h.tps({"foo": [0, 1, 2]})
    assert h.epoch() == before
    assert h.member("A").member_epoch == -2
    assert h.group.partition_held(h.tid("foo"), 0)  # still A's: nobody else may get it
    assert h.group.state is GroupState.RECONCILING
    h.assert_replays()


def test_static_rejoin_while_old_member_alive_is_unreleased_instance_id(h):
    static_group(h)
    before = h.snapshot()
    result = h.join("A2", instance_id="i-a")
    assert result.response.error_code == Errors.UNRELEASED_INSTANCE_ID
    assert "i-a" in result.response.error_message
    assert result.records == []
    assert h.snapshot() == before


def test_static_replacement_inherits_the_assignment_without_bump(h):
    static_group(h)
    before = h.epoch()
    h.heartbeat("A", -2, instance_id="i-a")
    h.gc.advance(10_000)
    result = h.join("A2", instance_id="i-a")
    response = result.response
    assert response.error_code == Errors.NONE
    assert response.member_id == "A2"
    assert response.member_epoch == before
    assert h.assigned(result) == {"foo": [0, 1, 2]}
    assert GROUP_METADATA not in record_kinds(result)
    assert h.epoch() == before
    assert set(tombstones(result)) == {
        (CURRENT_ASSIGNMENT, "A"),
        (MEMBER_METADATA, "A"),
        (TARGET_MEMBER, "A"),
    }
    assert set(h.group.members) == {"A2", "B"}
    assert h.target("A2") == {"foo": [0, 1, 2]} and h.target("A") == {}
    assert h.group.static_member("i-a").member_id == "A2"
    assert ("session", GROUP, "A") not in h.gc.timers()
    assert h.gc.timers()[("session", GROUP, "A2")] == 10_000 + SESSION_MS
    assert h.group.state is GroupState.STABLE
    h.assert_replays()


def test_static_member_leaving_with_minus_one_is_removed_with_bump(h):
    static_group(h)
    before = h.epoch()
    result = h.heartbeat("A", -1, instance_id="i-a")
    assert result.response.member_epoch == -1
    assert tombstones(result) == [(CURRENT_ASSIGNMENT, "A"), (MEMBER_METADATA, "A")]
    assert group_epoch_records(result) == [before + 1]
    assert h.group.static_member("i-a") is None
    assert h.join("A2", instance_id="i-a").response.error_code == Errors.NONE  # the instance id is free


def test_static_heartbeat_with_wrong_member_id_is_fenced_instance_id(h):
    static_group(h)
    before = h.snapshot()
    result = h.heartbeat("B", h.member("B").member_epoch, instance_id="i-a")
    assert result.response.error_code == Errors.FENCED_INSTANCE_ID
    assert result.records == []
    assert h.snapshot() == before


def test_static_heartbeat_with_unknown_instance_id_is_unknown_member_id(h):
    static_group(h)
    result = h.heartbeat("A", h.member("A").member_epoch, instance_id="i-unknown")
    assert result.response.error_code == Errors.UNKNOWN_MEMBER_ID
    assert "i-unknown" in result.response.error_message
    assert result.records == []


# ---------------------------------------------------------------------------------------
# Rebalance timeout (R2, R3)
# ---------------------------------------------------------------------------------------
def revoking_a(h: Harness) -> None:
    h.join("A", rebalance_timeout_ms=10_000)
    h.join("B")
    told = h.heartbeat("A", 1)
    assert h.assigned(told) == {"foo": [0, 1, 2]}
    assert h.member("A").state is MemberState.UNREVOKED_PARTITIONS
    assert h.gc.timers()[("rebalance", GROUP, "A")] == 10_000


def test_member_that_does_not_revoke_in_time_is_removed(h):
    revoking_a(h)
    before = h.epoch()
    assert h.gc.advance(9_999) == []
    fired = h.gc.advance(1)
    assert [r.origin for r in fired] == ["rebalance timeout A"]
    assert tombstones(fired[0]) == [(CURRENT_ASSIGNMENT, "A"), (MEMBER_METADATA, "A")]
    assert group_epoch_records(fired[0]) == [before + 1]
    assert "A" not in h.group.members
    b = h.heartbeat("B", h.member("B").member_epoch)
    assert h.assigned(b) == {"foo": [0, 1, 2, 3, 4, 5]}
    h.assert_replays()


def test_member_that_revokes_in_time_is_kept(h):
    revoking_a(h)
    before = h.epoch()
    h.gc.advance(5_000)
    acked = h.heartbeat("A", 1, topic_partitions=h.tps({"foo": [0, 1, 2]}))
    assert acked.response.member_epoch == 2
    assert ("rebalance", GROUP, "A") not in h.gc.timers()
    h.gc.advance(20_000)
    assert "A" in h.group.members
    assert h.epoch() == before


# ---------------------------------------------------------------------------------------
# Revoke before assign (RC3, RC4, RC5, RC8)
# ---------------------------------------------------------------------------------------
def test_a_response_never_revokes_and_assigns_together(h):
    stable_ab(h)
    before = h.epoch()
    uses: dict[str, dict[str, list[int]]] = {m: h.owns(m) for m in ("A", "B")}

    def step(member_id, result):
        new = h.assigned(result)
        if new is not None:
            old = {(t, p) for t, ps in uses[member_id].items() for p in ps}
            got = {(t, p) for t, ps in new.items() for p in ps}
            assert got <= old or old <= got, f"{member_id}: {old} -> {got} revokes and assigns"
            uses[member_id] = new
        return result

    moved = step("A", h.heartbeat("A", before, subscribed_topic_names=["bar"]))
    assert h.target("A") == {"bar": [0, 1, 2]}
    assert h.target("B") == {"foo": [0, 1, 2, 3, 4, 5]}
    # RC3: A keeps its epoch, gives up foo-0..2, gets no bar yet.
    assert moved.response.member_epoch == before
    assert h.assigned(moved) == {} and h.pending(moved) == {}
    # RC2: B moves to the new epoch; foo-0..2 wait until A releases them. Its usable set did
    # not change, so (Kafka, D16) the response carries the new epoch and no assignment.
    b = step("B", h.heartbeat("B", before))
    assert b.response.member_epoch == before + 1
    assert b.response.assignment is None
    assert h.member("B").state is MemberState.UNRELEASED_PARTITIONS
    assert h.owns("B") == {"foo": [3, 4, 5]}
    # A full request shows the pending partitions.
    full = h.heartbeat(
        "B",
        before + 1,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=["foo"],
        topic_partitions=h.tps({"foo": [3, 4, 5]}),
    )
    assert (h.assigned(full), h.pending(full)) == ({"foo": [3, 4, 5]}, {"foo": [0, 1, 2]})
    # RC4: A acknowledges with an empty owned set; now it gets bar.
    a = step("A", h.heartbeat("A", before, topic_partitions=[]))
    assert a.response.member_epoch == before + 1
    assert (h.assigned(a), h.pending(a)) == ({"bar": [0, 1, 2]}, {})
    # RC5: B gets the released partitions with no epoch change.
    b = step("B", h.heartbeat("B", before + 1))
    assert b.response.member_epoch == before + 1
    assert (h.assigned(b), h.pending(b)) == ({"foo": [0, 1, 2, 3, 4, 5]}, {})
    assert h.group.state is GroupState.STABLE
    assert h.heartbeat("B", before + 1).response.assignment is None
    assert h.epoch() == before + 1
    h.assert_replays()


def test_unacknowledged_revocation_hands_nothing_to_the_new_owner(h):
    """RC6: with a null owned list the revocation is not acknowledged; B keeps waiting."""
    h.join("A")
    h.join("B")
    for _ in range(2):
        a = h.heartbeat("A", 1)
        assert a.response.member_epoch == 1
        assert h.member("A").pending_revocation == {h.tid("foo"): frozenset({3, 4, 5})}
        b = h.heartbeat("B", 2)
        assert b.response.member_epoch == 2
        assert b.response.assignment is None
        assert h.member("B").assigned == {}
    assert h.group.partition_held(h.tid("foo"), 3)


# ---------------------------------------------------------------------------------------
# Group size, assignor selection, states
# ---------------------------------------------------------------------------------------
def test_group_max_size_reached(make_harness):
    h = make_harness(CoordinatorConfig(max_size=2))
    h.join("A")
    h.join("B")
    before = h.snapshot()
    result = h.join("C")
    assert result.response.error_code == Errors.GROUP_MAX_SIZE_REACHED
    assert "2" in result.response.error_message
    assert result.records == []
    assert h.snapshot() == before


class FakeAssignor:
    """A prepared assignor: records each spec and returns a scripted assignment."""

    def __init__(self, name: str, script=None) -> None:
        self.name = name
        self.calls = []
        self.script = script

    def assign(self, spec):
        self.calls.append(spec)
        if self.script is not None:
            return self.script(spec)
        members = sorted(spec.members)
        out = {m: {} for m in members}
        for topic_id in sorted(spec.topics):
            for p in range(spec.topics[topic_id].num_partitions):
                out[members[p % len(members)]].setdefault(topic_id, []).append(p)
        return out


def test_prepared_assignor_is_called_and_its_output_installed(make_harness):
    def script(spec):
        (topic_id,) = spec.topics
        return {m: ({topic_id: [5, 3, 1]} if m == "A" else {topic_id: [4, 2, 0]}) for m in spec.members}

    fake = FakeAssignor("fake", script)
    h = make_harness(assignors=[fake])
    h.join("A")
    join_b = h.join("B")
    assert len(fake.calls) == 2
    spec = fake.calls[-1]
    assert set(spec.members) == {"A", "B"}
    foo = h.tid("foo")
    assert spec.members["B"].subscribed_topic_ids == frozenset({foo})
    assert dict(spec.members["A"].target_partitions) == {foo: (5, 3, 1)}  # previous target
    assert (spec.topics[foo].topic_name, spec.topics[foo].num_partitions) == ("foo", 6)
    assert h.group.target == {"A": {foo: (5, 3, 1)}, "B": {foo: (4, 2, 0)}}
    target_values = {r.key.member_id: r.value for r in join_b.records if type(r.key).__name__ == TARGET_MEMBER}
    assert target_values["B"].topic_partitions == [TopicPartitions(topic_id=foo, partitions=[4, 2, 0])]
    h.settle()
    assert h.owns("A") == {"foo": [1, 3, 5]}
    assert h.owns("B") == {"foo": [0, 2, 4]}
    describe = h.gc.consumer_group_describe(ConsumerGroupDescribeRequest(group_ids=[GROUP]))
    assert describe.response.groups[0].assignor_name == "fake"
    h.assert_replays()


def test_failing_assignor_answers_unknown_server_error_and_writes_nothing(make_harness):
    def script(spec):
        raise PartitionAssignorError("boom")

    h = make_harness(assignors=[FakeAssignor("bad", script)])
    result = h.join("A")
    assert result.response.error_code == Errors.UNKNOWN_SERVER_ERROR
    assert "boom" in result.response.error_message
    assert result.records == []
    assert GROUP not in h.gc.groups


@pytest.mark.parametrize(
    ("order", "votes", "chosen"),
    [
        (["a", "b", "c"], [None, None], "a"),  # nobody names one: the default, first configured
        (["a", "b", "c"], ["b", "c", "c"], "c"),  # most common wins
        (["a", "b", "c"], ["c", "b", None], "b"),  # a tie goes to the configured order
        (["a", "c", "b"], ["b", "c", None], "c"),
        (["a", "b", "c"], ["c", None, None], "c"),  # members without a preference do not vote
    ],
)
def test_server_assignor_selection(make_harness, order, votes, chosen):
    fakes = {name: FakeAssignor(name) for name in order}
    h = make_harness(assignors=[fakes[n] for n in order])
    for i, vote in enumerate(votes):
        fields = {"server_assignor": vote} if vote else {}
        assert h.join(f"m{i}", **fields).response.error_code == Errors.NONE
    calls = {name: len(f.calls) for name, f in fakes.items()}
    for f in fakes.values():
        f.calls.clear()
    h.heartbeat("m0", h.member("m0").member_epoch, subscribed_topic_names=["foo", "bar"])  # recompute
    assert [name for name, f in fakes.items() if f.calls] == [chosen], calls
    describe = h.gc.consumer_group_describe(ConsumerGroupDescribeRequest(group_ids=[GROUP]))
    assert describe.response.groups[0].assignor_name == chosen


def test_default_assignors_are_uniform_then_range():
    gc = GroupCoordinator()
    assert list(gc.assignors) == ["uniform", "range"]
    with pytest.raises(ValueError, match="distinct"):
        GroupCoordinator(assignors=[UniformAssignor(), UniformAssignor()])
    assert list(GroupCoordinator(assignors=[RangeAssignor()]).assignors) == ["range"]


def test_group_states_over_a_lifecycle(h):
    assert GROUP not in h.gc.groups
    h.join("A")
    assert h.group.state is GroupState.STABLE
    log_end_batches = h.gc.log.batch_count
    h.join("B")
    # The join's first batch (membership + epoch) on its own leaves the group Assigning.
    replayed = ConsumerGroup(GROUP)
    for batch in h.gc.log.truncated(log_end_batches + 1).batches():
        for entry in batch:
            replayed.replay(entry.record.key, entry.record.value)
    assert replayed.state is GroupState.ASSIGNING
    assert h.group.state is GroupState.RECONCILING
    h.settle()
    assert h.group.state is GroupState.STABLE
    h.heartbeat("B", -1)
    assert h.group.state is GroupState.ASSIGNING  # until the next heartbeat computes the target
    h.heartbeat("A", h.member("A").member_epoch)
    assert h.group.state is GroupState.STABLE
    h.heartbeat("A", h.member("A").member_epoch, client_assignors=[CUSTOM])
    assert h.group.state is GroupState.ASSIGNING  # client-side: waits for an install
    h.heartbeat("A", -1)
    assert h.group.state is GroupState.EMPTY
    assert h.group.members == {}
    group = h.group
    h.gc.unload()
    assert group.state is GroupState.DEAD
    assert h.gc.groups == {} and h.gc.timers() == {}


def test_has_unseen_metadata_until_a_heartbeat_notices_the_change():
    from golden_support import Case

    case = Case(partitions=2)
    case.join("A")
    assert case.gc.has_unseen_metadata("g") is False
    case.cluster.add_partitions("foo", 1)
    assert case.gc.has_unseen_metadata("g") is True
    case.heartbeat("A")  # the coordinator compares, bumps the epoch, computes the target
    assert case.gc.has_unseen_metadata("g") is False
    case.cluster.create_topic("bar", 1)  # a change the group does not subscribe to
    assert case.gc.has_unseen_metadata("g") is False
