"""The assignor's input kept by the group, entry by entry, as records replay.

Kafka's ``TargetAssignmentBuilder.build`` hands the assignor every member's subscription and
previous target; its ``ConsumerGroup`` keeps the members' subscriptions as records are replayed
rather than recomputing them per target. Here ``ConsumerGroup.assignor_inputs`` keeps each
member's ``MemberSubscription``: a target computation reuses the entries of the members it sees
unchanged and builds new ones only for the rest, and the entries are rebuilt from the log alone.
"""

from __future__ import annotations

from kip_lab.assignors import AssignmentSpec, GroupAssignment, UniformAssignor
from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import ConsumerGroup, CoordinatorConfig, GroupCoordinator
from kip_lab.coordinator.group import assignor_input
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest


class RecordingAssignor:
    """The uniform assignor, keeping every spec it is handed."""

    name = "uniform"

    def __init__(self) -> None:
        self.specs: list[AssignmentSpec] = []

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        self.specs.append(spec)
        return UniformAssignor().assign(spec)


def join(gc: GroupCoordinator, member_id: str, instance_id: str | None = None, **subscription) -> None:
    response = gc.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            group_id="g",
            member_id=member_id,
            member_epoch=0,
            instance_id=instance_id,
            rebalance_timeout_ms=60_000,
            topic_partitions=[],
            **subscription,
        )
    ).response
    assert response.error_code == 0, response.error_message


def rebuilt_from_scratch(group: ConsumerGroup) -> dict:
    metadata = group.subscription_metadata
    return {m: assignor_input(member, metadata, group.target.get(m, {})) for m, member in group.members.items()}


def test_a_target_computation_reuses_the_entries_of_unchanged_members() -> None:
    """Kafka ``TargetAssignmentBuilder.build``: the members a heartbeat did not change keep their spec
    (here: the very entry the group holds); the joining member's is built for this computation."""
    cluster = ClusterMetadata()
    cluster.create_topic("foo", 6)
    assignor = RecordingAssignor()
    gc = GroupCoordinator(CoordinatorConfig(), cluster, assignors=[assignor])
    for member_id in ("A", "B", "C"):
        join(gc, member_id, subscribed_topic_names=["foo"])
    group = gc.groups["g"]
    kept = dict(group.assignor_inputs)
    join(gc, "D", subscribed_topic_names=["foo"])
    spec = assignor.specs[-1]
    assert list(spec.members) == ["A", "B", "C", "D"]
    assert all(spec.members[m] is kept[m] for m in ("A", "B", "C"))
    assert spec.members["D"] == assignor_input(group.members["D"], group.subscription_metadata, {})
    assert group.assignor_inputs == rebuilt_from_scratch(group)


def test_the_entries_follow_subscriptions_metadata_and_targets_and_survive_failover() -> None:
    """Kafka ``ConsumerGroup.updateMember`` / ``removeMember`` and the partition metadata's replay: a
    subscription change, a regex matching a new topic, a static member's replacement and a departure
    each leave every entry as a rebuild from scratch would make it; ``from_log`` rebuilds the same
    (Kafka ``GroupMetadataManager.replay``)."""
    cluster = ClusterMetadata()
    cluster.create_topic("foo", 4)
    cluster.create_topic("bar", 4)
    gc = GroupCoordinator(CoordinatorConfig(), cluster)
    join(gc, "A", subscribed_topic_names=["foo"])
    join(gc, "B", subscribed_topic_regex="ba.*")
    join(gc, "S1", instance_id="static", subscribed_topic_names=["foo", "bar"])
    group = gc.groups["g"]
    assert group.assignor_inputs == rebuilt_from_scratch(group)

    cluster.create_topic("baz", 2)  # B's regex matches it: new partition metadata
    gc.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(group_id="g", member_id="A", member_epoch=group.members["A"].member_epoch)
    )
    assert "baz" in group.subscription_metadata
    baz = group.subscription_metadata["baz"][0]
    assert baz in group.assignor_inputs["B"].subscribed_topic_ids
    assert group.assignor_inputs == rebuilt_from_scratch(group)

    gc.consumer_group_heartbeat(  # a subscription change
        ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="A", member_epoch=group.members["A"].member_epoch, subscribed_topic_names=["bar"]
        )
    )
    gc.consumer_group_heartbeat(  # the static member leaves for a while, then a new process takes its place
        ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="S1", instance_id="static", member_epoch=-2, rebalance_timeout_ms=60_000
        )
    )
    join(gc, "S2", instance_id="static", subscribed_topic_names=["foo", "bar"])
    gc.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(group_id="g", member_id="B", member_epoch=-1))
    assert sorted(group.members) == ["A", "S2"]
    assert group.assignor_inputs == rebuilt_from_scratch(group)

    log = gc.log.truncated(gc.log.batch_count)
    replayed = GroupCoordinator.from_log(log, CoordinatorConfig(), cluster, load=False).groups["g"]
    assert replayed.assignor_inputs == group.assignor_inputs
    # With the load duties, which compute the target the log left pending:
    loaded = GroupCoordinator.from_log(log, CoordinatorConfig(), cluster).groups["g"]
    assert loaded.assignor_inputs == rebuilt_from_scratch(loaded)
