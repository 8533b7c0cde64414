"""KIP-848 group coordinator: join, leave, rebalance triggers, epochs, static members, timeouts.

The expected values are Apache Kafka's ``GroupMetadataManager`` behaviour (the default
``kafka`` profile); where KIP-848's text says otherwise, a test under the ``kip`` fixture
checks the text's reading. Test names keep a short trigger tag (t1 join, t2 leave, t3
session timeout, t4 subscription change, t5/t6 metadata change, t8 fencing, t9 static
member timeout) so related tests sort together.
"""

from __future__ import annotations

import pytest
from conftest import GROUP, Harness, batch_kinds, record_kinds, tombstones
from pydantic import ValidationError

from kip_lab.assignors import PartitionAssignorError, RangeAssignor, UniformAssignor
from kip_lab.coordinator import ConsumerGroup, CoordinatorConfig, GroupCoordinator, GroupState, ReconciliationState
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
# Request validation
# ---------------------------------------------------------------------------------------
JOIN = {"member_epoch": 0, "rebalance_timeout_ms": 30_000, "subscribed_topic_names": ["foo"], "topic_partitions": []}

INVALID_HEARTBEATS = {
    "empty group id": ({**JOIN, "group_id": ""}, "GroupId"),
    "blank group id": ({**JOIN, "group_id": "  "}, "GroupId"),
    "blank member id, epoch > 0": ({"member_id": " ", "member_epoch": 3}, "MemberId"),
    "empty member id, epoch > 0": ({"member_epoch": 3}, "MemberId"),
    "empty member id, epoch -1": ({"member_epoch": -1}, "MemberId"),
    "empty member id, epoch -2": ({"member_epoch": -2, "instance_id": "i"}, "MemberId"),
    "empty instance id": ({**JOIN, "instance_id": ""}, "InstanceId"),
    "empty rack id": ({**JOIN, "rack_id": ""}, "RackId"),
    "epoch below -2": ({"member_id": "A", "member_epoch": -3}, "MemberEpoch"),
    "join without rebalance timeout": ({**JOIN, "rebalance_timeout_ms": -1}, "RebalanceTimeoutMs"),
    "join with owned partitions": (
        {**JOIN, "topic_partitions": [TopicPartitions(topic_id="x" * 22, partitions=[0])]},
        "TopicPartitions",
    ),
    "join with null owned partitions": ({**JOIN, "topic_partitions": None}, "TopicPartitions"),
    "join without subscription": ({**JOIN, "subscribed_topic_names": None}, "SubscribedTopicNames"),
    "static leave without instance id": ({"member_id": "A", "member_epoch": -2}, "InstanceId"),
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


# What only the KIP's "Request Validation" list refuses (Kafka accepts each of these).
KIP_ONLY_INVALID = {
    "join with zero rebalance timeout": ({**JOIN, "rebalance_timeout_ms": 0}, "RebalanceTimeoutMs"),
    "join with empty names": ({**JOIN, "subscribed_topic_names": []}, "SubscribedTopicNames"),
    "names and regex together": ({**JOIN, "subscribed_topic_regex": "foo.*"}, "SubscribedTopicRegex"),
    "backreference regex": (
        {**JOIN, "subscribed_topic_names": None, "subscribed_topic_regex": r"(a)\1"},
        "SubscribedTopicRegex",
    ),
    "lookahead regex": (
        {**JOIN, "subscribed_topic_names": None, "subscribed_topic_regex": "(?=x)foo"},
        "SubscribedTopicRegex",
    ),
}


@pytest.mark.parametrize("profile", ["kafka", "kip"])
@pytest.mark.parametrize(("fields", "mentions"), INVALID_HEARTBEATS.values(), ids=INVALID_HEARTBEATS.keys())
def test_invalid_heartbeat_is_invalid_request_and_changes_nothing(make_harness, profile, fields, mentions):
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid`` (and, for the client-side
    assignor fields Kafka does not have, KIP-848 "Request Validation"): refused before anything changes."""
    h = make_harness(CoordinatorConfig(fidelity=profile))
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


@pytest.mark.parametrize(("fields", "mentions"), KIP_ONLY_INVALID.values(), ids=KIP_ONLY_INVALID.keys())
def test_kip_only_validation_is_invalid_request(kip, fields, mentions):
    """KIP-848 "Request Validation": a positive rebalance timeout, names or a regex, never both, and an
    invalid regex are INVALID_REQUEST under the ``kip`` profile."""
    stable_ab(kip)
    before = kip.snapshot()
    result = kip.gc.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(**{"group_id": GROUP, **fields}))
    assert result.response.error_code == Errors.INVALID_REQUEST
    assert mentions in (result.response.error_message or "")
    assert result.records == []
    assert kip.snapshot() == before


def test_unknown_server_assignor_is_unsupported_assignor(h):
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid``: an unknown server assignor is
    UNSUPPORTED_ASSIGNOR, naming the supported ones."""
    stable_ab(h)
    before = h.snapshot()
    result = h.join("C", server_assignor="sticky")
    assert result.response.error_code == Errors.UNSUPPORTED_ASSIGNOR
    assert "sticky" in result.response.error_message
    assert "uniform" in result.response.error_message  # lists the supported ones, as Kafka does
    assert result.records == []
    assert h.snapshot() == before
    assert "C" not in h.group.members


def test_names_then_regex_on_a_later_heartbeat_is_invalid_request_under_kip(kip):
    """KIP-848 "Request Validation": the member's merged subscription may not hold names and a regex together."""
    stable_ab(kip)
    before = kip.snapshot()
    result = kip.heartbeat("A", kip.member("A").member_epoch, subscribed_topic_regex="ba.*")
    assert result.response.error_code == Errors.INVALID_REQUEST
    assert "SubscribedTopicRegex" in result.response.error_message
    assert result.records == []
    assert kip.snapshot() == before


def test_config_rejects_session_timeout_out_of_bounds():
    """Kafka ``GroupCoordinatorConfig`` (``group.consumer.session.timeout.ms`` within its min and max): a config
    outside them is refused naming the field."""
    with pytest.raises(ValidationError) as exc:
        CoordinatorConfig(session_timeout_ms=10)
    assert "session_timeout_ms" in str(exc.value)


# ---------------------------------------------------------------------------------------
# Join
# ---------------------------------------------------------------------------------------
def test_join_generates_a_deterministic_member_id(make_harness):
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat``: an empty member id gets one generated; here from the
    seeded RNG, so the same seed gives the same id."""
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


def test_join_accepts_a_client_provided_member_id_and_echoes_it_in_every_response(h):
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat`` sets the member id in every response, a leave's too."""
    joined = h.join("consumer-1-uuid").response
    assert joined.member_id == "consumer-1-uuid"
    assert set(h.group.members) == {"consumer-1-uuid"}
    steady = h.heartbeat("consumer-1-uuid", joined.member_epoch).response
    assert steady.error_code == Errors.NONE
    assert steady.member_id == "consumer-1-uuid"
    assert steady.member_epoch == joined.member_epoch
    assert h.heartbeat("consumer-1-uuid", -1).response.member_id == "consumer-1-uuid"


def test_member_id_only_on_join_under_kip(kip):
    """KIP-848 "Consumer Group Heartbeat API" (response schema): MemberId is only provided on a join."""
    joined = kip.join("consumer-1-uuid").response
    assert joined.member_id == "consumer-1-uuid"
    steady = kip.heartbeat("consumer-1-uuid", joined.member_epoch).response
    assert steady.error_code == Errors.NONE
    assert steady.member_id is None
    assert kip.heartbeat("consumer-1-uuid", -1).response.member_id is None


def test_first_join_bumps_computes_and_reconciles_in_three_batches(h):
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat``: membership and group epoch, the target, then the current
    assignment."""
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
    """The joiner jumps to TE; partitions still held by A are pending, not usable."""
    h.join("A")
    result = h.join("B")
    assert group_epoch_records(result) == [2]
    assert result.response.member_epoch == 2
    assert h.assigned(result) == {}
    assert h.pending(result) == {"foo": [3, 4, 5]}
    assert h.member("B").state is ReconciliationState.UNRELEASED_PARTITIONS
    assert h.group.state is GroupState.RECONCILING
    h.assert_replays()


# ---------------------------------------------------------------------------------------
# Group epoch triggers: exactly +1 each
# ---------------------------------------------------------------------------------------
def test_t1_join_bumps_once(h):
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat``: a join bumps the group epoch once (docs/rules.md T1)."""
    stable_ab(h)
    before = h.epoch()
    result = h.join("C")
    assert group_epoch_records(result) == [before + 1]
    assert h.epoch() == h.group.assignment_epoch == before + 1
    h.assert_replays()


def test_t2_leave_bumps_once_and_frees_partitions_without_revocation(h):
    """Kafka ``GroupMetadataManager.consumerGroupFenceMember`` and ``removeMember``: the current assignment,
    target entry and metadata tombstones, in that order, then the epoch bump."""
    stable_ab(h)
    before = h.epoch()
    result = h.heartbeat("A", -1)
    assert result.response.error_code == Errors.NONE
    assert result.response.member_epoch == -1
    assert result.response.assignment is None
    assert batch_kinds(result) == [[CURRENT_ASSIGNMENT, TARGET_MEMBER, MEMBER_METADATA, GROUP_METADATA]]
    assert tombstones(result) == [(CURRENT_ASSIGNMENT, "A"), (TARGET_MEMBER, "A"), (MEMBER_METADATA, "A")]
    assert group_epoch_records(result) == [before + 1]
    assert "A" not in h.group.members
    assert ("session", GROUP, "A") not in h.gc.timers()
    assert "A" not in h.group.target  # gone at once
    assert h.group.state is GroupState.ASSIGNING

    # B's next heartbeat computes the new target; A's partitions are free at once.
    b = h.heartbeat("B", h.member("B").member_epoch)
    assert tombstones(b) == []
    assert b.response.member_epoch == before + 1
    assert h.assigned(b) == {"foo": [0, 1, 2, 3, 4, 5]}
    h.assert_replays()


def test_t2_leave_keeps_the_target_entry_until_the_next_target_under_kip(kip):
    """KIP-848 "Member Failure" example: the target still lists the removed member until the next target
    is computed, whose batch tombstones it."""
    h = kip
    stable_ab(h)
    before = h.epoch()
    a_had = h.owns("A")
    result = h.heartbeat("A", -1)
    assert batch_kinds(result) == [[CURRENT_ASSIGNMENT, MEMBER_METADATA, GROUP_METADATA]]
    assert tombstones(result) == [(CURRENT_ASSIGNMENT, "A"), (MEMBER_METADATA, "A")]
    assert h.target("A") == a_had
    assert h.group.state is GroupState.ASSIGNING
    b = h.heartbeat("B", h.member("B").member_epoch)
    assert (TARGET_MEMBER, "A") in tombstones(b)
    assert b.response.member_epoch == before + 1
    assert h.assigned(b) == {"foo": [0, 1, 2, 3, 4, 5]}
    assert h.pending(b) == {}
    assert h.group.state is GroupState.STABLE
    assert h.epoch() == before + 1  # the recomputation itself does not bump
    h.assert_replays()


def test_t3_session_timeout_removes_the_member_and_bumps_once(h):
    """Kafka ``GroupMetadataManager.scheduleConsumerGroupSessionTimeout``, ``consumerGroupFenceMember``: a session
    timeout removes the member and bumps once (T3)."""
    stable_ab(h)
    before = h.epoch()
    h.gc.advance(SESSION_MS - 5_000)
    h.heartbeat("B", h.member("B").member_epoch)
    assert h.gc.advance(4_999) == []
    assert "A" in h.group.members
    fired = h.gc.advance(1)
    assert len(fired) == 1
    assert fired[0].origin == "session timeout A"
    assert tombstones(fired[0]) == [(CURRENT_ASSIGNMENT, "A"), (TARGET_MEMBER, "A"), (MEMBER_METADATA, "A")]
    assert group_epoch_records(fired[0]) == [before + 1]
    assert set(h.group.members) == {"B"}
    assert h.gc.timers() == {("session", GROUP, "B"): 2 * SESSION_MS - 5_000}
    b = h.heartbeat("B", h.member("B").member_epoch)
    assert h.assigned(b) == {"foo": [0, 1, 2, 3, 4, 5]}
    h.assert_replays()


@pytest.mark.parametrize(
    ("profile", "change", "expected_target_topics"),
    [
        ("kafka", {"subscribed_topic_names": ["foo", "bar"]}, {"foo", "bar"}),
        ("kip", {"subscribed_topic_names": ["foo", "bar"]}, {"foo", "bar"}),
        ("kip", {"server_assignor": "range"}, {"foo"}),
    ],
    ids=["names", "names under kip", "server assignor under kip"],
)
def test_t4_subscription_change_bumps_once(make_harness, profile, change, expected_target_topics):
    """Kafka ``GroupMetadataManager.hasMemberSubscriptionChanged`` (names); under ``kip`` also a server
    assignor change (KIP-848 "Group Epoch - Trigger a rebalance")."""
    h = make_harness(CoordinatorConfig(fidelity=profile))
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
    """Kafka ``GroupMetadataManager.hasMemberSubscriptionChanged``: a regex change bumps once (T4)."""
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
    assert h.assigned(result) == {}  # revoke foo first
    h.assert_replays()


def test_t4_client_assignors_change_bumps_once_and_switches_to_client_side_mode(h):
    """KIP-848, section "Client Side Mode": naming a client-side assignor bumps once and the target is then computed by
    a member (T4)."""
    h.join("A")
    before = h.epoch()
    result = h.heartbeat("A", 1, client_assignors=[CUSTOM])
    assert group_epoch_records(result) == [before + 1]
    assert h.group.assignment_epoch == before  # no server-side computation any more
    assert h.group.state is GroupState.ASSIGNING
    assert result.response.should_compute_assignment is True
    h.assert_replays()


def test_t5_partition_count_change_bumps_once_on_next_heartbeat(h):
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat`` (``hasMetadataExpired``): added partitions bump once, on
    the next heartbeat (T5)."""
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
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat`` (``hasMetadataExpired``): a created topic a member names
    bumps once (T5)."""
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
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat``: a created topic matching a member's regex bumps once
    (T6)."""
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
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat`` (``hasMetadataExpired``): a deleted topic bumps once and
    leaves the target."""
    h.join("A", ["foo", "bar"])
    before = h.epoch()
    h.cluster.delete_topic("bar")
    result = h.heartbeat("A", 1)
    assert group_epoch_records(result) == [before + 1]
    assert h.target("A") == {"foo": [0, 1, 2, 3, 4, 5]}
    assert h.assigned(result) == {"foo": [0, 1, 2, 3, 4, 5]}  # bar left out: revoke it
    assert result.response.member_epoch == before  # still revoking
    assert h.member("A").state is ReconciliationState.UNREVOKED_PARTITIONS
    h.settle()
    assert h.member("A").member_epoch == before + 1
    h.assert_replays()


def test_topic_recreation_revokes_old_id_then_assigns_new_id(h):
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat``, ``CurrentAssignmentBuilder.computeNextAssignment``: the
    old topic id's partitions are revoked before the new id's are assigned."""
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


def test_server_assignor_change_writes_the_member_without_bump(h):
    """Kafka ``GroupMetadataManager.hasMemberSubscriptionChanged``: only names or a regex trigger a rebalance;
    a new server assignor is recorded and used by the next target."""
    stable_ab(h)
    before = h.epoch()
    result = h.heartbeat("A", h.member("A").member_epoch, server_assignor="range")
    assert result.response.error_code == Errors.NONE
    assert batch_kinds(result) == [[MEMBER_METADATA]]
    assert h.epoch() == before
    assert h.member("A").server_assignor == "range"


def test_t8_fenced_member_is_refused_and_stays(h):
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid``: FENCED_MEMBER_EPOCH is an
    error response only; the member, its assignment and the group epoch stay."""
    stable_ab(h)
    before, snapshot = h.epoch(), h.snapshot()
    result = h.heartbeat("A", before + 5)
    assert result.response.error_code == Errors.FENCED_MEMBER_EPOCH
    assert result.records == []
    assert h.snapshot() == snapshot
    assert h.epoch() == before


def test_t8_fenced_member_is_removed_and_bumps_once_under_kip(kip):
    """KIP-848 "Consumer Group Heartbeat API", step 3: the fenced member is also removed from the group."""
    h = kip
    stable_ab(h)
    before = h.epoch()
    result = h.heartbeat("A", before + 5)
    assert result.response.error_code == Errors.FENCED_MEMBER_EPOCH
    assert group_epoch_records(result) == [before + 1]
    assert "A" not in h.group.members
    h.heartbeat("B", h.member("B").member_epoch)
    h.assert_replays()


def test_t9_static_member_not_back_within_session_timeout_is_removed_and_bumps_once(h):
    """Kafka ``GroupMetadataManager.consumerGroupStaticMemberGroupLeave``, ``scheduleConsumerGroupSessionTimeout``: a
    static member not back in time is removed (T9)."""
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
# Not triggers, and Kafka's rack / rebalance timeout handling
# ---------------------------------------------------------------------------------------
def test_plain_heartbeat_writes_nothing_and_answers_no_assignment(h):
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat``: a heartbeat with nothing new writes no record and carries
    no assignment."""
    stable_ab(h)
    before, log_end = h.snapshot(), h.gc.log.end_offset
    result = h.heartbeat("A", h.member("A").member_epoch)
    assert result.response.error_code == Errors.NONE
    assert result.records == []
    assert result.response.assignment is None  # converged, nothing changed
    assert h.gc.log.end_offset == log_end
    assert h.snapshot() == before


def test_full_heartbeat_always_carries_the_assignment(h):
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat`` (``isFullRequest``): a full request always gets the
    assignment."""
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
    """Kafka ``GroupMetadataManager.maybeReconcile``: reconciling writes current assignments, never a group epoch."""
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
# Fencing and the lost-response grace
# ---------------------------------------------------------------------------------------
def test_unknown_member_is_unknown_member_id(h):
    """Kafka ``ConsumerGroup.getOrMaybeCreateMember``: an unknown member id is UNKNOWN_MEMBER_ID and nothing is
    written."""
    stable_ab(h)
    before = h.snapshot()
    result = h.heartbeat("Z", h.epoch())
    assert result.response.error_code == Errors.UNKNOWN_MEMBER_ID
    assert "Z" in result.response.error_message
    assert result.records == []
    assert h.snapshot() == before


@pytest.mark.parametrize(("epoch", "message"), [(1, "Consumer group nope not found."), (-1, "Group nope not found.")])
def test_unknown_group_is_group_id_not_found_and_creates_nothing(h, epoch, message):
    """Kafka ``GroupMetadataManager.getOrMaybeCreateConsumerGroup`` (a heartbeat) and ``consumerGroup``
    (a leave): GROUP_ID_NOT_FOUND."""
    result = h.heartbeat("A", epoch, group_id="nope")
    assert result.response.error_code == Errors.GROUP_ID_NOT_FOUND
    assert result.response.error_message == message
    assert result.records == []
    assert "nope" not in h.gc.groups


@pytest.mark.parametrize("epoch", [1, -1])
def test_unknown_group_is_unknown_member_id_under_kip(kip, epoch):
    """KIP-848 "Consumer Group Heartbeat API", step 2: a member that does not exist is UNKNOWN_MEMBER_ID."""
    result = kip.heartbeat("A", epoch, group_id="nope")
    assert result.response.error_code == Errors.UNKNOWN_MEMBER_ID
    assert result.records == []
    assert "nope" not in kip.gc.groups


@pytest.mark.parametrize(("delta", "word"), [(+1, "greater"), (-1, "smaller")], ids=["ahead", "behind"])
def test_wrong_epoch_is_fenced_without_removing_the_member(h, delta, word):
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid``: its messages, nothing written."""
    stable_ab(h)
    h.join("C")
    h.settle()
    snapshot = h.snapshot()
    epoch, previous = h.member("A").member_epoch, h.member("A").previous_member_epoch
    sent = epoch + 1 if delta > 0 else previous - 1
    result = h.heartbeat("A", sent)
    assert result.response.error_code == Errors.FENCED_MEMBER_EPOCH
    assert result.response.error_message == (
        f"The consumer group member has a {word} member epoch ({sent}) than the one known by the group "
        f"coordinator ({epoch}). The member must abandon all its partitions and rejoin."
    )
    assert result.records == []
    assert h.snapshot() == snapshot
    assert (result.response.member_id, result.response.member_epoch) == (None, 0)  # the error alone


@pytest.mark.parametrize(("delta", "word"), [(+1, "greater"), (-1, "smaller")], ids=["ahead", "behind"])
def test_wrong_epoch_is_fenced_and_removes_the_member_under_kip(kip, delta, word):
    """KIP-848 "Consumer Group Heartbeat API", step 3: FENCED_MEMBER_EPOCH, and the member is removed."""
    h = kip
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
    assert result.response.member_epoch == 0  # an error response carries the error alone
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
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid``: the previous epoch with owned
    partitions within the assignment is accepted."""
    lost_response_setup(h)
    before = h.epoch()
    result = h.heartbeat("A", 1, topic_partitions=h.tps({"foo": [0, 1]}))
    assert result.response.error_code == Errors.NONE
    assert result.response.member_epoch == 2
    assert "A" in h.group.members
    assert h.epoch() == before


def test_previous_epoch_with_owned_not_subset_is_fenced(h):
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid``: the previous epoch owning more than the
    assignment is FENCED_MEMBER_EPOCH."""
    lost_response_setup(h)
    result = h.heartbeat("A", 1, topic_partitions=h.tps({"foo": [0, 1, 2, 3]}))
    assert result.response.error_code == Errors.FENCED_MEMBER_EPOCH
    assert h.member("A").member_epoch == 2


def test_previous_epoch_without_owned_partitions_is_fenced(h):
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid``: the previous epoch without owned
    partitions is FENCED_MEMBER_EPOCH."""
    lost_response_setup(h)
    assert h.heartbeat("A", 1).response.error_code == Errors.FENCED_MEMBER_EPOCH


def test_previous_epoch_is_fenced_when_the_grace_is_switched_off(make_harness):
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid``, with the Lab's
    ``accept_previous_epoch=False`` (docs/decisions.md D7): the previous epoch is fenced."""
    h = make_harness(CoordinatorConfig(accept_previous_epoch=False))
    lost_response_setup(h)
    result = h.heartbeat("A", 1, topic_partitions=h.tps({"foo": [0, 1, 2]}))
    assert result.response.error_code == Errors.FENCED_MEMBER_EPOCH
    assert result.records == []


# ---------------------------------------------------------------------------------------
# Static membership
# ---------------------------------------------------------------------------------------
def static_group(h: Harness) -> None:
    h.join("A", instance_id="i-a")
    h.join("B")
    h.settle()
    assert h.owns("A") == {"foo": [0, 1, 2]}


def test_static_temporary_leave_keeps_the_assignment(h):
    """Kafka ``GroupMetadataManager.consumerGroupStaticMemberGroupLeave``: epoch -2 keeps the member and its
    assignment."""
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
    """Kafka ``GroupMetadataManager.getOrMaybeSubscribeStaticConsumerGroupMember``: an instance id its live member
    still holds is UNRELEASED_INSTANCE_ID."""
    static_group(h)
    before = h.snapshot()
    result = h.join("A2", instance_id="i-a")
    assert result.response.error_code == Errors.UNRELEASED_INSTANCE_ID
    assert "i-a" in result.response.error_message
    assert result.records == []
    assert h.snapshot() == before


def test_static_replacement_inherits_the_assignment_without_bump(h):
    """Kafka ``GroupMetadataManager.getOrMaybeSubscribeStaticConsumerGroupMember``, ``replaceMember``: the new member
    takes the old one's assignment without a bump."""
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
    """Kafka ``GroupMetadataManager.consumerGroupLeave``, ``consumerGroupFenceMember``: a static member leaving with -1
    is removed and the epoch bumped."""
    static_group(h)
    before = h.epoch()
    result = h.heartbeat("A", -1, instance_id="i-a")
    assert result.response.member_epoch == -1
    assert tombstones(result) == [(CURRENT_ASSIGNMENT, "A"), (TARGET_MEMBER, "A"), (MEMBER_METADATA, "A")]
    assert group_epoch_records(result) == [before + 1]
    assert h.group.static_member("i-a") is None
    assert h.join("A2", instance_id="i-a").response.error_code == Errors.NONE  # the instance id is free


def test_static_heartbeat_with_wrong_member_id_is_fenced_instance_id(h):
    """Kafka ``GroupMetadataManager.throwIfInstanceIdIsFenced``: an instance id held by another member id is
    FENCED_INSTANCE_ID."""
    static_group(h)
    before = h.snapshot()
    result = h.heartbeat("B", h.member("B").member_epoch, instance_id="i-a")
    assert result.response.error_code == Errors.FENCED_INSTANCE_ID
    assert result.records == []
    assert h.snapshot() == before


def test_static_heartbeat_with_unknown_instance_id_is_unknown_member_id(h):
    """Kafka ``GroupMetadataManager.throwIfStaticMemberIsUnknown``: an unknown instance id is UNKNOWN_MEMBER_ID."""
    static_group(h)
    result = h.heartbeat("A", h.member("A").member_epoch, instance_id="i-unknown")
    assert result.response.error_code == Errors.UNKNOWN_MEMBER_ID
    assert "i-unknown" in result.response.error_message
    assert result.records == []


# ---------------------------------------------------------------------------------------
# Rebalance timeout
# ---------------------------------------------------------------------------------------
def revoking_a(h: Harness) -> None:
    h.join("A", rebalance_timeout_ms=10_000)
    h.join("B")
    told = h.heartbeat("A", 1)
    assert h.assigned(told) == {"foo": [0, 1, 2]}
    assert h.member("A").state is ReconciliationState.UNREVOKED_PARTITIONS
    assert h.gc.timers()[("rebalance", GROUP, "A")] == 10_000


def test_member_that_does_not_revoke_in_time_is_removed(h):
    """Kafka ``GroupMetadataManager.scheduleConsumerGroupRebalanceTimeout``: a member still revoking when its rebalance
    timeout passes is removed."""
    revoking_a(h)
    before = h.epoch()
    assert h.gc.advance(9_999) == []
    fired = h.gc.advance(1)
    assert [r.origin for r in fired] == ["rebalance timeout A"]
    assert tombstones(fired[0]) == [(CURRENT_ASSIGNMENT, "A"), (TARGET_MEMBER, "A"), (MEMBER_METADATA, "A")]
    assert group_epoch_records(fired[0]) == [before + 1]
    assert "A" not in h.group.members
    b = h.heartbeat("B", h.member("B").member_epoch)
    assert h.assigned(b) == {"foo": [0, 1, 2, 3, 4, 5]}
    h.assert_replays()


def test_member_that_revokes_in_time_is_kept(h):
    """Kafka ``GroupMetadataManager.scheduleConsumerGroupRebalanceTimeout``: acknowledging the revocation in time
    cancels the timer."""
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
# Revoke before assign
# ---------------------------------------------------------------------------------------
def test_a_response_never_revokes_and_assigns_together(h):
    """Kafka ``CurrentAssignmentBuilder.computeNextAssignment``: a response either revokes or assigns, never both
    (docs/rules.md RC8)."""
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
    # A keeps its epoch, gives up foo-0..2, gets no bar yet.
    assert moved.response.member_epoch == before
    assert h.assigned(moved) == {} and h.pending(moved) == {}
    # B moves to the new epoch; foo-0..2 wait until A releases them. Its usable set did
    # not change, so (Kafka, D16) the response carries the new epoch and no assignment.
    b = step("B", h.heartbeat("B", before))
    assert b.response.member_epoch == before + 1
    assert b.response.assignment is None
    assert h.member("B").state is ReconciliationState.UNRELEASED_PARTITIONS
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
    # A acknowledges with an empty owned set; now it gets bar.
    a = step("A", h.heartbeat("A", before, topic_partitions=[]))
    assert a.response.member_epoch == before + 1
    assert (h.assigned(a), h.pending(a)) == ({"bar": [0, 1, 2]}, {})
    # B gets the released partitions with no epoch change.
    b = step("B", h.heartbeat("B", before + 1))
    assert b.response.member_epoch == before + 1
    assert (h.assigned(b), h.pending(b)) == ({"foo": [0, 1, 2, 3, 4, 5]}, {})
    assert h.group.state is GroupState.STABLE
    assert h.heartbeat("B", before + 1).response.assignment is None
    assert h.epoch() == before + 1
    h.assert_replays()


def test_unacknowledged_revocation_hands_nothing_to_the_new_owner(h):
    """With a null owned list the revocation is not acknowledged; B keeps waiting."""
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
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupIsFull``: a new member of a full group is
    GROUP_MAX_SIZE_REACHED and nothing is written."""
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
    """Kafka ``TargetAssignmentBuilder.build``: the group's assignor gets the spec and its output becomes the target."""

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
    """Kafka ``GroupMetadataManager.updateTargetAssignment``: an assignor failure is UNKNOWN_SERVER_ERROR and nothing
    is written."""

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
    """Kafka ``ConsumerGroup.computePreferredServerAssignor``: the most common name, else the first configured (ties:
    docs/decisions.md D19)."""
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
    """Kafka ``GroupCoordinatorConfig.CONSUMER_GROUP_ASSIGNORS_DEFAULT``: uniform, then range."""
    gc = GroupCoordinator()
    assert list(gc.assignors) == ["uniform", "range"]
    with pytest.raises(ValueError, match="distinct"):
        GroupCoordinator(assignors=[UniformAssignor(), UniformAssignor()])
    assert list(GroupCoordinator(assignors=[RangeAssignor()]).assignors) == ["range"]


def test_group_states_over_a_lifecycle(h):
    """Kafka ``ConsumerGroup.maybeUpdateGroupState``: Empty, Assigning, Reconciling, Stable as the records replay."""
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
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat`` (``hasMetadataExpired``): a metadata change waits for the
    next heartbeat."""
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


# ---------------------------------------------------------------------------------------
# Behaviours where Kafka's implementation and the KIP text part ways
# ---------------------------------------------------------------------------------------
def test_member_revoking_across_a_second_target_keeps_its_epoch_and_restarts_its_timer(make_harness):
    """Kafka ``CurrentAssignmentBuilder.build`` (UNREVOKED_PARTITIONS) as fixed by KAFKA-19974: a member that
    has revoked but must revoke again for a newer target keeps its epoch; ``GroupMetadataManager.maybeReconcile``
    restarts its rebalance timer because its assignment changed."""
    plan: dict[str, list[int]] = {"A": [0, 1, 2, 3, 4, 5]}

    def script(spec):
        (topic_id,) = spec.topics
        return {m: {topic_id: plan.get(m, [])} for m in spec.members}

    h = make_harness(assignors=[FakeAssignor("fake", script)])
    h.join("A", rebalance_timeout_ms=10_000)
    h.settle()
    plan.update(A=[0, 1, 2, 3], B=[4, 5])
    h.join("B")
    h.heartbeat("A", 1)
    assert (h.member("A").state, h.member("A").member_epoch) == (ReconciliationState.UNREVOKED_PARTITIONS, 1)
    plan.update(A=[0, 1], B=[2, 3, 4, 5])
    h.join("C")  # a third target (epoch 3) while A still revokes toward the second
    h.gc.advance(5_000)
    result = h.heartbeat("A", 1, topic_partitions=h.tps({"foo": [0, 1, 2, 3]}))  # foo-4 and foo-5 revoked
    member = h.member("A")
    assert (member.state, member.member_epoch) == (ReconciliationState.UNREVOKED_PARTITIONS, 1)
    assert result.response.member_epoch == 1
    assert h.owns("A") == {"foo": [0, 1]}
    assert h.gc.timers()[("rebalance", GROUP, "A")] == 15_000  # restarted: the assignment changed
    h.heartbeat("A", 1, topic_partitions=h.tps({"foo": [0, 1]}))
    assert (h.member("A").state, h.member("A").member_epoch) == (ReconciliationState.STABLE, 3)


def test_names_and_regex_together_subscribe_to_both(h):
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat`` (KAFKA-17593): a member may hold names and a
    regex; its topics are the union. An empty regex clears the regex, switching back to names alone."""
    stable_ab(h)
    result = h.heartbeat("A", h.member("A").member_epoch, subscribed_topic_regex="ba.*")
    assert result.response.error_code == Errors.NONE
    assert (h.member("A").subscribed_topic_names, h.member("A").subscribed_topic_regex) == (("foo",), "ba.*")
    h.settle()
    assert set(h.owns("A")) == {"foo", "bar"}
    h.heartbeat("A", h.member("A").member_epoch, subscribed_topic_regex="")  # back to names alone
    assert h.member("A").subscribed_topic_regex is None
    h.settle()
    assert set(h.owns("A")) == {"foo"}
    h.assert_replays()


def test_switching_from_a_regex_to_names_and_back(h):
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat`` (KAFKA-17593): names replace the member's names,
    an empty regex clears its regex; each change bumps the group epoch once."""
    h.join("A", None, subscribed_topic_regex="fo.*")
    h.settle()
    before = h.epoch()
    epoch = h.member("A").member_epoch
    to_names = h.heartbeat("A", epoch, subscribed_topic_names=["bar"], subscribed_topic_regex="")
    assert to_names.response.error_code == Errors.NONE
    assert group_epoch_records(to_names) == [before + 1]
    h.settle()
    assert h.owns("A") == {"bar": [0, 1, 2]}
    epoch = h.member("A").member_epoch
    to_regex = h.heartbeat("A", epoch, subscribed_topic_names=[], subscribed_topic_regex="fo.*")
    assert group_epoch_records(to_regex) == [before + 2]
    h.settle()
    assert h.owns("A") == {"foo": [0, 1, 2, 3, 4, 5]}


def test_invalid_regex_is_invalid_regular_expression(h):
    """Kafka ``GroupMetadataManager.throwIfRegularExpressionIsInvalid`` (KAFKA-17593): INVALID_REGULAR_EXPRESSION
    naming the regex and the reason; nothing changes."""
    stable_ab(h)
    before = h.snapshot()
    result = h.heartbeat("A", h.member("A").member_epoch, subscribed_topic_regex=r"(a)\1")
    assert result.response.error_code == Errors.INVALID_REGULAR_EXPRESSION
    assert (
        result.response.error_message
        == r"SubscribedTopicRegex `(a)\1` is not a valid regular expression: invalid escape sequence."
    )
    assert result.records == []
    assert h.snapshot() == before


@pytest.mark.parametrize(
    ("regex", "re2j_says"),
    [
        ("[", "missing closing ]"),
        ("(", "missing closing )"),
        ("*", "missing argument to repetition operator"),
        ("a**", "invalid nested repetition operator"),
        ("a{2000}", "invalid repeat count"),
        ("(?i", "invalid or unsupported Perl syntax"),
        ("(?<x", "invalid named capture"),
        ("foo\\", "trailing backslash at end of expression"),
    ],
)
def test_invalid_regex_message_is_re2js(h, regex, re2j_says):
    """Kafka ``GroupMetadataManager.throwIfRegularExpressionIsInvalid`` puts RE2/J's ``PatternSyntaxException``
    description in the message (``com.google.re2j.Parser``'s error texts), not the C++ library's ("missing ]: [")."""
    h.join("A")
    result = h.heartbeat("A", h.member("A").member_epoch, subscribed_topic_regex=regex)
    assert (
        result.response.error_message
        == f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {re2j_says}."
    )


def test_join_with_zero_rebalance_timeout_or_empty_names_is_accepted(h):
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid`` only refuses a missing (-1)
    rebalance timeout and null names and regex; an empty list joins subscribed to nothing."""
    assert h.join("A", rebalance_timeout_ms=0).response.error_code == Errors.NONE
    joined = h.join("E", [])
    assert joined.response.error_code == Errors.NONE
    assert h.member("E").subscribed_topic_names == ()


def test_static_member_rejoining_with_new_subscriptions_writes_kafkas_records(h):
    """Kafka ``GroupMetadataManager.replaceMember`` then ``hasMemberSubscriptionChanged``: the old member's
    tombstones, a copy under the new id with the old target and assignment, then the new subscription,
    the partition metadata and the epoch bump, the target, and the reconciled assignment."""
    static_group(h)
    before = h.epoch()
    h.heartbeat("A", -2, instance_id="i-a")
    result = h.join("A2", ["foo", "bar"], instance_id="i-a")
    assert result.response.error_code == Errors.NONE
    written = [(type(r.key).__name__, getattr(r.key, "member_id", None), r.value is None) for r in result.records]
    assert written == [
        (CURRENT_ASSIGNMENT, "A", True),
        (TARGET_MEMBER, "A", True),
        (MEMBER_METADATA, "A", True),
        (MEMBER_METADATA, "A2", False),
        (TARGET_MEMBER, "A2", False),
        (CURRENT_ASSIGNMENT, "A2", False),
        (MEMBER_METADATA, "A2", False),
        (PARTITION_METADATA, None, False),
        (GROUP_METADATA, None, False),
        *[(TARGET_MEMBER, m, False) for m in ("A2", "B")],
        (TARGET_METADATA, None, False),
        (CURRENT_ASSIGNMENT, "A2", False),
    ]
    copy = result.records[3].value
    assert (copy.subscribed_topic_names, result.records[6].value.subscribed_topic_names) == (["foo"], ["bar", "foo"])
    assert result.records[5].value.member_epoch == 0  # the copy, at epoch 0, with A's partitions
    assert group_epoch_records(result) == [before + 1]
    h.assert_replays()


def test_known_member_rejoining_at_epoch_zero_gets_its_assignment_back(h):
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid`` as fixed by KAFKA-19233: a known
    member's join at epoch 0 is accepted as it is; it keeps its epoch and assignment (no bump), and the full
    response hands the assignment back."""
    stable_ab(h)
    before, epoch, owned = h.epoch(), h.member("A").member_epoch, h.owns("A")
    result = h.join("A")
    assert result.response.error_code == Errors.NONE
    assert result.records == []
    assert (h.epoch(), result.response.member_epoch) == (before, epoch)
    assert h.assigned(result) == owned
    h.assert_replays()


def test_known_member_rejoining_at_epoch_zero_starts_afresh_under_kip(kip):
    """KIP-848 "Consumer Group Heartbeat API", step 2: epoch 0 creates the member: what it owned is released,
    it starts from nothing, and the group epoch is bumped."""
    h = kip
    stable_ab(h)
    before = h.epoch()
    result = h.join("A")
    assert result.response.error_code == Errors.NONE
    assert group_epoch_records(result) == [before + 1]
    h.settle()
    assert h.owns("A") == {"foo": [0, 1, 2]} and h.member("A").member_epoch == before + 1


def test_a_full_group_refuses_any_new_member_id_first(make_harness):
    """Kafka ``GroupMetadataManager.throwIfConsumerGroupIsFull``, checked before the member is looked up: a static
    member rejoining under a new id, or an unknown member at any epoch, gets GROUP_MAX_SIZE_REACHED."""
    h = make_harness(CoordinatorConfig(max_size=2))
    h.join("A", instance_id="i-a")
    h.join("B")
    h.heartbeat("A", -2, instance_id="i-a")
    assert h.join("A2", instance_id="i-a").response.error_code == Errors.GROUP_MAX_SIZE_REACHED
    assert h.heartbeat("Z", 3).response.error_code == Errors.GROUP_MAX_SIZE_REACHED
    assert h.heartbeat("B", h.member("B").member_epoch).response.error_code == Errors.NONE


def test_unreleased_instance_id_in_kafkas_words(h):
    """Kafka ``GroupMetadataManager.throwIfInstanceIdIsUnreleased``."""
    h.join("A", instance_id="i-a")
    result = h.join("A2", instance_id="i-a")
    assert result.response.error_code == Errors.UNRELEASED_INSTANCE_ID
    assert result.response.error_message == (
        "Static member A2 with instance id i-a cannot join the group because the instance id is owned by A member."
    )


def test_static_replacement_with_an_unchanged_target_still_writes_the_new_members_target(h):
    """Kafka ``TargetAssignmentBuilder.build`` (``TargetAssignmentBuilderTest.testReplaceStaticMember``): the new
    member id has no target in the group yet (``replaceMember``'s records are not replayed until the heartbeat
    completes), so its new target gets a record even when it holds the old member's partitions unchanged."""
    static_group(h)
    h.heartbeat("A", -2, instance_id="i-a")
    result = h.join("A2", ["foo", "missing"], instance_id="i-a")  # a new subscription: the epoch bumps
    assert result.response.error_code == Errors.NONE
    targets = [r for r in result.records if type(r.key).__name__ == TARGET_MEMBER and r.value is not None]
    assert [r.key.member_id for r in targets] == ["A2", "A2"]  # the copy, then the new target; B unchanged
    assert [[(tp.topic_id, tp.partitions) for tp in r.value.topic_partitions] for r in targets] == [
        [(h.tid("foo"), [0, 1, 2])]
    ] * 2
    h.assert_replays()
