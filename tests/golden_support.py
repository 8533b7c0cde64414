"""Drive the coordinator through the KIP's case studies and read state the KIP's way
(member cells such as ``e2 [0,1] p[2]``: see ``kip_lab.coordinator.view``)."""

from __future__ import annotations

from dataclasses import dataclass

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, CoordinatorResult, GroupCoordinator
from kip_lab.coordinator.bootstrap import stable_group_log
from kip_lab.coordinator.view import member_cell, states_after_batches
from kip_lab.protocol import ConsumerGroupHeartbeatRequest, TopicPartitions

GROUP = "g"


@dataclass
class Snapshot:
    group_epoch: int
    target_epoch: int
    target: dict[str, list[int]]
    members: dict[str, str]
    state: str


def snapshot(gc: GroupCoordinator, members: tuple[str, ...]) -> Snapshot:
    group = gc.groups[GROUP]
    target = {m: [p for parts in t.values() for p in parts] for m, t in sorted(group.target.items())}
    return Snapshot(
        group.group_epoch,
        group.assignment_epoch,
        target,
        {m: member_cell(group, m) for m in members},
        group.state.value,
    )


class Case:
    """One case study: a cluster with topic ``foo`` and a coordinator, driven by explicit heartbeats."""

    members: tuple[str, ...] = ("A", "B", "C")

    def __init__(self, partitions: int, start: dict[str, list[int]] | None = None, epoch: int = 0) -> None:
        self.cluster = ClusterMetadata()
        self.foo = self.cluster.create_topic("foo", partitions)
        self.config = CoordinatorConfig()
        if start is None:
            self.gc = GroupCoordinator(self.config, self.cluster)
        else:
            log = stable_group_log(self.cluster, GROUP, epoch, {m: {"foo": p} for m, p in start.items()})
            self.gc = GroupCoordinator.from_log(log, self.config, self.cluster)

    def join(self, member_id: str) -> CoordinatorResult:
        return self.gc.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest(
                group_id=GROUP,
                member_id=member_id,
                member_epoch=0,
                rebalance_timeout_ms=60_000,
                subscribed_topic_names=["foo"],
                topic_partitions=[],
            )
        )

    def heartbeat(self, member_id: str, owned: list[int] | None = None) -> CoordinatorResult:
        """A heartbeat at the member's current epoch, reporting ``owned`` (None: unchanged)."""
        epoch = self.gc.groups[GROUP].members[member_id].member_epoch
        topic_partitions = None if owned is None else [TopicPartitions(topic_id=self.foo, partitions=owned)]
        return self.gc.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest(
                group_id=GROUP, member_id=member_id, member_epoch=epoch, topic_partitions=topic_partitions
            )
        )

    def now(self) -> Snapshot:
        return snapshot(self.gc, self.members)

    def per_batch(self, result: CoordinatorResult) -> list[Snapshot]:
        """The state after each batch ``result`` wrote: the KIP's intermediate snapshots."""
        return [snapshot(gc, self.members) for gc in states_after_batches(self.gc, result)]

    def assert_rebuild_equals_live(self) -> None:
        """Failover at this instant reproduces the live coordinator (acceptance criterion)."""
        live = self.gc.state_snapshot()
        replayed = GroupCoordinator.from_log(
            self.gc.log.truncated(self.gc.log.batch_count), self.config, self.cluster, load=False
        ).state_snapshot()
        assert {k: v for k, v in replayed.items() if k != "timers"} == {k: v for k, v in live.items() if k != "timers"}
        loaded = GroupCoordinator.from_log(self.gc.log.truncated(self.gc.log.batch_count), self.config, self.cluster)
        if not any(r.batches for r in loaded.load_results):
            assert loaded.state_snapshot() == live  # timers included: same timers armed


def response_view(result: CoordinatorResult) -> tuple:
    """(error, member epoch, usable partitions, pending partitions) — or None for no assignment."""
    r = result.response
    if r.assignment is None:
        return (r.error_code.name, r.member_epoch, None, None)
    assigned = sorted(p for tp in r.assignment.assigned_topic_partitions for p in tp.partitions)
    pending = sorted(p for tp in r.assignment.pending_topic_partitions for p in tp.partitions)
    return (r.error_code.name, r.member_epoch, assigned, pending)


def record_names(result: CoordinatorResult) -> list[str]:
    """Record types written, ``~`` marking a tombstone, with the member where there is one."""
    out = []
    for record in result.records:
        name = type(record.key).__name__.removeprefix("ConsumerGroup").removesuffix("Key")
        member = getattr(record.key, "member_id", None)
        out.append(("~" if record.value is None else "") + name + (f"({member})" if member else ""))
    return out
