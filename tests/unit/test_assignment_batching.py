"""Assignment batching (Kafka 4.3, KIP-1263): a group's target at most once per assignment interval.

``CoordinatorConfig.assignment_interval_ms`` is ``group.consumer.assignment.interval.ms``. A
join or subscription change still bumps the group epoch at once; the new target waits until
the interval has passed since the group's last one, and members are told the last target, at
its epoch, meanwhile. Classic members of a mixed group are sent back to JoinGroup only when a
newer target can be had.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator, GroupState
from kip_lab.events import HandlerResult
from kip_lab.lab import Lab, LabConfig
from kip_lab.lab.scaling import join_with_and_without_batching
from kip_lab.pipeline.spec import load_sweep
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kip_lab.scenarios.model import Scenario


def test_the_interval_has_kafkas_bounds_and_is_off_by_default() -> None:
    """Kafka ``GroupCoordinatorConfig``: min 0, max 15,000 ms; the interval must lie between them."""
    config = CoordinatorConfig()
    assert (config.assignment_interval_ms, config.min_assignment_interval_ms, config.max_assignment_interval_ms) == (
        0,
        0,
        15_000,
    )
    assert CoordinatorConfig(assignment_interval_ms=1_000).assignment_interval_ms == 1_000
    with pytest.raises(ValidationError, match=r"assignment_interval_ms=20000 must lie in \[0, 15000\]"):
        CoordinatorConfig(assignment_interval_ms=20_000)
    with pytest.raises(ValidationError, match=r"assignment_interval_ms=500 must lie in \[1000, 15000\]"):
        CoordinatorConfig(assignment_interval_ms=500, min_assignment_interval_ms=1_000)
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        CoordinatorConfig(assignment_interval_ms=-1)


def join(gc: GroupCoordinator, member_id: str):
    return gc.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            group_id="g",
            member_id=member_id,
            member_epoch=0,
            rebalance_timeout_ms=60_000,
            subscribed_topic_names=["foo"],
            topic_partitions=[],
        )
    )


def heartbeat(gc: GroupCoordinator, member_id: str):
    member = gc.groups["g"].members[member_id]
    return gc.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(group_id="g", member_id=member_id, member_epoch=member.member_epoch)
    )


def record_types(result) -> list[str]:
    return [type(r.key).__name__.removeprefix("ConsumerGroup").removesuffix("Key") for r in result.records]


def test_a_join_bumps_the_epoch_at_once_and_the_target_follows_after_the_interval() -> None:
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat`` with batching (KAFKA-20291): the group
    epoch is bumped by the join; the target is computed by the first heartbeat once
    ``assignment.interval.ms`` has passed since the last computation; meanwhile the joiner is given
    the last target (nothing) at the assignment epoch."""
    cluster = ClusterMetadata()
    cluster.create_topic("foo", 4)
    gc = GroupCoordinator(CoordinatorConfig(assignment_interval_ms=1_000), cluster)
    first = join(gc, "A")
    assert "TargetAssignmentMetadata" in record_types(first)  # a group's first target: at once
    assert first.response.member_epoch == 1
    gc.advance(100)
    second = join(gc, "B")
    group = gc.groups["g"]
    assert "Metadata" in record_types(second) and "TargetAssignmentMetadata" not in record_types(second)
    assert (group.group_epoch, group.assignment_epoch, group.state) == (2, 1, GroupState.ASSIGNING)
    assert second.response.member_epoch == 1 and second.response.assignment.assigned_topic_partitions == []
    gc.advance(800)  # 900 ms after the first target: still held back
    assert "TargetAssignmentMetadata" not in record_types(heartbeat(gc, "A"))
    assert gc.groups["g"].assignment_epoch == 1
    gc.advance(100)  # 1,000 ms: due
    due = heartbeat(gc, "A")
    assert "TargetAssignmentMetadata" in record_types(due)
    assert gc.groups["g"].assignment_epoch == 2
    assert sorted(len(parts) for t in gc.groups["g"].target.values() for parts in t.values()) == [2, 2]


def test_with_the_interval_at_zero_every_bump_computes_at_once() -> None:
    """Kafka before 4.3, and 4.3 with ``group.consumer.assignment.interval.ms=0``."""
    cluster = ClusterMetadata()
    cluster.create_topic("foo", 4)
    gc = GroupCoordinator(CoordinatorConfig(), cluster)
    join(gc, "A")
    assert "TargetAssignmentMetadata" in record_types(join(gc, "B"))
    assert gc.groups["g"].assignment_epoch == gc.groups["g"].group_epoch == 2


def test_a_mixed_group_with_batching_settles_with_every_invariant_held() -> None:
    """Classic members in a consumer group (online migration) under batching: they rejoin for the
    targets that exist, and the run ends stable (Kafka ``GroupMetadataManager``, KAFKA-20272)."""
    lab = Lab(seed=3, config=LabConfig(coordinator=CoordinatorConfig(assignment_interval_ms=1_000)))
    lab.create_topic("foo", 12)
    for name in "ABCDEF":
        settings = {"group_protocol": "classic"} if name in "AB" else {}
        lab.add_consumer(name, subscribed_topic_names=["foo"], **settings)
    assert lab.run_until_stable()
    lab.add_consumer("G", subscribed_topic_names=["foo"])
    lab.crash("C")
    assert lab.run_until_stable()
    assert lab.invariants.violations == []
    owned = sorted(tp for c in lab.clients.values() if c.alive for tp in c.owned)
    assert len(owned) == 12 and len(set(owned)) == 12


def test_a_lab_group_joins_with_a_handful_of_targets_instead_of_one_per_member() -> None:
    """The reason for batching: 60 members joining compute two or three targets, not 60, and the
    run still ends stable with every invariant held."""
    frame = join_with_and_without_batching(members=60, partitions=300, interval_ms=1_000)
    by_interval = {row["assignment_interval_ms"]: row for row in frame.to_dict("records")}
    assert by_interval[0]["targets_computed"] == 60
    assert by_interval[1_000]["targets_computed"] <= 3
    assert all(row["stable"] and row["violations"] == 0 for row in by_interval.values())
    assert by_interval[1_000]["time_to_stable_ms"] > by_interval[0]["time_to_stable_ms"]


def test_the_interval_is_set_from_a_scenario_file() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "batched",
            "lab": {"coordinator": {"assignment_interval_ms": 1_000}},
            "topics": [{"name": "foo", "partitions": 6}],
            "members": {"A": {"subscribed_topic_names": ["foo"]}},
        }
    )
    assert scenario.lab.coordinator.assignment_interval_ms == 1_000
    with pytest.raises(ValidationError, match="assignment_interval_ms"):
        Scenario.model_validate(
            {
                "name": "too-long",
                "lab": {"coordinator": {"assignment_interval_ms": 60_000}},
                "topics": [{"name": "foo", "partitions": 6}],
                "members": {"A": {"subscribed_topic_names": ["foo"]}},
            }
        )


def test_a_sweep_grid_crosses_the_interval() -> None:
    spec = load_sweep(
        {"name": "batching", "scenario": "basic", "grid": {"lab.coordinator.assignment_interval_ms": [0, 1_000]}}
    )
    intervals = [spec.scenario_for(point, 0).lab.coordinator.assignment_interval_ms for point in range(2)]
    assert intervals == [0, 1_000]


def test_the_lab_takes_the_interval_from_its_config() -> None:
    lab = Lab(config=LabConfig(coordinator=CoordinatorConfig(assignment_interval_ms=500)))
    assert lab.coordinator.config.assignment_interval_ms == 500


def test_a_share_group_batches_its_targets_too() -> None:
    """Kafka ``GroupMetadataManager.shareGroupHeartbeat`` with ``group.share.assignment.interval.ms``
    (KAFKA-20291 [2/3]): share consumers joining together share a handful of targets."""
    targets = {}
    for interval in (0, 1_000):
        config = LabConfig(coordinator=CoordinatorConfig(share_assignment_interval_ms=interval))
        lab = Lab(seed=2, config=config)
        lab.create_topic("orders", 8)
        for i in range(8):
            lab.add_share_consumer(f"s{i}", group_id="queue", subscribed_topic_names=["orders"])
        assert lab.run_until_stable()
        assert lab.invariants.violations == []
        group = lab.coordinator.share_groups["queue"]
        assert group.assignment_epoch == group.group_epoch
        targets[interval] = sum(
            1
            for e in lab.trace.of_type(HandlerResult)
            if any(r["key"]["type"] == "ShareGroupTargetAssignmentMetadataKey" for r in e.body.records)
        )
    assert targets[0] == 8
    assert targets[1_000] < targets[0]
    with pytest.raises(ValidationError, match=r"share_assignment_interval_ms=16000 must lie in \[0, 15000\]"):
        CoordinatorConfig(share_assignment_interval_ms=16_000)
