"""Shared helpers for the KIP-848 coordinator unit tests.

``Harness`` wraps one ``GroupCoordinator`` on a small cluster (``foo`` with 6 partitions,
``bar`` with 3) and speaks in topic *names* so tests read like the KIP's examples, while
every request still carries topic ids as the protocol requires.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from kip_lab.cluster import ClusterMetadata
from kip_lab.coordinator import CoordinatorConfig, CoordinatorResult, GroupCoordinator
from kip_lab.protocol import ConsumerGroupHeartbeatRequest, TopicPartitions

# The tests live in folders by kind (see tests/README.md); the helper modules they share
# (golden_support, lab_support, sim_clients, ...) stay here, importable from every folder.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

import property_profile  # noqa: F401  (Hypothesis' profile for every test: default, ci or long)

GROUP = "g"
REBALANCE_TIMEOUT_MS = 30_000


def record_kinds(result: CoordinatorResult) -> list[str]:
    """The record key types a result wrote, in log order."""
    return [type(r.key).__name__ for r in result.records]


def batch_kinds(result: CoordinatorResult) -> list[list[str]]:
    """The record key types per atomic batch."""
    return [[type(r.key).__name__ for r in batch] for batch in result.batches]


def tombstones(result: CoordinatorResult) -> list[tuple[str, str | None]]:
    """(key type, member id) of every tombstone a result wrote, in log order."""
    return [(type(r.key).__name__, getattr(r.key, "member_id", None)) for r in result.records if r.value is None]


class Harness:
    """One coordinator, one cluster, and name-based shortcuts for heartbeats."""

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        topics: Sequence[tuple[str, int]] = (("foo", 6), ("bar", 3)),
        assignors: Sequence[Any] | None = None,
        seed: int = 0,
    ) -> None:
        self.cluster = ClusterMetadata()
        for name, partitions in topics:
            self.cluster.create_topic(name, partitions)
        self.gc = GroupCoordinator(config or CoordinatorConfig(), self.cluster, assignors=assignors, seed=seed)

    # -- names <-> ids ------------------------------------------------------------------
    def tid(self, name: str) -> str:
        topic_id = self.cluster.topic_id(name)
        assert topic_id is not None, f"no topic {name}"
        return topic_id

    def tps(self, assignment: Mapping[str, Iterable[int]]) -> list[TopicPartitions]:
        """{"foo": [0, 1]} -> the wire's TopicPartitions (by topic id)."""
        return [TopicPartitions(topic_id=self.tid(n), partitions=sorted(p)) for n, p in sorted(assignment.items())]

    def by_name(self, items: Iterable[TopicPartitions] | None) -> dict[str, list[int]]:
        """TopicPartitions (by id) -> {"foo": [0, 1]}; unknown ids keep their id."""
        out: dict[str, list[int]] = {}
        for item in items or ():
            topic = self.cluster.topic_by_id(item.topic_id)
            name = topic.name if topic else item.topic_id
            out[name] = sorted(set(out.get(name, [])) | set(item.partitions))
        return {n: p for n, p in sorted(out.items()) if p}

    def assigned(self, result: CoordinatorResult) -> dict[str, list[int]] | None:
        assignment = result.response.assignment
        return None if assignment is None else self.by_name(assignment.assigned_topic_partitions)

    def pending(self, result: CoordinatorResult) -> dict[str, list[int]] | None:
        assignment = result.response.assignment
        return None if assignment is None else self.by_name(assignment.pending_topic_partitions)

    # -- requests -----------------------------------------------------------------------
    def heartbeat(self, member_id: str, member_epoch: int, *, group_id: str = GROUP, **fields: Any):
        request = ConsumerGroupHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=member_epoch, **fields
        )
        return self.gc.consumer_group_heartbeat(request)

    def join(
        self,
        member_id: str = "",
        names: Sequence[str] | None = ("foo",),
        *,
        rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS,
        **fields: Any,
    ):
        if names is not None:
            fields["subscribed_topic_names"] = list(names)
        fields.setdefault("topic_partitions", [])  # a join owns nothing
        return self.heartbeat(member_id, 0, rebalance_timeout_ms=rebalance_timeout_ms, **fields)

    def ack(self, member_id: str, **fields: Any):
        """Heartbeat at the member's epoch reporting exactly what it may use (acknowledges revocations)."""
        member = self.member(member_id)
        owned = [TopicPartitions(topic_id=t, partitions=sorted(p)) for t, p in sorted(member.assigned.items()) if p]
        return self.heartbeat(member_id, member.member_epoch, topic_partitions=owned, **fields)

    def settle(self, max_rounds: int = 8) -> None:
        """Every member acknowledges until the group is Stable."""
        for _ in range(max_rounds):
            if self.group.state.value == "Stable":
                return
            for member_id in sorted(self.group.members):
                response = self.ack(member_id).response
                assert response.error_code == 0, response
        assert self.group.state.value == "Stable", self.group.state

    # -- state --------------------------------------------------------------------------
    @property
    def group(self):
        return self.gc.groups[GROUP]

    def member(self, member_id: str):
        return self.group.members[member_id]

    def epoch(self) -> int:
        return self.group.group_epoch

    def target(self, member_id: str) -> dict[str, list[int]]:
        return {
            self.cluster.topic_by_id(t).name if self.cluster.topic_by_id(t) else t: sorted(p)
            for t, p in sorted(self.group.target.get(member_id, {}).items())
        }

    def owns(self, member_id: str) -> dict[str, list[int]]:
        return self.by_name(
            TopicPartitions(topic_id=t, partitions=sorted(p)) for t, p in self.member(member_id).assigned.items()
        )

    def snapshot(self) -> dict[str, Any]:
        return self.gc.state_snapshot()

    def assert_replays(self) -> None:
        """Failover from a copy of the log rebuilds exactly this coordinator's state.

        Call it where the load duties have nothing to do (no pending server-side target,
        no unseen metadata change); otherwise they rightly write records and move on.
        """
        log = self.gc.log.truncated(self.gc.log.batch_count)
        reloaded = GroupCoordinator.from_log(log, self.gc.config, self.cluster)
        assert [r.records for r in reloaded.load_results if r.records] == []
        assert reloaded.state_snapshot() == self.gc.state_snapshot()


@pytest.fixture
def h() -> Harness:
    return Harness()


@pytest.fixture
def kip() -> Harness:
    """A coordinator under the ``kip`` profile (the KIP text's readings where Kafka departs from them)."""
    return Harness(CoordinatorConfig(fidelity="kip"))


@pytest.fixture
def make_harness():
    return Harness
