"""Share groups at the group coordinator (KIP-932): SimpleAssignor, ShareGroupHeartbeat, records, failover."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kip_lab.assignors import PartitionAssignorError
from kip_lab.coordinator import GroupCoordinator
from kip_lab.coordinator.config import CoordinatorConfig
from kip_lab.machines import IllegalTransition
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kip_lab.protocol.errors import Errors
from kip_lab.protocol.records import SHARE_GROUP_RECORD_KEYS
from kip_lab.protocol.share_group import ShareGroupHeartbeatRequest
from kip_lab.share.group import SHARE_GROUP_STATE_MACHINE, ShareGroupState, check_share_group_transition
from kip_lab.share.group_assignor import SimpleAssignor

# -- the KIP's SimpleAssignor example table, row by row -------------------------------------
# Each row: (event, subscriptions {member: topics}, partitions {topic: count},
#            changes as the KIP words them, assignments after).
SEED_TABLE = [
    (
        "M1 subscribed to topic T1 with 1 partition",
        {"M1": {"T1"}},
        {"T1": 1},
        {("assign", "T1:0", "M1")},
        {"M1": {"T1:0"}},
    ),
    (
        "M2 joins the group and subscribes to T1",
        {"M1": {"T1"}, "M2": {"T1"}},
        {"T1": 1},
        {("assign", "T1:0", "M2")},
        {"M1": {"T1:0"}, "M2": {"T1:0"}},
    ),
    (
        "Add 3 partitions to T1",
        {"M1": {"T1"}, "M2": {"T1"}},
        {"T1": 4},
        {("assign", "T1:1", "M2"), ("assign", "T1:3", "M2"), ("revoke", "T1:0", "M2"), ("assign", "T1:2", "M1")},
        {"M1": {"T1:0", "T1:2"}, "M2": {"T1:1", "T1:3"}},
    ),
    (
        "M3 joins the group and subscribes to T1",
        {"M1": {"T1"}, "M2": {"T1"}, "M3": {"T1"}},
        {"T1": 4},
        {("assign", "T1:2", "M3"), ("revoke", "T1:2", "M1")},
        {"M1": {"T1:0"}, "M2": {"T1:1", "T1:3"}, "M3": {"T1:2"}},
    ),
    (
        "M4 joins the group and subscribes to T1",
        {f"M{i}": {"T1"} for i in range(1, 5)},
        {"T1": 4},
        {("assign", "T1:3", "M4"), ("revoke", "T1:3", "M2")},
        {"M1": {"T1:0"}, "M2": {"T1:1"}, "M3": {"T1:2"}, "M4": {"T1:3"}},
    ),
    (
        "M5, M6, M7, M8 join the group and subscribe to T1",
        {f"M{i}": {"T1"} for i in range(1, 9)},
        {"T1": 4},
        {("assign", "T1:0", "M5"), ("assign", "T1:1", "M6"), ("assign", "T1:2", "M7"), ("assign", "T1:3", "M8")},
        {f"M{i}": {f"T1:{(i - 1) % 4}"} for i in range(1, 9)},
    ),
    (
        "M1 subscribes to T2 with 2 partitions",
        {"M1": {"T1", "T2"}, **{f"M{i}": {"T1"} for i in range(2, 9)}},
        {"T1": 4, "T2": 2},
        {("assign", "T2:0", "M1"), ("assign", "T2:1", "M1")},
        {"M1": {"T1:0", "T2:0", "T2:1"}, **{f"M{i}": {f"T1:{(i - 1) % 4}"} for i in range(2, 9)}},
    ),
    (
        "All members leave except M2",
        {"M2": {"T1"}},
        {"T1": 4, "T2": 2},
        {("assign", "T1:0", "M2"), ("assign", "T1:2", "M2"), ("assign", "T1:3", "M2")},
        {"M2": {"T1:0", "T1:1", "T1:2", "T1:3"}},
    ),
]


def _seed_hash(member_id: str) -> int:
    """The KIP's fixture: M<i> hashes to i."""
    return int(member_id[1:])


def _flatten(assignment: dict[str, dict[str, tuple[int, ...]]]) -> dict[str, set[str]]:
    return {m: {f"{t}:{p}" for t, parts in topics.items() for p in parts} for m, topics in assignment.items()}


def _changes(before: dict[str, set[str]], after: dict[str, set[str]]) -> set[tuple[str, str, str]]:
    out = set()
    for member in sorted(set(before) | set(after)):
        old, new = before.get(member, set()), after.get(member, set())
        if member not in after:
            continue  # the KIP lists no revocations for members that left
        out |= {("assign", tp, member) for tp in new - old}
        out |= {("revoke", tp, member) for tp in old - new}
    return out


def test_simple_assignor_reproduces_the_kips_example_table_row_by_row():
    """KIP-932, 'The SimpleAssignor': the example table, with the table's hashes."""
    assignor = SimpleAssignor(member_hash=_seed_hash, fidelity="kip")
    current: dict[str, dict[str, frozenset[int]]] = {}
    previous: dict[str, set[str]] = {}
    for event, subscriptions, counts, changes, expected in SEED_TABLE:
        result = assignor.assign(
            {m: frozenset(t) for m, t in subscriptions.items()},
            {t: tuple(range(n)) for t, n in counts.items()},
            current,
        )
        flat = {m: tps for m, tps in _flatten(result).items() if tps}
        assert flat == expected, event
        assert _changes(previous, flat) == changes, event
        # every partition of a subscribed topic has at least one member.
        subscribed = set().union(*subscriptions.values())
        for topic in subscribed:
            for p in range(counts[topic]):
                assert any(f"{topic}:{p}" in tps for tps in flat.values()), (event, topic, p)
        current = {m: {t: frozenset(p) for t, p in topics.items()} for m, topics in result.items()}
        previous = flat


def test_simple_assignor_gives_every_member_every_partition_of_its_topics():
    """Kafka's ``SimpleAssignor.assign``: each member gets all partitions of each topic it subscribes to."""
    assignor = SimpleAssignor()
    subs = {"a": frozenset({"T1"}), "b": frozenset({"T2"}), "c": frozenset({"T1", "T2"}), "d": frozenset({"T3"})}
    parts = {"T1": (0, 1, 2), "T2": (0, 1), "T3": ()}
    current = {"a": {"T1": frozenset({0})}}
    assert assignor.assign(subs, parts, current) == {
        "a": {"T1": (0, 1, 2)},
        "b": {"T2": (0, 1)},
        "c": {"T1": (0, 1, 2), "T2": (0, 1)},
        "d": {},
    }
    with pytest.raises(ValueError, match="fidelity"):
        SimpleAssignor(fidelity="kraft")


def test_simple_assignor_refuses_a_topic_missing_from_the_metadata():
    """Kafka's ``SimpleAssignor.computeTargetPartitions``: a subscribed topic the topic metadata does not have
    (``numPartitions`` -1) is a ``PartitionAssignorException``; one without initialized share state is not."""
    subs = {"a": frozenset({"T1", "T9"})}
    with pytest.raises(
        PartitionAssignorError, match="subscribed to topic T9 which doesn't exist in the topic metadata"
    ):
        SimpleAssignor().assign(subs, {"T1": (0, 1)}, {})
    assert SimpleAssignor().assign(subs, {"T1": (0, 1), "T9": ()}, {}) == {"a": {"T1": (0, 1)}}


def test_simple_assignor_skips_a_topic_missing_from_the_metadata_under_kip():
    """KIP-932, 'The SimpleAssignor' assigns the partitions of the subscribed topics there are: a missing one is
    skipped."""
    assert SimpleAssignor(fidelity="kip").assign({"a": frozenset({"T1", "T9"})}, {"T1": (0,)}, {}) == {
        "a": {"T1": (0,)}
    }


def test_simple_assignor_gives_only_subscribed_topics_and_is_deterministic():
    """KIP-932, 'The SimpleAssignor': every partition of a subscribed topic gets at least one member."""
    assignor = SimpleAssignor(fidelity="kip")
    subs = {"a": frozenset({"T1"}), "b": frozenset({"T2"}), "c": frozenset({"T1", "T2"})}
    parts = {"T1": (0, 1, 2), "T2": (0, 1)}
    first = assignor.assign(subs, parts, {})
    assert first == assignor.assign(dict(reversed(list(subs.items()))), parts, {})
    assert "T2" not in first["a"] and "T1" not in first["b"]
    for topic, partitions in parts.items():
        for p in partitions:
            assert any(p in first[m].get(topic, ()) for m in subs)


# -- the share-group state machine ------------------------------------------------------------
def test_share_group_state_machine_has_the_kips_three_states_and_refuses_undeclared_edges():
    assert set(SHARE_GROUP_STATE_MACHINE.states) == {"Empty", "Stable", "Dead"}
    check_share_group_transition(ShareGroupState.EMPTY, ShareGroupState.STABLE)
    with pytest.raises(IllegalTransition):
        check_share_group_transition(ShareGroupState.DEAD, ShareGroupState.STABLE)


# -- ShareGroupHeartbeat --------------------------------------------------------------------
def _coordinator() -> GroupCoordinator:
    coordinator = GroupCoordinator()
    coordinator.cluster.create_topic("T1", 2)
    return coordinator


def _join(coordinator: GroupCoordinator, group: str = "sg", topics=("T1",), member_id: str = ""):
    request = ShareGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=0, subscribed_topic_names=list(topics)
    )
    return coordinator.share_group_heartbeat(request).response


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"group_id": "", "member_epoch": 0, "subscribed_topic_names": ["T1"]}, "GroupId can't be empty."),
        ({"group_id": "g", "member_epoch": 0}, "SubscribedTopicNames must be set in first request."),
        ({"group_id": "g", "member_epoch": 3}, "MemberId can't be empty."),
        ({"group_id": "g", "member_epoch": -2, "member_id": "m"}, "MemberEpoch is invalid."),
        (
            {"group_id": "g", "member_epoch": 0, "subscribed_topic_names": ["T1"], "rack_id": ""},
            "RackId can't be empty.",
        ),
    ],
)
def test_invalid_heartbeats_get_invalid_request_and_write_nothing(fields, message):
    coordinator = _coordinator()
    response = coordinator.share_group_heartbeat(ShareGroupHeartbeatRequest(**fields)).response
    assert (response.error_code, response.error_message) == (Errors.INVALID_REQUEST, message)
    assert coordinator.log.end_offset == 0


def test_no_static_membership_the_request_has_no_instance_id():
    with pytest.raises(ValidationError, match="instance_id"):
        ShareGroupHeartbeatRequest(group_id="g", member_epoch=0, subscribed_topic_names=["T1"], instance_id="i")


def test_join_writes_member_metadata_then_epoch_then_target_then_current_assignment():
    coordinator = _coordinator()
    response = _join(coordinator)
    assert response.error_code == Errors.NONE and response.member_id and response.member_epoch == 1
    # no share-partition has state yet, so the first assignment is empty.
    assert response.assignment is not None and response.assignment.topic_partitions == []
    kinds = [type(e.record.key).__name__ for e in coordinator.log]
    assert kinds == [
        "ShareGroupMemberMetadataKey",
        "ShareGroupPartitionMetadataKey",
        "ShareGroupMetadataKey",
        "ShareGroupTargetAssignmentMemberKey",
        "ShareGroupTargetAssignmentMetadataKey",
        "ShareGroupCurrentMemberAssignmentKey",
    ]
    assert all(isinstance(e.record.key, SHARE_GROUP_RECORD_KEYS) for e in coordinator.log)
    assert coordinator.share_groups["sg"].state is ShareGroupState.STABLE


def test_one_namespace_one_kind_per_group_id():
    coordinator = _coordinator()
    consumer = coordinator.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            group_id="cg", member_epoch=0, rebalance_timeout_ms=1000, subscribed_topic_names=["T1"], topic_partitions=[]
        )
    ).response
    assert consumer.error_code == Errors.NONE
    share = _join(coordinator, group="cg")
    assert share.error_code == Errors.GROUP_ID_NOT_FOUND and "not a share group" in share.error_message
    _join(coordinator, group="sg")
    back = coordinator.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            group_id="sg", member_epoch=0, rebalance_timeout_ms=1000, subscribed_topic_names=["T1"], topic_partitions=[]
        )
    ).response
    assert back.error_code == Errors.GROUP_ID_NOT_FOUND and "not a consumer group" in back.error_message


def test_unknown_member_and_fenced_epochs():
    coordinator = _coordinator()
    joined = _join(coordinator)
    unknown = coordinator.share_group_heartbeat(
        ShareGroupHeartbeatRequest(group_id="sg", member_id="nobody", member_epoch=1)
    ).response
    assert unknown.error_code == Errors.UNKNOWN_MEMBER_ID
    ahead = coordinator.share_group_heartbeat(
        ShareGroupHeartbeatRequest(group_id="sg", member_id=joined.member_id, member_epoch=7)
    ).response
    assert ahead.error_code == Errors.FENCED_MEMBER_EPOCH and "greater member epoch (7)" in ahead.error_message
    # Kafka's GroupMetadataManager.throwIfShareGroupMemberEpochIsInvalid: refused; the member stays.
    assert list(coordinator.share_groups["sg"].members) == [joined.member_id]
    assert coordinator.share_groups["sg"].state is ShareGroupState.STABLE


def test_heartbeat_at_the_previous_epoch_is_accepted_and_a_steady_heartbeat_writes_nothing():
    coordinator = _coordinator()
    first = _join(coordinator)
    second = _join(coordinator, member_id="")  # another member: the group epoch moves to 2
    assert second.member_epoch == 2
    steady = coordinator.share_group_heartbeat(
        ShareGroupHeartbeatRequest(group_id="sg", member_id=first.member_id, member_epoch=first.member_epoch)
    ).response
    assert steady.member_epoch == 2 and steady.error_code == Errors.NONE
    end = coordinator.log.end_offset
    previous = coordinator.share_group_heartbeat(
        ShareGroupHeartbeatRequest(group_id="sg", member_id=first.member_id, member_epoch=1)
    ).response
    assert previous.error_code == Errors.NONE and previous.assignment is None
    assert coordinator.log.end_offset == end


def test_leave_and_session_timeout_remove_the_member_and_bump_the_epoch():
    coordinator = _coordinator()
    a = _join(coordinator)
    b = _join(coordinator)
    left = coordinator.share_group_heartbeat(
        ShareGroupHeartbeatRequest(group_id="sg", member_id=a.member_id, member_epoch=-1)
    ).response
    assert left.error_code == Errors.NONE and left.member_epoch == -1
    group = coordinator.share_groups["sg"]
    assert set(group.members) == {b.member_id} and group.group_epoch == 3
    coordinator.advance(coordinator.share_config.session_timeout_ms)
    assert group.members == {} and group.group_epoch == 4 and group.state is ShareGroupState.EMPTY


def test_group_max_size():
    from kip_lab.share.group_config import ShareGroupConfig

    coordinator = _coordinator()
    coordinator.config = coordinator.config.model_copy(update={"share": ShareGroupConfig(max_size=1)})
    assert _join(coordinator).error_code == Errors.NONE
    assert _join(coordinator).error_code == Errors.GROUP_MAX_SIZE_REACHED


def test_failover_rebuilds_every_share_group_from_the_log_at_every_step():
    coordinator = _coordinator()
    steps = [
        lambda: _join(coordinator),
        lambda: _join(coordinator, topics=("T1", "T2")),
        lambda: coordinator.cluster.create_topic("T2", 3),
        lambda: _join(coordinator),
        lambda: coordinator.advance(coordinator.share_config.session_timeout_ms),
    ]
    for step in steps:
        step()
        rebuilt = GroupCoordinator.from_log(coordinator.log, cluster=coordinator.cluster, load=False)
        assert rebuilt.share_state_snapshot() == coordinator.share_state_snapshot()


def test_the_group_keeps_its_subscription_counts_through_joins_changes_leaves_and_failover():
    """Kafka ``ModernGroup.subscribedTopicNames`` (``maybeUpdateSubscribedTopicNames``): topic name -> members
    subscribing, moved by each member's change and rebuilt by replay; the heartbeat derives the
    subscription metadata from them (``computeSubscribedTopicNames``)."""
    from collections import Counter

    coordinator = _coordinator()
    coordinator.cluster.create_topic("T2", 3)
    a = _join(coordinator, topics=("T1", "T2"))
    b = _join(coordinator)
    group = coordinator.share_groups["sg"]
    assert group.subscribed_topic_names == {"T1": 2, "T2": 1}
    assert set(group.subscription_metadata) == {"T1", "T2"}
    coordinator.share_group_heartbeat(
        ShareGroupHeartbeatRequest(group_id="sg", member_id=b.member_id, member_epoch=2, subscribed_topic_names=["T2"])
    )
    assert group.subscribed_topic_names == {"T1": 1, "T2": 2}
    coordinator.share_group_heartbeat(ShareGroupHeartbeatRequest(group_id="sg", member_id=a.member_id, member_epoch=-1))
    assert group.subscribed_topic_names == {"T2": 1} and set(group.subscription_metadata) == {"T2"}
    from_scratch = Counter(n for m in group.members.values() for n in m.subscribed_topic_names)
    assert group.subscribed_topic_names == from_scratch
    rebuilt = GroupCoordinator.from_log(coordinator.log, cluster=coordinator.cluster, load=False)
    assert rebuilt.share_groups["sg"].subscribed_topic_names == from_scratch


@pytest.mark.parametrize(("fidelity", "bump"), [("kafka", 0), ("kip", 1)])
def test_failover_rearms_sessions_and_bumps_the_epoch_only_under_kip(fidelity, bump):
    """Kafka's ``GroupMetadataManager.onLoaded`` leaves a share group's epoch alone; KIP-932, 'Persistence
    and fail-over': the new coordinator bumps it."""
    config = CoordinatorConfig(fidelity=fidelity)
    coordinator = GroupCoordinator(config=config)
    coordinator.cluster.create_topic("T1", 2)
    joined = _join(coordinator)
    epoch = coordinator.share_groups["sg"].group_epoch
    rebuilt = GroupCoordinator.from_log(coordinator.log, config=config, cluster=coordinator.cluster)
    assert rebuilt.share_groups["sg"].group_epoch == epoch + bump
    assert ("share-session", "sg", joined.member_id) in rebuilt.timers()


# -- the initialize / delete dance with the share coordinator ---------------------------------
def _with_share_coordinator():
    from kip_lab.coordinator.share_group import share_coordinator_rpc
    from kip_lab.share.coordinator import ShareCoordinator

    coordinator = _coordinator()
    share = ShareCoordinator()
    coordinator.share_state_rpc = share_coordinator_rpc(share)
    return coordinator, share


def _beat(coordinator, member_id: str):
    epoch = coordinator.share_groups["sg"].members[member_id].member_epoch
    request = ShareGroupHeartbeatRequest(group_id="sg", member_id=member_id, member_epoch=epoch)
    return coordinator.share_group_heartbeat(request).response


def _state(share, group: str, topic_id: str, partition: int):
    return share.state(group, topic_id, partition)


def test_first_heartbeat_initializes_every_partition_then_records_it_then_assigns():
    # empty first assignment; Initialize(StartOffset -1, StateEpoch = group epoch) for every
    # partition; ShareGroupStatePartitionMetadata once all succeeded; the next heartbeat assigns.
    coordinator, share = _with_share_coordinator()
    topic_id = coordinator.cluster.topic("T1").topic_id
    joined = _join(coordinator)
    assert joined.assignment.topic_partitions == []
    ((request, response),) = coordinator.share_state_calls
    assert type(request).__name__ == "InitializeShareGroupStateRequest"
    assert [(p.partition, p.state_epoch, p.start_offset) for p in request.topics[0].partitions] == [
        (0, 1, -1),
        (1, 1, -1),
    ]
    assert all(p.error_code == Errors.NONE for p in response.results[0].partitions)
    kinds = [type(e.record.key).__name__ for e in coordinator.log][-2:]
    assert kinds == ["ShareGroupStatePartitionMetadataKey", "ShareGroupMetadataKey"]
    group = coordinator.share_groups["sg"]
    assert group.initialized == {topic_id: ("T1", frozenset({0, 1}))}
    assert _state(share, "sg", topic_id, 0).start_offset == -1
    second = coordinator.share_group_heartbeat(
        ShareGroupHeartbeatRequest(group_id="sg", member_id=joined.member_id, member_epoch=joined.member_epoch)
    ).response
    assert second.assignment.topic_partitions[0].partitions == [0, 1]


def test_added_partitions_are_initialized_at_offset_zero_and_then_assigned():
    coordinator, share = _with_share_coordinator()
    topic_id = coordinator.cluster.topic("T1").topic_id
    joined = _join(coordinator)
    coordinator.cluster.add_partitions("T1", 2)
    _beat(coordinator, joined.member_id)
    request, _ = coordinator.share_state_calls[-1]
    assert [(p.partition, p.start_offset) for p in request.topics[0].partitions] == [(2, 0), (3, 0)]
    assert coordinator.share_groups["sg"].initialized[topic_id][1] == frozenset({0, 1, 2, 3})
    assert _state(share, "sg", topic_id, 3).start_offset == 0


def test_a_deleted_topic_has_its_state_deleted_then_leaves_the_record():
    coordinator, share = _with_share_coordinator()
    topic_id = coordinator.cluster.topic("T1").topic_id
    joined = _join(coordinator)
    coordinator.cluster.delete_topic("T1")
    _beat(coordinator, joined.member_id)
    request, _ = coordinator.share_state_calls[-1]
    assert type(request).__name__ == "DeleteShareGroupStateRequest"
    assert coordinator.share_groups["sg"].initialized == {}
    assert _state(share, "sg", topic_id, 0) is None


def test_an_unavailable_share_coordinator_leaves_the_topic_uninitialized_and_the_next_heartbeat_retries():
    from kip_lab.coordinator.share_group import share_coordinator_rpc
    from kip_lab.share.coordinator import ShareCoordinator

    coordinator = _coordinator()
    loading = ShareCoordinator.loading(ShareCoordinator().log)
    coordinator.share_state_rpc = share_coordinator_rpc(loading)
    joined = _join(coordinator)
    assert coordinator.share_groups["sg"].initialized == {}
    coordinator.share_state_rpc = share_coordinator_rpc(ShareCoordinator())
    _beat(coordinator, joined.member_id)
    assert coordinator.share_groups["sg"].initialized != {}


@pytest.mark.parametrize("fidelity", ["kip", "kafka"])
def test_the_kips_assignor_table_through_the_coordinator_with_initialized_partitions(fidelity):
    """The table's steps driven by heartbeats: joins, a partition change, a subscription change, leaves.

    ``kip``: the KIP's table ('The SimpleAssignor'). ``kafka``: Kafka's ``SimpleAssignor.assign``
    through ``GroupMetadataManager.shareGroupHeartbeat``: every member has every partition of its topics.
    """
    coordinator, _ = _with_share_coordinator()
    coordinator.cluster.delete_topic("T1")
    coordinator.cluster.create_topic("T1", 1)
    coordinator.cluster.create_topic("T2", 2)
    coordinator.share_assignor = SimpleAssignor(member_hash=_seed_hash, fidelity=fidelity)
    names = {coordinator.cluster.topic(t).topic_id: t for t in ("T1", "T2")}
    epochs: dict[str, int] = {}

    def beat(member: str, topics=None, leave=False):
        epoch = -1 if leave else epochs.get(member, 0)
        response = coordinator.share_group_heartbeat(
            ShareGroupHeartbeatRequest(
                group_id="sg", member_id=member, member_epoch=epoch, subscribed_topic_names=topics
            )
        ).response
        assert response.error_code == Errors.NONE, response
        epochs[member] = response.member_epoch

    def settle():
        for _ in range(2):  # the dance's epoch bump, then everyone takes the target
            for member in sorted(coordinator.share_groups["sg"].members):
                beat(member)

    def assignments():
        group = coordinator.share_groups["sg"]
        return {
            m: {f"{names[t]}:{p}" for t, parts in member.assigned.items() for p in parts}
            for m, member in group.members.items()
        }

    script = [
        lambda: beat("M1", ["T1"]),
        lambda: beat("M2", ["T1"]),
        lambda: coordinator.cluster.add_partitions("T1", 3),
        lambda: beat("M3", ["T1"]),
        lambda: beat("M4", ["T1"]),
        lambda: [beat(f"M{i}", ["T1"]) for i in range(5, 9)],
        lambda: beat("M1", ["T1", "T2"]),
        lambda: [beat(f"M{i}", leave=True) for i in (1, 3, 4, 5, 6, 7, 8)],
    ]
    for (event, subscriptions, counts, _, expected), step in zip(SEED_TABLE, script, strict=True):
        step()
        settle()
        if fidelity == "kafka":
            expected = {
                m: {f"{t}:{p}" for t in topics for p in range(counts[t])} for m, topics in subscriptions.items()
            }
        assert assignments() == expected, event


def test_a_deletion_interrupted_by_a_coordinator_failover_is_finished_by_the_next_coordinator():
    # the new coordinator sees DeletingTopics and finishes the deletion (retry is safe).
    from kip_lab.coordinator.share_group import share_coordinator_rpc
    from kip_lab.protocol.share_group import DeleteShareGroupOffsetsRequest
    from kip_lab.share.coordinator import ShareCoordinator

    coordinator, share = _with_share_coordinator()
    topic_id = coordinator.cluster.topic("T1").topic_id
    joined = _join(coordinator)
    coordinator.share_group_heartbeat(
        ShareGroupHeartbeatRequest(group_id="sg", member_id=joined.member_id, member_epoch=-1)
    )
    coordinator.share_state_rpc = share_coordinator_rpc(ShareCoordinator.loading(share.log))  # unavailable
    response = coordinator.delete_share_group_offsets(
        DeleteShareGroupOffsetsRequest(group_id="sg", topic_names=["T1"])
    ).response
    assert response.responses[0].error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert set(coordinator.share_groups["sg"].deleting) == {topic_id}
    rebuilt = GroupCoordinator.from_log(coordinator.log, cluster=coordinator.cluster)
    assert set(rebuilt.share_groups["sg"].deleting) == {topic_id}
    rebuilt.share_state_rpc = share_coordinator_rpc(share)
    assert rebuilt.sync_share_state()
    assert rebuilt.share_groups["sg"].deleting == {} and rebuilt.share_groups["sg"].initialized == {}
    assert share.state("sg", topic_id, 0) is None


def test_failover_with_the_dance_rebuilds_the_same_share_groups_at_every_step():
    coordinator, _ = _with_share_coordinator()
    steps = [
        lambda: _join(coordinator),
        lambda: coordinator.cluster.add_partitions("T1", 2),
        lambda: _beat(coordinator, sorted(coordinator.share_groups["sg"].members)[0]),
        lambda: coordinator.cluster.create_topic("T2", 1),
        lambda: _join(coordinator, topics=("T1", "T2")),
    ]
    for step in steps:
        step()
        rebuilt = GroupCoordinator.from_log(coordinator.log, cluster=coordinator.cluster, load=False)
        assert rebuilt.share_state_snapshot() == coordinator.share_state_snapshot()


# -- properties over random runs ----------------------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from property_profile import examples  # noqa: E402

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.sampled_from(["M1", "M2", "M3", "M4"]), st.sampled_from([("T1",), ("T1", "T2")])),
        st.tuples(st.just("beat"), st.sampled_from(["M1", "M2", "M3", "M4"]), st.none()),
        st.tuples(st.just("leave"), st.sampled_from(["M1", "M2", "M3", "M4"]), st.none()),
        st.tuples(st.just("grow"), st.sampled_from(["T1", "T2"]), st.none()),
        st.tuples(st.just("timeout"), st.none(), st.none()),
    ),
    max_size=25,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_any_run_replays_to_the_live_state_and_every_assignable_partition_has_a_member(ops):
    coordinator, _ = _with_share_coordinator()
    coordinator.cluster.create_topic("T2", 2)
    for kind, arg, topics in ops:
        members = coordinator.share_groups["sg"].members if "sg" in coordinator.share_groups else {}
        if kind == "join":
            _join(coordinator, topics=topics, member_id=arg)
        elif kind == "beat" and arg in members:
            _beat(coordinator, arg)
        elif kind == "leave" and arg in members:
            coordinator.share_group_heartbeat(ShareGroupHeartbeatRequest(group_id="sg", member_id=arg, member_epoch=-1))
        elif kind == "grow":
            coordinator.cluster.add_partitions(arg, 1)
        elif kind == "timeout":
            coordinator.advance(coordinator.share_config.session_timeout_ms)
        rebuilt = GroupCoordinator.from_log(coordinator.log, cluster=coordinator.cluster, load=False)
        assert rebuilt.share_state_snapshot() == coordinator.share_state_snapshot()
        group = coordinator.share_groups.get("sg")
        if group is None or not group.members or group.group_epoch != group.assignment_epoch:
            continue
        for name, (topic_id, count) in group.subscription_metadata.items():
            subscribers = [m for m, v in group.members.items() if name in v.subscribed_topic_names]
            assignable = group.initialized.get(topic_id, (name, frozenset()))[1]
            for p in sorted(assignable):
                if p < count and subscribers:
                    assert any(p in group.target.get(m, {}).get(topic_id, ()) for m in subscribers), (name, p)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"group_id": "  ", "member_epoch": 0, "subscribed_topic_names": ["T1"]}, "GroupId can't be empty."),
        (
            {"group_id": "sg", "member_epoch": 0, "subscribed_topic_names": ["T1"], "rack_id": " "},
            "RackId can't be empty.",
        ),
        ({"group_id": "sg", "member_id": " ", "member_epoch": 3}, "MemberId can't be empty."),
        ({"group_id": "sg", "member_epoch": 0}, "SubscribedTopicNames must be set in first request."),
        ({"group_id": "sg", "member_id": "m", "member_epoch": -2}, "MemberEpoch is invalid."),
    ],
)
def test_invalid_share_heartbeats(fields, message):
    """Kafka's ``GroupMetadataManager.throwIfShareGroupHeartbeatRequestIsInvalid``: blank means empty or spaces."""
    response = _coordinator().share_group_heartbeat(ShareGroupHeartbeatRequest(**fields)).response
    assert (response.error_code, response.error_message) == (Errors.INVALID_REQUEST, message)


def test_heartbeats_to_a_missing_group_or_member():
    """Missing groups and members: Kafka's ``GroupMetadataManager.getOrMaybeCreateShareGroup``, ``shareGroupLeave``.

    At 1eb7644349cb a non-zero epoch to a missing group reached ``getOrMaybeCreatePersistedShareGroup``
    (an IllegalStateException, UNKNOWN_SERVER_ERROR); GROUP_ID_NOT_FOUND is what its non-persisted twin
    and the consumer-group path answer.
    """
    coordinator = _coordinator()
    beat = ShareGroupHeartbeatRequest(group_id="nope", member_id="m", member_epoch=3)
    response = coordinator.share_group_heartbeat(beat).response
    assert (response.error_code, response.error_message) == (Errors.GROUP_ID_NOT_FOUND, "Share group nope not found.")
    leave = ShareGroupHeartbeatRequest(group_id="nope", member_id="m", member_epoch=-1)
    response = coordinator.share_group_heartbeat(leave).response
    assert (response.error_code, response.error_message) == (Errors.GROUP_ID_NOT_FOUND, "Group nope not found.")
    _join(coordinator)
    stranger = ShareGroupHeartbeatRequest(group_id="sg", member_id="m", member_epoch=3)
    response = coordinator.share_group_heartbeat(stranger).response
    assert (response.error_code, response.error_message) == (
        Errors.UNKNOWN_MEMBER_ID,
        "Member m is not a member of group sg.",
    )
    assert "nope" not in coordinator.share_groups
