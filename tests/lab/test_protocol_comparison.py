"""Eager, cooperative (KIP-429) and consumer (KIP-848) rebalancing on the same workload, and the
autonomous Online Migration from a classic group to a consumer group (KIP-848, section "Online Migration"
in "Case Studies").

The rolling bounce is the library's: five members on foo (10 partitions), each closed and
restarted in turn, under the three protocols. The KIPs' claims are checked on the metrics the
trace gives: cooperative revokes far fewer partitions than eager; eager's barrier stops every
partition at every rebalance (stops that move nothing), cooperative and KIP-848 do not; and
only the classic protocols make every member rejoin (JoinGroup) for a rebalance.
"""

from __future__ import annotations

import pytest

from kip_lab.assignors.client import RangeAssignor
from kip_lab.clients import ClassicConsumer, Consumer, ConsumerConfig
from kip_lab.coordinator.group import ConsumerGroup
from kip_lab.events import MessageSent
from kip_lab.lab import Lab, LabConfig
from kip_lab.lab.invariants import InvariantViolation
from kip_lab.scenarios import load_library_scenario
from kip_lab.scenarios.runner import run_scenario

RUNS = {
    "eager": "classic_eager_rolling_bounce",
    "cooperative": "classic_cooperative_rolling_bounce",
    "consumer": "rolling_bounce",
}


@pytest.fixture(scope="module")
def results():
    return {protocol: run_scenario(load_library_scenario(name)) for protocol, name in RUNS.items()}


def test_the_three_runs_are_the_same_workload_and_all_settle(results):
    for protocol, result in results.items():
        assert result.stable, protocol
        assert result.metrics["invariant_violations"] == 0, protocol
        causes = [t["cause"] for t in result.metrics["triggers"] if t["cause"].split()[0] in ("close", "restart")]
        assert causes == [f"{kind} {m}" for m in "ABCDE" for kind in ("close", "restart")], protocol


def test_cooperative_revokes_far_fewer_partitions_than_eager(results):
    eager, cooperative = results["eager"].metrics, results["cooperative"].metrics
    # Eager: every member revokes everything at each of the ten rebalances (10 partitions each time).
    assert eager["revocations"] == 100
    # Cooperative: only what changes owner, plus what the closing member hands back.
    assert cooperative["revocations"] < eager["revocations"] / 3
    assert results["consumer"].metrics["revocations"] < eager["revocations"] / 3


def test_only_eager_stops_partitions_that_do_not_move(results):
    """Eager's barrier: partitions stop and come back to the same member. The others never do,
    so members that lose nothing keep fetching throughout."""
    assert results["eager"].metrics["stops_without_move"] > 0
    assert results["cooperative"].metrics["stops_without_move"] == 0
    assert results["consumer"].metrics["stops_without_move"] == 0


def test_kip848_has_no_group_wide_join_barrier(results):
    """Classic rebalances make every member send JoinGroup; KIP-848 members only heartbeat."""

    def sent(protocol: str, api: str) -> list[str]:
        trace = results[protocol].trace
        return [e.body.source for e in trace.of_type(MessageSent) if e.body.api == api and e.actor in "ABCDE"]

    for protocol in ("eager", "cooperative"):
        joins = sent(protocol, "JoinGroup")
        assert set(joins) == set("ABCDE"), protocol
        assert len(joins) > 10 * 4, protocol  # each rebalance: every member present rejoins
    assert sent("consumer", "JoinGroup") == []
    assert set(sent("consumer", "ConsumerGroupHeartbeat")) == set("ABCDE")


# ---------------------------------------------------------------------------- online migration
def test_online_migration_converts_the_group_and_keeps_the_assignment():
    """KIP-848's online migration, run by the Lab's clients: A returns speaking the consumer protocol;
    the group converts; the classic members are served by the consumer group, each reconciled on its
    own; then the rest are bounced onto the new protocol. The assignment survives, nothing is owned twice."""
    lab = Lab(seed=0, config=LabConfig(raise_on_violation=True))
    lab.create_topic("foo", 6)
    for name in "ABC":
        lab.add_consumer(
            name, group_protocol="classic", subscribed_topic_names=["foo"], partition_assignment_strategy=["range"]
        )
    assert lab.run_until_stable()

    def owned() -> dict[str, list[int]]:
        return {n: sorted(p for _, p in c.owned) for n, c in lab.clients.items()}

    before = owned()
    assert before == {"A": [0, 1], "B": [2, 3], "C": [4, 5]}
    generation = lab.coordinator.classic_groups["g"].generation_id

    lab.close("A")
    lab.run(until=lab.now + 100)
    lab.restart("A", config=ConsumerConfig(subscribed_topic_names=["foo"]))
    converted = lab.step_count
    assert lab.run_until_stable()
    group = lab.coordinator.groups["g"]
    assert isinstance(group, ConsumerGroup) and "g" not in lab.coordinator.classic_groups
    assert isinstance(lab.clients["A"], Consumer) and isinstance(lab.clients["B"], ClassicConsumer)
    assert group.group_epoch >= generation  # the conversion starts from the classic generation
    assert owned() == before
    # B and C stay classic members of the consumer group.
    assert {m for m in group.members} >= {lab.clients["B"].member_id, lab.clients["C"].member_id}

    lab.close("B")
    lab.run(until=lab.now + 100)
    lab.restart("B", config=ConsumerConfig(subscribed_topic_names=["foo"]))
    assert lab.run_until_stable()
    assert isinstance(lab.clients["C"], ClassicConsumer)  # C is still classic, reconciled alone
    c_joins = [
        e
        for e in lab.trace.of_type(MessageSent)
        if e.step > converted and e.body.source == "C" and e.body.api == "JoinGroup"
    ]
    assert c_joins  # it rejoined (REBALANCE_IN_PROGRESS) while A never sent a JoinGroup again
    assert not [
        e
        for e in lab.trace.of_type(MessageSent)
        if e.step > converted and e.body.source == "A" and e.body.api == "JoinGroup"
    ]

    lab.close("C")
    lab.run(until=lab.now + 100)
    lab.restart("C", config=ConsumerConfig(subscribed_topic_names=["foo"]))
    assert lab.run_until_stable()
    group = lab.coordinator.groups["g"]
    assert all(isinstance(c, Consumer) for c in lab.clients.values())
    assert owned() == before  # the case study's final state: the assignment of generation 22, kept
    assert all(m.member_epoch == group.group_epoch for m in group.members.values())
    assert lab.invariants.violations == []


# ---------------------------------------------------------------------------- broken clients are caught
def _strict_classic_range_pair() -> Lab:
    """Two classic range consumers of a 4-partition topic, in a Lab that raises on any violation."""
    lab = Lab(seed=0, config=LabConfig(raise_on_violation=True))
    lab.create_topic("t", 4)
    for name in ("C1", "C2"):
        lab.add_consumer(
            name, group_protocol="classic", subscribed_topic_names=["t"], partition_assignment_strategy=["range"]
        )
    return lab


def test_a_leader_that_assigns_a_partition_twice_is_caught(monkeypatch):
    original = RangeAssignor._assign_partitions

    def twice(self, partitions_per_topic, subscriptions):
        final = {m: list(p) for m, p in original(self, partitions_per_topic, subscriptions).items()}
        members = sorted(final)
        if len(members) > 1 and final[members[0]]:
            final[members[1]] = sorted({*final[members[1]], final[members[0]][0]})
        return final

    monkeypatch.setattr(RangeAssignor, "_assign_partitions", twice)
    lab = _strict_classic_range_pair()
    with pytest.raises(InvariantViolation, match="classic-assignment-disjoint"):
        lab.run_until_stable()


def test_a_coordinator_that_hands_every_member_everything_is_caught(monkeypatch):
    """A broken classic coordinator: every SyncGroup answer carries the whole group's assignment."""
    from dataclasses import replace

    from kip_lab.coordinator import GroupCoordinator
    from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment

    original = GroupCoordinator.sync_group

    def everything(self, request, ref=None):
        result = original(self, request, ref=ref)
        group = self.classic_groups.get(request.group_id)
        if group is None:
            return result
        union = sorted(
            {
                tp
                for m in group.members.values()
                if m.assignment
                for tp in ConsumerProtocolAssignment.decode(m.assignment).assigned_partitions
            }
        )
        blob = ConsumerProtocolAssignment(version=3, assigned_partitions=union).encode()

        def widen(response):
            return response if response is None or not union else response.model_copy(update={"assignment": blob})

        deferred = tuple(replace(d, response=widen(d.response)) if d.api == "SyncGroup" else d for d in result.deferred)
        return replace(result, response=widen(result.response), deferred=deferred)

    monkeypatch.setattr(GroupCoordinator, "sync_group", everything)
    lab = _strict_classic_range_pair()
    with pytest.raises(InvariantViolation, match="single-owner"):
        lab.run_until_stable()
