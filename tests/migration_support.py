"""Drive a coordinator through online migration: a classic group of static members a, b, c
(instance ids A, B, C) at a given generation, then explicit classic and consumer-protocol
requests. Rows are read the KIP's way, by instance id, with each member's protocol and, for
classic members, its classic state."""

from __future__ import annotations

from golden_support import GROUP

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.coordinator.bootstrap import stable_classic_group_log
from kip_lab.coordinator.view import member_cell, states_after_batches
from kip_lab.protocol.classic_group import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    SyncGroupRequest,
)
from kip_lab.protocol.common import TopicPartitions
from kip_lab.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription

INSTANCES = ("A", "B", "C")
START = {"a": {"foo": [0, 1]}, "b": {"foo": [3, 4]}, "c": {"foo": [2, 5]}}


class MigrationCase:
    def __init__(
        self, generation: int = 22, start=START, session_timeout_ms: int = 45_000, version: int = 3, **config
    ) -> None:
        self.cluster = ClusterMetadata()
        self.foo = self.cluster.create_topic("foo", 6)
        self.config = CoordinatorConfig(**config)
        log = stable_classic_group_log(
            self.cluster,
            GROUP,
            generation,
            start,
            instance_ids={m: m.upper() for m in start},
            session_timeout_ms=session_timeout_ms,
            consumer_protocol_version=version,
        )
        self.gc = GroupCoordinator.from_log(log, self.config, self.cluster)

    # -- requests -------------------------------------------------------------------
    def consumer_join(self, instance: str | None, member_id: str | None = None):
        return self.gc.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest(
                group_id=GROUP,
                member_id=member_id or instance,
                member_epoch=0,
                instance_id=instance,
                rebalance_timeout_ms=60_000,
                subscribed_topic_names=["foo"],
                topic_partitions=[],
            )
        )

    def consumer_heartbeat(self, member_id: str, owned: list[int] | None = None, epoch: int | None = None):
        member = self.gc.groups[GROUP].members[member_id]
        return self.gc.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest(
                group_id=GROUP,
                member_id=member_id,
                member_epoch=member.member_epoch if epoch is None else epoch,
                instance_id=member.instance_id,
                topic_partitions=None if owned is None else [TopicPartitions(topic_id=self.foo, partitions=owned)],
            )
        )

    def classic_heartbeat(self, member_id: str, generation: int, instance: str | None = "C"):
        return self.gc.heartbeat(
            HeartbeatRequest(group_id=GROUP, generation_id=generation, member_id=member_id, group_instance_id=instance)
        )

    def classic_join(
        self, member_id: str, owned: list[int], generation: int, instance: str | None = "C", version: int = 3
    ):
        subscription = ConsumerProtocolSubscription(
            version=version, topics=["foo"], owned_partitions=[("foo", p) for p in owned], generation_id=generation
        )
        return self.gc.join_group(
            JoinGroupRequest(
                group_id=GROUP,
                session_timeout_ms=45_000,
                rebalance_timeout_ms=300_000,
                member_id=member_id,
                group_instance_id=instance,
                protocols=[JoinGroupRequestProtocol(name="range", metadata=subscription.encode())],
            ),
            ref=f"{instance or member_id}-join",
        )

    def classic_sync_result(self, member_id: str, generation: int, instance: str | None = "C"):
        return self.gc.sync_group(
            SyncGroupRequest(
                group_id=GROUP,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance,
                protocol_type="consumer",
                protocol_name="range",
            ),
            ref=f"{instance or member_id}-sync",
        )

    def classic_sync(self, member_id: str, generation: int, instance: str | None = "C") -> list[int]:
        result = self.classic_sync_result(member_id, generation, instance)
        assert result.response.error_code.name == "NONE"
        assert result.records == []  # SyncGroup only reads the assignment
        return [p for _, p in ConsumerProtocolAssignment.decode(result.response.assignment).assigned_partitions]

    # -- views ----------------------------------------------------------------------
    def row(self, gc: GroupCoordinator | None = None) -> tuple:
        """(GE, TE, target by instance, cells by instance, group state), cells with protocol and classic state."""
        gc = gc or self.gc
        group = gc.groups[GROUP]
        by_instance = {m.instance_id: m for m in group.members.values()}
        target = {
            instance: [p for parts in group.target.get(m.member_id, {}).values() for p in parts]
            for instance, m in sorted(by_instance.items())
            if m.member_id in group.target
        }
        cells = {}
        for instance in INSTANCES:
            member = by_instance.get(instance)
            if member is None:
                cells[instance] = "-"
                continue
            cell = member_cell(group, member.member_id)
            state = gc.classic_member_state(GROUP, member.member_id)
            cells[instance] = f"classic {cell} {state}" if state else f"new {cell}"
        return group.group_epoch, group.assignment_epoch, target, cells, group.state.value

    def per_batch(self, result) -> list[tuple]:
        return [self.row(gc) for gc in states_after_batches(self.gc, result)]

    def assert_rebuild_equals_live(self) -> None:
        live = self.gc.state_snapshot()
        log = self.gc.log.truncated(self.gc.log.batch_count)
        replayed = GroupCoordinator.from_log(log, self.config, self.cluster, load=False).state_snapshot()
        assert {k: v for k, v in replayed.items() if k != "timers"} == {k: v for k, v in live.items() if k != "timers"}
