"""The incremental invariant checks give the full checks' verdicts, step for step.

``LabConfig(invariants="incremental")`` (the default) checks only the clients, groups and
members a step touched; ``invariants="full"`` rescans the world at every checked step. Two
Labs, one of each, run the same random script in lockstep — consumers of both protocols in
two groups, faults of every kind, and coordinator bugs switched on part way so that there are
violations to find — and their traces must be identical, violations included.
"""

from __future__ import annotations

import contextlib
from contextlib import ExitStack
from dataclasses import replace
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from property_profile import examples

import kip_lab.coordinator.coordinator as coordinator_module
from kip_lab.coordinator.group import ConsumerGroup
from kip_lab.coordinator.member import ReconciliationState as ServerMemberState
from kip_lab.events import InvariantViolated
from kip_lab.lab import Lab, LabConfig, LatencyModel, LinkConfig
from kip_lab.lab.invariants import InvariantChecker

NAMES = "ABCDEFG"
LINK = LinkConfig(latency=LatencyModel(kind="uniform", low=1, high=30), drop_probability=0.02)


def faults(lab: Lab, name: str) -> dict[str, Any]:
    return {
        "crash": lambda: lab.crash(name),
        "pause": lambda: lab.pause(name),
        "resume": lambda: lab.resume(name),
        "close": lambda: lab.close(name),
        "restart": lambda: lab.restart(name),  # crashes a running member first; answers to the old one are lost
        "partition": lambda: lab.partition_link(name, 20_000),
        "drop": lambda: lab.drop_messages(name, 2),
        "delay": lambda: lab.delay_messages(name, 2, 3_000),
        "subscribe-bar": lambda: lab.change_subscription(name, topics=["foo", "bar"]),
        "add-partitions": lambda: lab.add_partitions("foo", 2),
        "fail-over": lambda: lab.fail_over(),
        "delete-bar": lambda: lab.delete_topic("bar"),
        "seek-back": lambda: lab.seek(lab.step_count // 2),  # a restored checker rebuilds its indexes
        "seek-ahead": lambda: lab.seek(lab.horizon),  # after a seek back: restored from a later snapshot
    }


FAULTS = sorted(faults(None, "A"))  # type: ignore[arg-type]


def _lower_a_member_epoch(real):
    """Every fourth epoch a member is moved to is written one lower (stateless: both Labs see the same bug)."""

    def reconcile(member, target_epoch, target, partition_held, owned_reported):
        updated, trigger = real(member, target_epoch, target, partition_held, owned_reported)
        if trigger is not None and member.member_epoch > 1 and updated.member_epoch % 4 == 0:
            updated = replace(updated, member_epoch=member.member_epoch - 1)
        return updated, trigger

    return reconcile


def _mark_waiting_members_stable(real):
    def reconcile(member, target_epoch, target, partition_held, owned_reported):
        updated, trigger = real(member, target_epoch, target, partition_held, owned_reported)
        if updated.state is ServerMemberState.UNRELEASED_PARTITIONS:
            updated = replace(updated, state=ServerMemberState.STABLE)
        return updated, trigger

    return reconcile


def _forget_some_ownership(real):
    def set_ownership(self, old, new):
        if new is not None and new.assigned and new.member_epoch % 3 == 0:
            return real(self, old, None)
        return real(self, old, new)

    return set_ownership


BUGS = {
    "none": None,
    "lower-member-epoch": (coordinator_module, "reconcile", _lower_a_member_epoch),
    "stable-while-waiting": (coordinator_module, "reconcile", _mark_waiting_members_stable),
    "forget-ownership": (ConsumerGroup, "_set_ownership", _forget_some_ownership),
}


def build(mode: str, seed: int, classic: set[str], second_group: set[str]) -> Lab:
    lab = Lab(seed=seed, config=LabConfig(link=LINK, invariants=mode, snapshot_every=64))
    lab.create_topic("foo", 6)
    lab.create_topic("bar", 3)
    for name in NAMES[:5]:
        settings: dict[str, Any] = {"subscribed_topic_names": ["foo"], "max_poll_interval_ms": 30_000}
        if name in second_group:
            settings["group_id"] = "g2"
        if name in classic:
            settings["group_protocol"] = "classic"
        lab.add_consumer(name, **settings)
    return lab


def violations(lab: Lab) -> list[tuple[int, str, str]]:
    return [(e.step, e.body.invariant, e.body.explanation) for e in lab.trace.of_type(InvariantViolated)]


script = st.lists(
    st.tuples(st.integers(1, 400), st.sampled_from(FAULTS), st.sampled_from(NAMES[:5])), min_size=3, max_size=12
)


# A failover loads group g with partition epochs that differ from its members' ownership. No
# record of g follows for a while, but the full check reports g as soon as any group's ownership
# records are written: the incremental check must re-index every group a new coordinator holds.
FAILOVER_LOADS_A_VIOLATION: dict[str, Any] = {
    "seed": 65531,
    "classic": set(),
    "second_group": {"A", "C"},
    "bug": "forget-ownership",
    "bug_at": 2,
    "steps": [
        (1, "delay", "C"),
        *[(count, "add-partitions", "A") for count in (36, 1, 1, 1, 10, 3, 1)],
        (8, "fail-over", "E"),
    ],
}


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**16),
    classic=st.sets(st.sampled_from(NAMES[:5]), max_size=2),
    second_group=st.sets(st.sampled_from(NAMES[:5]), max_size=2),
    bug=st.sampled_from(sorted(BUGS)),
    bug_at=st.integers(0, 8),
    steps=script,
)
@example(**FAILOVER_LOADS_A_VIOLATION)
def test_incremental_checks_give_the_full_checks_verdicts(seed, classic, second_group, bug, bug_at, steps) -> None:
    """Lockstep runs of both modes: same trace (violations included) after every part of the script.

    The bugs break the coordinator the way the single-invariant tests in ``test_invariants``
    do (Kafka ``CurrentAssignmentBuilder`` and ``ConsumerGroup`` bookkeeping gone wrong), so
    the runs have violations that start, last and stop."""
    full, incremental = (build(mode, seed, classic, second_group) for mode in ("full", "incremental"))
    with ExitStack() as patches:
        for index, (count, fault, name) in enumerate(steps):
            if index == bug_at and BUGS[bug] is not None:
                owner, attribute, breaker = BUGS[bug]
                patches.enter_context(mock.patch.object(owner, attribute, breaker(getattr(owner, attribute))))
            for lab in (full, incremental):
                lab.run(steps=count)
                with contextlib.suppress(KeyError, ValueError):  # e.g. deleting a topic twice: refused in both
                    faults(lab, name)[fault]()
            assert incremental.step_count == full.step_count
            assert [e.kind for e in incremental.trace] == [e.kind for e in full.trace]  # the same run
            assert violations(incremental) == violations(full)
        for lab in (full, incremental):
            lab.run(until=lab.now + 60_000)
    assert violations(incremental) == violations(full)
    assert [e.kind for e in incremental.trace] == [e.kind for e in full.trace]
    assert incremental.invariants.ownership_checks == full.invariants.ownership_checks


def test_the_bugs_make_violations_to_compare() -> None:
    """The property test is only as strong as its violations: each bug makes the checks fire."""
    found = {}
    for bug in ("lower-member-epoch", "stable-while-waiting", "forget-ownership"):
        owner, attribute, breaker = BUGS[bug]
        lab = build("incremental", 3, set(), set())
        with mock.patch.object(owner, attribute, breaker(getattr(owner, attribute))):
            lab.run(steps=300)
            lab.crash("B")
            lab.add_consumer("F", subscribed_topic_names=["foo"])
            lab.run(until=lab.now + 60_000)
        found[bug] = {name for _, name, _ in violations(lab)}
    assert "epochs-never-go-back" in found["lower-member-epoch"]
    assert "stable-means-converged" in found["stable-while-waiting"]
    assert "partition-epochs-match-ownership" in found["forget-ownership"]


def test_a_lasting_violation_is_reported_at_every_checked_step_in_both_modes() -> None:
    """Two clients owning one partition stay a violation until one lets go: both modes repeat it."""
    labs = [build(mode, 1, set(), set()) for mode in ("full", "incremental")]
    for lab in labs:
        assert lab.run_until_stable()
        a, b = lab.clients["A"], lab.clients["B"]
        stolen = next(iter(b.owned))
        a.owned.add(stolen)  # A believes it owns one of B's partitions too
        lab.invariants.action_applied(None)  # changed from outside a step: tell the checks
        lab.crash("C")  # a step that changes ownership, so the checks run
        lab.run(until=lab.now + 50_000)
    full, incremental = (violations(lab) for lab in labs)
    assert full == incremental
    assert len({step for step, name, _ in full if name == "single-owner"}) > 1


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="incremental"):
        InvariantChecker(mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invariants"):
        LabConfig(invariants="sometimes")
