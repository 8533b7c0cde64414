"""The classic consumer in the Lab: KIP-429's rebalance scenarios, step by step.

Each scenario runs classic consumers against the Lab's classic group coordinator and checks
each member's sub-trace: the callbacks in order with their partitions, what each JoinGroup
claimed, the leader's sets (withheld, final), the generations, and the invariants.
Generation numbers are relative.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from kip_lab.assignors.client import CooperativeStickyAssignor, RebalanceProtocol
from kip_lab.clients import CLASSIC_MEMBER_MACHINE, CallbackConfig, ClassicConsumerConfig
from kip_lab.clients import classic_consumer as cc
from kip_lab.coordinator import CoordinatorConfig
from kip_lab.events import (
    AssignmentChanged,
    CallbackCompleted,
    CallbackInvoked,
    MessageDelivered,
    MessageDropped,
    MessageSent,
    Note,
    StateTransition,
)
from kip_lab.lab import Lab, LabConfig
from kip_lab.lab.invariants import InvariantViolation
from kip_lab.lab.metrics import compute_metrics
from kip_lab.lab.trace import TraceEvent

EAGER = ["roundrobin"]
COOPERATIVE = ["cooperative-sticky"]


# ---------------------------------------------------------------------------- helpers
def add(lab: Lab, name: str, strategy: list[str], topics: list[str], **settings) -> None:
    lab.add_consumer(
        name,
        group_protocol="classic",
        subscribed_topic_names=topics,
        partition_assignment_strategy=strategy,
        **settings,
    )


def stable(lab: Lab, timeout_ms: int = 120_000) -> int:
    """Run until stable; returns the step reached."""
    assert lab.run_until_stable(timeout_ms=timeout_ms)
    return lab.step_count


def callbacks(lab: Lab, member: str, after: int = 0) -> list[tuple[str, list[str]]]:
    return [
        (e.body.callback, list(e.body.partitions))
        for e in lab.trace.of_type(CallbackInvoked)
        if e.step > after and e.actor == member
    ]


def leader_views(lab: Lab, after: int = 0) -> list[dict]:
    """The leader's sets per generation, with member ids replaced by the Lab's member names."""
    names = {c.member_id: n for n, c in lab.clients.items()}
    views = []
    for e in lab.trace.of_type(Note):
        if e.step > after and "leader" in e.body.details:
            view = dict(e.body.details["leader"])
            for key in ("owned", "intended", "final"):
                view[key] = {names.get(m, m): parts for m, parts in view[key].items()}
            views.append(view)
    return views


def joins(lab: Lab, member: str, after: int = 0) -> list[list[str]]:
    """The owned partitions each JoinGroup of ``member`` claimed (the first protocol's subscription)."""
    out = []
    for e in lab.trace.of_type(MessageSent):
        if e.step > after and e.body.source == member and e.body.api == "JoinGroup":
            metadata = json.loads(e.body.body["protocols"][0]["metadata"])
            out.append(sorted(f"{t}-{p}" for t, ps in metadata.get("owned_partitions", {}).items() for p in ps))
    return out


def owned(lab: Lab, member: str) -> list[str]:
    return sorted(lab.world.partition_name(tp) for tp in lab.clients[member].owned)


def generation(lab: Lab, member: str) -> int:
    return lab.clients[member].generation_id


def first_step(lab: Lab, member: str, callback: str, partition: str, after: int = 0) -> int:
    return next(
        e.step
        for e in lab.trace.of_type(CallbackInvoked)
        if e.step > after and e.actor == member and e.body.callback == callback and partition in e.body.partitions
    )


def is_callback(event: TraceEvent, callback: str) -> bool:
    """Whether ``event`` is ``callback`` starting or returning."""
    return isinstance(event.body, (CallbackInvoked, CallbackCompleted)) and event.body.callback == callback


def is_message_from(event: TraceEvent, source: str) -> bool:
    """Whether ``event`` is a message ``source`` sent (sent, delivered or dropped)."""
    return isinstance(event.body, (MessageSent, MessageDelivered, MessageDropped)) and event.body.source == source


def strict_lab(seed: int = 0, fidelity: str = "kafka") -> Lab:
    return Lab(seed=seed, config=LabConfig(raise_on_violation=True, coordinator=CoordinatorConfig(fidelity=fidelity)))


def two_member_group(strategy: list[str], fidelity: str = "kafka") -> tuple[Lab, int]:
    """Topics a and b (one partition each); C1 alone owns both, then C2 starts."""
    lab = strict_lab(fidelity=fidelity)
    lab.create_topic("a", 1)
    lab.create_topic("b", 1)
    add(lab, "C1", strategy, ["a", "b"])
    stable(lab)
    assert owned(lab, "C1") == ["a-0", "b-0"]
    mark = lab.step_count
    add(lab, "C2", strategy, ["a", "b"])
    stable(lab)
    return lab, mark


# -- configuration (KIP-429, "Compatibility and Upgrade Path") ---------------------------------------
@pytest.mark.parametrize(
    ("strategy", "protocol"),
    [
        (["range"], RebalanceProtocol.EAGER),
        (["cooperative-sticky"], RebalanceProtocol.COOPERATIVE),
        (["cooperative-sticky", "range"], RebalanceProtocol.EAGER),  # the protocol every assignor supports wins
        (["sticky"], RebalanceProtocol.EAGER),  # kept eager on purpose (KIP-429, "Compatibility and Upgrade Path")
    ],
)
def test_the_rebalance_protocol_is_the_highest_every_assignor_supports(strategy, protocol):
    """Kafka ``ConsumerCoordinator`` (constructor): the most advanced protocol every configured assignor supports."""
    config = ClassicConsumerConfig(
        group_protocol="classic", subscribed_topic_names=["t"], partition_assignment_strategy=strategy
    )
    assert config.rebalance_protocol is protocol


def test_bad_assignor_configurations_are_refused_before_any_join():
    """Kafka ``ConsumerCoordinator`` (constructor) refuses assignors without a common protocol; the Lab's config also
    refuses unknown and repeated names, naming them."""
    with pytest.raises(ValueError, match="unknown client-side assignor 'fancy'"):
        ClassicConsumerConfig(
            group_protocol="classic", subscribed_topic_names=["t"], partition_assignment_strategy=["fancy"]
        )
    with pytest.raises(ValueError, match="names an assignor twice"):
        ClassicConsumerConfig(
            group_protocol="classic", subscribed_topic_names=["t"], partition_assignment_strategy=["range", "range"]
        )
    with pytest.raises(ValueError, match="subscribed_topic_names"):
        ClassicConsumerConfig(group_protocol="classic", subscribed_topic_regex="t.*")


# ---------------------------------------------------------------------------- a member joins
def test_a_new_member_joins_eager():
    """Kafka ``ConsumerCoordinator.onJoinPrepare``, ``onJoinComplete``: under EAGER everyone revokes everything, then
    gets its new assignment."""
    lab, mark = two_member_group(EAGER)
    # Step 1: C2 is new (no generation): nothing to revoke or lose, no callback before its join;
    # its JoinGroup claims nothing, first without a member id (MEMBER_ID_REQUIRED), then with it.
    c2_joins = [
        e
        for e in lab.trace
        if e.step > mark and isinstance(e.body, MessageSent) and e.body.source == "C2" and e.body.api == "JoinGroup"
    ]
    assert [("member_id" in e.body.body) for e in c2_joins] == [False, True]
    # Step 2: C1 revokes everything before its JoinGroup, which claims nothing (E-1, E-2).
    assert joins(lab, "C1", mark) == [[]]
    revoke = first_step(lab, "C1", "on_partitions_revoked", "a-0", mark)
    c1_join = next(
        e.step
        for e in lab.trace
        if e.step > mark and isinstance(e.body, MessageSent) and e.body.source == "C1" and e.body.api == "JoinGroup"
    )
    assert revoke < c1_join
    # Steps 3-6: one generation, leader C1 (the existing member), roundrobin: C1 a-0, C2 b-0.
    (view,) = leader_views(lab, mark)
    assert view["final"] == {"C1": ["a-0"], "C2": ["b-0"]} and view["withheld"] == []
    assert callbacks(lab, "C1", mark) == [
        ("on_partitions_revoked", ["a-0", "b-0"]),
        ("on_assignment", ["a-0"]),
        ("on_partitions_assigned", ["a-0"]),  # E-3: the full set, a-0 included again
    ]
    assert callbacks(lab, "C2", mark) == [("on_assignment", ["b-0"]), ("on_partitions_assigned", ["b-0"])]
    assert generation(lab, "C1") == generation(lab, "C2") == 2
    # Nothing is fetched by C1 between its revocation and its assignment (the barrier).
    c1_assigned = first_step(lab, "C1", "on_partitions_assigned", "a-0", mark)
    fetching = [
        e.body.fetching
        for e in lab.trace.of_type(AssignmentChanged)
        if revoke < e.step < c1_assigned and e.actor == "C1"
    ]
    assert fetching and all(f == () for f in fetching)


def test_the_same_join_cooperative_takes_two_rebalances():
    """Kafka ``ConsumerCoordinator.onJoinComplete``, ``CooperativeStickyAssignor.adjustAssignment``: a moving partition
    is revoked in one rebalance and assigned in a second."""
    lab, mark = two_member_group(COOPERATIVE)
    first, second = leader_views(lab, mark)
    # Step 3: C1 claims both; the intent moves b-0 to C2, so b-0 is withheld this round.
    assert first["owned"] == {"C1": ["a-0", "b-0"], "C2": []}
    assert first["withheld"] == ["b-0"] and first["final"] == {"C1": ["a-0"], "C2": []}
    # Step 8: C1 now claims only a-0; b-0 is ready to migrate and reaches C2.
    assert second["owned"] == {"C1": ["a-0"], "C2": []}
    assert second["withheld"] == [] and second["final"] == {"C1": ["a-0"], "C2": ["b-0"]}
    assert second["generation_id"] == first["generation_id"] + 1
    # C1: no callback before joining, its JoinGroups claim [a-0, b-0] then [a-0].
    assert joins(lab, "C1", mark) == [["a-0", "b-0"], ["a-0"]]
    assert callbacks(lab, "C1", mark) == [
        ("on_partitions_revoked", ["b-0"]),  # exactly one revocation, of b-0 only
        ("on_assignment", ["a-0"]),
        ("on_partitions_assigned", []),  # always called, even empty
        ("on_assignment", ["a-0"]),
        ("on_partitions_assigned", []),
    ]
    assert callbacks(lab, "C2", mark) == [
        ("on_assignment", []),
        ("on_partitions_assigned", []),
        ("on_assignment", ["b-0"]),
        ("on_partitions_assigned", ["b-0"]),
    ]
    # C1's revocation of b-0 comes before C2's assignment of it.
    assert first_step(lab, "C1", "on_partitions_revoked", "b-0") < first_step(
        lab, "C2", "on_partitions_assigned", "b-0"
    )
    # a-0 never stops: every C1 assignment change after the first fetch still fetches a-0.
    a0 = lab.clients["C1"].partition_ids([("a", 0)]).pop()
    changes = [e.body.fetching for e in lab.trace.of_type(AssignmentChanged) if e.step > mark and e.actor == "C1"]
    assert changes and all(tuple(a0) in f for f in changes)
    assert lab.clients["C1"].rebalance_metrics.rebalance_total == 3  # M-1: its first join, then two
    assert owned(lab, "C1") == ["a-0"] and owned(lab, "C2") == ["b-0"]


# ---------------------------------------------------------------------------- listener exceptions
@dataclass
class FailingListener:
    """Raises on the listed calls (1-based, per callback); takes no simulated time."""

    fail: dict[str, set[int]]
    calls: dict[str, int] = field(default_factory=dict)

    def _call(self, kind: str) -> int:
        self.calls[kind] = self.calls.get(kind, 0) + 1
        if self.calls[kind] in self.fail.get(kind, set()):
            raise RuntimeError(f"{kind} #{self.calls[kind]}")
        return 0

    def on_partitions_revoked(self, partitions: list[str]) -> int:
        return self._call("on_partitions_revoked")

    def on_partitions_assigned(self, partitions: list[str]) -> int:
        return self._call("on_partitions_assigned")

    def on_partitions_lost(self, partitions: list[str]) -> int:
        return self._call("on_partitions_lost")


def _listener_exception_run(fail: dict[str, set[int]]) -> tuple[Lab, int]:
    lab = strict_lab()
    lab.create_topic("t", 4)
    lab.add_consumer(
        "C1",
        group_protocol="classic",
        subscribed_topic_names=["t"],
        partition_assignment_strategy=COOPERATIVE,
        listener=FailingListener(fail),
    )
    stable(lab)
    mark = lab.step_count
    add(lab, "C2", COOPERATIVE, ["t"])
    stable(lab)
    return lab, mark


def test_a_listener_exception_is_raised_by_poll_after_the_rebalance():
    """Kafka ``ConsumerCoordinator.onJoinComplete`` (``firstException``): the rebalance goes on and ``poll`` raises the
    exception afterwards."""
    lab, mark = _listener_exception_run({"on_partitions_revoked": {1}})
    c1 = lab.clients["C1"]
    invoked = [e.body for e in lab.trace.of_type(CallbackInvoked) if e.step > mark and e.actor == "C1"]
    assert invoked[0].callback == "on_partitions_revoked" and invoked[0].error.startswith("RuntimeError")
    # the rest of the rebalance goes on: on_assignment and on_partitions_assigned still run ...
    assert [c.callback for c in invoked[1:3]] == ["on_assignment", "on_partitions_assigned"]
    # ... the ownership change took place, and the rejoin for the revocation still happened.
    assert len(owned(lab, "C1")) == 2 and len(owned(lab, "C2")) == 2
    # poll raises it once the rebalance completed, once (callbacks are not re-run).
    assert c1.poll_errors == ["on_partitions_revoked raised"]
    raised = next(e for e in lab.trace.of_type(Note) if e.actor == "C1" and "poll_error" in e.body.details)
    assert raised.step > next(
        e.step for e in lab.trace if e.step > mark and e.actor == "C1" and is_callback(e, "on_partitions_assigned")
    )
    assert (
        c1.rebalance_metrics.callback_latencies_ms.get("on_partitions_revoked") is None
    )  # M-3: no sample when it raised


def test_when_two_callbacks_raise_poll_raises_the_first():
    """Kafka ``ConsumerCoordinator.onJoinComplete`` (``firstException``): of two exceptions, ``poll`` raises
    the first."""
    lab, _ = _listener_exception_run({"on_partitions_revoked": {1}, "on_partitions_assigned": {2}})
    assert lab.clients["C1"].poll_errors == ["on_partitions_revoked raised"]


# -- falling out and coming back ---------------------------------------------------------------------
def test_a_member_falls_out_and_comes_back_cooperative():
    """Kafka ``ConsumerCoordinator.onJoinPrepare``: a member that lost its membership calls ``onPartitionsLost``, then
    rejoins."""
    lab = strict_lab()
    lab.create_topic("a", 1)
    lab.create_topic("b", 1)
    add(lab, "C1", COOPERATIVE, ["a", "b"], session_timeout_ms=10_000)
    stable(lab)
    add(lab, "C2", COOPERATIVE, ["a", "b"], session_timeout_ms=10_000, request_timeout_ms=5_000)
    stable(lab)
    assert (owned(lab, "C1"), owned(lab, "C2")) == (["a-0"], ["b-0"])
    mark = lab.step_count
    lab.partition_link("C2", 15_000)  # C2 stalls past its session timeout
    lab.run(until=lab.now + 15_000)
    assert lab.run_until_stable(timeout_ms=120_000)
    # Step 2: C1 gets b-0 while C2 is out (it is ready to migrate: nobody claims it).
    c1 = callbacks(lab, "C1", mark)
    assert ("on_partitions_assigned", ["b-0"]) in c1
    took = first_step(lab, "C1", "on_partitions_assigned", "b-0", mark)
    # Step 3: C2 learns it is out: on_partitions_lost [b-0], then rejoins claiming nothing.
    c2 = callbacks(lab, "C2", mark)
    assert c2[0] == ("on_partitions_lost", ["b-0"])
    assert first_step(lab, "C2", "on_partitions_lost", "b-0", mark) > took  # it was a zombie meanwhile
    assert joins(lab, "C2", mark)[0] == []
    # Steps 4-5: b-0 is withheld from C2 until C1 revoked it, then reaches C2.
    assert ("on_partitions_revoked", ["b-0"]) in callbacks(lab, "C1", took)
    assert first_step(lab, "C1", "on_partitions_revoked", "b-0", took) < first_step(
        lab, "C2", "on_partitions_assigned", "b-0", mark
    )
    assert (owned(lab, "C1"), owned(lab, "C2")) == (["a-0"], ["b-0"])
    assert lab.clients["C2"].rebalance_metrics.failed_rebalance_total == 1


# -- subscription, partitions and topics change; a member leaves -------------------------------------
def test_a_subscription_change_revokes_before_joining_and_needs_one_rebalance():
    """Kafka ``ConsumerCoordinator.onJoinPrepare``: COOPERATIVE revokes the partitions of topics no longer subscribed
    before JoinGroup."""
    lab = strict_lab()
    lab.create_topic("a", 1)
    lab.create_topic("b", 2)
    add(lab, "C1", COOPERATIVE, ["a", "b"])
    stable(lab)
    add(lab, "C2", COOPERATIVE, ["b"])
    stable(lab)
    assert (owned(lab, "C1"), owned(lab, "C2")) == (["a-0", "b-0"], ["b-1"])
    mark = lab.step_count
    lab.change_subscription("C1", topics=["a"])
    stable(lab)
    assert callbacks(lab, "C1", mark) == [
        ("on_partitions_revoked", ["b-0"]),  # before JoinGroup, only the dropped topic's
        ("on_assignment", ["a-0"]),
        ("on_partitions_assigned", []),
    ]
    assert joins(lab, "C1", mark) == [["a-0"]]
    assert joins(lab, "C2", mark) == [["b-1"]]  # after REBALANCE_IN_PROGRESS, all it owns
    (view,) = leader_views(lab, mark)  # one rebalance: b-0 is ready to migrate
    assert view["withheld"] == [] and view["final"] == {"C1": ["a-0"], "C2": ["b-0", "b-1"]}
    assert callbacks(lab, "C2", mark) == [("on_assignment", ["b-0", "b-1"]), ("on_partitions_assigned", ["b-0"])]


def test_a_position_that_arrives_while_its_partition_is_being_revoked_is_ignored():
    """Kafka ``ConsumerCoordinator.onJoinPrepare`` marks the revoked partitions pending revocation
    (``SubscriptionState.markPendingRevocation``) before ``onPartitionsRevoked``, so
    ``SubscriptionState.isFetchable`` is false for them: an OffsetFetch answer arriving during the
    callback does not start fetching a partition about to leave the assignment."""
    lab = strict_lab()
    lab.create_topic("a", 1)
    lab.create_topic("b", 1)
    add(lab, "C1", COOPERATIVE, ["a", "b"], callbacks=CallbackConfig(on_partitions_revoked_ms=2_000))
    for _ in range(10_000):
        stepped = lab.step()
        if any(e.actor == "C1" and is_callback(e, "on_partitions_assigned") for e in stepped):
            break
    lab.delay_messages("C1", 1, 1_000)  # the OffsetFetch for a-0 and b-0, about to go out
    lab.change_subscription("C1", topics=["a"])
    mark = lab.step_count
    lab.run(until=lab.now + 10_000)
    later = [e for e in lab.trace if e.step > mark]
    fetched = next(
        e
        for e in later
        if isinstance(e.body, MessageDelivered) and e.body.api == "OffsetFetch" and e.body.destination == "C1"
    )
    revoke, revoked = (
        next(
            e
            for e in later
            if e.actor == "C1" and isinstance(e.body, kind) and e.body.callback == "on_partitions_revoked"
        )
        for kind in (CallbackInvoked, CallbackCompleted)
    )
    assert revoke.body.partitions == ("b-0",)
    assert revoke.step < fetched.step < revoked.step  # the position arrived during the revocation
    c1 = lab.clients["C1"]
    assert owned(lab, "C1") == ["a-0"]
    assert set(c1.fetching) == c1.owned  # b-0 never started fetching


def test_added_partitions_are_assigned_in_one_rebalance_without_revocation():
    """Kafka ``ConsumerCoordinator.rejoinNeededOrPending``: the leader notices added partitions and rejoins; nothing is
    revoked."""
    lab = strict_lab()
    lab.create_topic("a", 2)
    add(lab, "C1", COOPERATIVE, ["a"])
    stable(lab)
    add(lab, "C2", COOPERATIVE, ["a"])
    stable(lab)
    mark = lab.step_count
    lab.add_partitions("a", 1)
    stable(lab)
    (view,) = leader_views(lab, mark)
    assert view["withheld"] == []
    added = {m: [p for kind, p in callbacks(lab, m, mark) if kind == "on_partitions_assigned"] for m in ("C1", "C2")}
    assert sorted(added.values()) == [[[]], [["a-2"]]]
    assert all(kind != "on_partitions_revoked" for m in ("C1", "C2") for kind, _ in callbacks(lab, m, mark))
    assert sorted(owned(lab, "C1") + owned(lab, "C2")) == ["a-0", "a-1", "a-2"]


def deleted_topic_group(fidelity: str):
    lab = strict_lab(fidelity=fidelity)
    lab.create_topic("a", 2)
    lab.create_topic("x", 1)
    add(lab, "C1", COOPERATIVE, ["a", "x"])
    stable(lab)
    add(lab, "C2", COOPERATIVE, ["a"])
    stable(lab)
    kept = {m: owned(lab, m) for m in ("C1", "C2")}
    assert len(kept["C1"]) == 2 and "x-0" in kept["C1"] and len(kept["C2"]) == 1  # C1 {a-0, x-0}
    mark = lab.step_count
    lab.delete_topic("x")
    stable(lab)
    assert owned(lab, "C1") == [p for p in kept["C1"] if p != "x-0"] and owned(lab, "C2") == kept["C2"]
    assert len(leader_views(lab, mark)) == 1  # one rebalance
    return lab, mark


def test_kip_a_deleted_topics_partitions_are_lost_not_revoked():
    """KIP-429, 'Consumer Coordinator Algorithm' step 1b: the owner calls onPartitionsLost, then rejoins."""
    lab, mark = deleted_topic_group("kip")
    assert callbacks(lab, "C1", mark)[0] == ("on_partitions_lost", ["x-0"])
    assert all(kind != "on_partitions_revoked" for m in ("C1", "C2") for kind, _ in callbacks(lab, m, mark))


def test_kafka_the_leader_rejoins_and_the_deleted_topics_partitions_are_revoked():
    """Kafka ``ConsumerCoordinator.rejoinNeededOrPending`` (the leader's assignment snapshot no longer
    matches the metadata) and ``onJoinComplete`` (owned minus assigned is revoked): no onPartitionsLost."""
    lab, mark = deleted_topic_group("kafka")
    assert callbacks(lab, "C1", mark)[0] == ("on_partitions_revoked", ["x-0"])
    assert all(kind != "on_partitions_lost" for m in ("C1", "C2") for kind, _ in callbacks(lab, m, mark))
    rejoins = [
        e.body.details["rejoin"] for e in lab.trace.of_type(Note) if e.step > mark and "rejoin" in e.body.details
    ]
    assert rejoins[0] == "the leader's metadata changed"


def test_a_graceful_leave_hands_its_partitions_over_in_one_rebalance():
    """Kafka ``ConsumerCoordinator.onLeavePrepare``, ``AbstractCoordinator.maybeLeaveGroup``: a leaving member revokes,
    sends LeaveGroup, and its partitions move in one rebalance."""
    lab, _ = two_member_group(COOPERATIVE)
    mark = lab.step_count
    lab.close("C2")
    stable(lab)
    assert callbacks(lab, "C2", mark) == [("on_partitions_revoked", ["b-0"])]
    assert [e.body.api for e in lab.trace if e.step > mark and is_message_from(e, "C2")][-1] == "LeaveGroup"
    assert callbacks(lab, "C1", mark) == [("on_assignment", ["a-0", "b-0"]), ("on_partitions_assigned", ["b-0"])]
    assert len(leader_views(lab, mark)) == 1 and lab.clients["C2"].state.value == "UNSUBSCRIBED"


def test_a_static_member_sends_no_leave_group():
    """Kafka ``AbstractCoordinator.maybeLeaveGroup``: a static member sends no LeaveGroup on close."""
    lab = strict_lab()
    lab.create_topic("a", 1)
    add(lab, "S", COOPERATIVE, ["a"], instance_id="s-1")
    stable(lab)
    mark = lab.step_count
    lab.close("S")
    lab.run(until=lab.now + 1_000)
    assert "LeaveGroup" not in [e.body.api for e in lab.trace if e.step > mark and is_message_from(e, "S")]
    assert callbacks(lab, "S", mark) == [("on_partitions_revoked", ["a-0"])]


# ---------------------------------------------------------------------------- scaling out
@pytest.mark.parametrize(("strategy", "revoked", "rebalances"), [(COOPERATIVE, 2, 2), (["sticky"], 6, 1)])
def test_scale_out_to_three_members(strategy, revoked, rebalances):
    """Kafka ``ConsumerCoordinator.onJoinComplete`` with the sticky assignors: a third member joins; what is revoked
    and how many rebalances it takes."""
    lab = strict_lab()
    lab.create_topic("t", 6)
    add(lab, "C1", strategy, ["t"])
    stable(lab)
    add(lab, "C2", strategy, ["t"])
    stable(lab)
    mark = lab.step_count
    add(lab, "C3", strategy, ["t"])
    stable(lab)
    revocations = [
        p for m in ("C1", "C2") for kind, ps in callbacks(lab, m, mark) if kind == "on_partitions_revoked" for p in ps
    ]
    assert len(revocations) == revoked
    assert len(leader_views(lab, mark)) == rebalances
    assert sorted(len(owned(lab, m)) for m in ("C1", "C2", "C3")) == [2, 2, 2]
    if strategy == COOPERATIVE:  # C3 gets both of its partitions in the second rebalance
        assert callbacks(lab, "C3", mark)[-1] == ("on_partitions_assigned", owned(lab, "C3"))


# -- the two-bounce upgrade to cooperative -----------------------------------------------------------
def _upgrade_lab() -> Lab:
    lab = strict_lab()
    lab.create_topic("t", 6)
    for name in ("C1", "C2", "C3"):
        add(lab, name, ["range"], ["t"])
    stable(lab)
    return lab


def _restart_with(lab: Lab, name: str, strategy: list[str]) -> None:
    lab.restart(name, config=lab.clients[name].config.model_copy(update={"partition_assignment_strategy": strategy}))


def _bounce(lab: Lab, name: str, strategy: list[str]) -> None:
    """A rolling bounce's step: close (revoke, LeaveGroup), settle, start the new version."""
    lab.close(name)
    stable(lab)
    _restart_with(lab, name, strategy)
    stable(lab)


def test_the_two_bounce_upgrade_never_double_assigns():
    """KIP-429, section "Compatibility and Upgrade Path": the two rolling bounces to cooperative-sticky; Kafka
    ``ConsumerCoordinator`` picks each member's protocol."""
    lab = _upgrade_lab()
    assert {c.rebalance_protocol for c in lab.clients.values()} == {RebalanceProtocol.EAGER}
    for name in ("C1", "C2", "C3"):  # bounce 1: [cooperative-sticky, range] runs EAGER (range supports no other)
        _bounce(lab, name, ["cooperative-sticky", "range"])
        assert lab.clients[name].rebalance_protocol is RebalanceProtocol.EAGER
    bounce2 = lab.step_count
    _bounce(lab, "C1", ["cooperative-sticky"])  # bounce 2, first member: COOPERATIVE (its one assignor supports it)
    assert lab.clients["C1"].rebalance_protocol is RebalanceProtocol.COOPERATIVE
    assert lab.clients["C1"].protocol_name == "cooperative-sticky"  # C1 no longer lists range
    mixed = lab.step_count
    lab.close("C2")  # a rebalance of the mixed group
    stable(lab)
    # The eager C3 claims nothing and is told its full set; the cooperative C1 claims what it owns
    # and is told only what is new.
    assert all(j == [] for j in joins(lab, "C3", mixed))
    assert joins(lab, "C1", mixed)[0] != []
    c3_assigned = [ps for kind, ps in callbacks(lab, "C3", mixed) if kind == "on_partitions_assigned"]
    assert c3_assigned[-1] == owned(lab, "C3")
    c1_assigned = [p for kind, ps in callbacks(lab, "C1", mixed) if kind == "on_partitions_assigned" for p in ps]
    assert not set(c1_assigned) & set(joins(lab, "C1", mixed)[0])
    _restart_with(lab, "C2", COOPERATIVE)
    stable(lab)
    _bounce(lab, "C3", COOPERATIVE)
    assert {c.rebalance_protocol for c in lab.clients.values()} == {RebalanceProtocol.COOPERATIVE}
    assert sorted(p for m in ("C1", "C2", "C3") for p in owned(lab, m)) == [f"t-{i}" for i in range(6)]
    assert compute_metrics(lab.trace)["invariant_violations"] == 0 and bounce2 < mixed


def test_skipping_the_first_bounce_stalls_visibly_and_moves_nothing():
    lab = _upgrade_lab()
    lab.close("C1")
    stable(lab)
    before = {m: owned(lab, m) for m in ("C2", "C3")}
    _restart_with(lab, "C1", COOPERATIVE)
    lab.run(until=lab.now + 30_000)
    c1 = lab.clients["C1"]
    assert c1.state.value == "FATAL"  # no common assignor: INCONSISTENT_GROUP_PROTOCOL
    fatal = next(e.body for e in lab.trace.of_type(Note) if e.actor == "C1" and "fatal" in e.body.details)
    assert fatal.details["fatal"] == "INCONSISTENT_GROUP_PROTOCOL" and not c1.owned
    assert lab.invariants.violations == []
    assert sorted(owned(lab, "C2") + owned(lab, "C3")) == [f"t-{i}" for i in range(6)]
    assert {m: owned(lab, m) for m in before} == before  # nothing moved


def test_a_leader_that_ignores_owned_partitions_is_caught_by_single_owner(monkeypatch):
    """The hazard the two bounces prevent: a leader moving partitions their owners never revoked.

    Kafka ``ConsumerCoordinator.onLeaderElected`` trusts cooperative-sticky to withhold (it skips
    ``validateCooperativeAssignment`` for it): with its withholding switched off, the move happens."""
    monkeypatch.setattr(
        CooperativeStickyAssignor, "_assign_partitions", CooperativeStickyAssignor.__mro__[1]._assign_partitions
    )
    with pytest.raises(InvariantViolation, match="single-owner"):
        two_member_group(COOPERATIVE)


def test_kip_the_leader_withholds_for_every_assignor(monkeypatch):
    """KIP-429, 'Consumer Coordinator Algorithm' (the leader's rule): under ``kip`` the leader withholds a
    partition another member still claims whatever the assignor did, so the same broken assignor is harmless."""
    monkeypatch.setattr(
        CooperativeStickyAssignor, "_assign_partitions", CooperativeStickyAssignor.__mro__[1]._assign_partitions
    )
    lab, mark = two_member_group(COOPERATIVE, fidelity="kip")
    notes = [e.body.details["leader"] for e in lab.trace.of_type(Note) if e.step > mark and "leader" in e.body.details]
    assert notes and notes[0]["withheld"]  # the first assignment after C2 joined held a partition back
    assert sorted(owned(lab, "C1") + owned(lab, "C2")) == ["a-0", "b-0"]


# ---------------------------------------------------------------------------- client state machine
def test_classic_client_transitions_are_the_tables():
    """Runs that take the classic client through its machine; every transition is a table row."""
    lab, _ = two_member_group(COOPERATIVE)
    lab.pause("C2")  # stops polling: past max.poll.interval.ms it leaves the group
    lab.run(until=lab.now + 400_000)
    lab.resume("C2")
    stable(lab)
    lab.close("C1")
    stable(lab)
    taken = {
        (e.body.from_state, e.body.trigger, e.body.to_state)
        for e in lab.trace
        if isinstance(e.body, StateTransition) and e.body.machine == CLASSIC_MEMBER_MACHINE.name
    }
    rows = {(t.source, t.trigger, t.target) for t in CLASSIC_MEMBER_MACHINE.transitions}
    assert taken <= rows
    assert {
        ("UNSUBSCRIBED", "subscribe", "UNJOINED"),
        ("UNJOINED", "JoinGroup sent", "PREPARING_REBALANCE"),
        ("PREPARING_REBALANCE", "MEMBER_ID_REQUIRED, JoinGroup again", "PREPARING_REBALANCE"),
        ("PREPARING_REBALANCE", "joined, SyncGroup sent", "COMPLETING_REBALANCE"),
        ("COMPLETING_REBALANCE", "SyncGroup answered", "STABLE"),
        ("STABLE", "JoinGroup sent", "PREPARING_REBALANCE"),
        ("STABLE", "poll timer expired, left the group", "UNJOINED"),
        ("STABLE", "close", "UNSUBSCRIBED"),
    } <= taken
    lost = [kind for kind, _ in callbacks(lab, "C2") if kind == "on_partitions_lost"]
    assert lost == ["on_partitions_lost"]  # after the poll timeout, at its next poll


def test_a_transition_outside_the_table_is_refused():
    """Kafka ``AbstractCoordinator.MemberState`` (the classic client's states): a transition outside the table is
    refused."""
    lab = strict_lab()
    lab.create_topic("a", 1)
    add(lab, "C1", COOPERATIVE, ["a"])
    with pytest.raises(Exception, match="no transition from UNJOINED"):
        lab.clients["C1"]._transition(cc.ClassicMemberState.STABLE, "SyncGroup answered")


def test_the_same_seed_gives_the_same_trace():
    """Determinism (the Lab): the same seed gives the same trace, byte for byte."""
    runs = []
    for _ in range(2):
        lab, _ = two_member_group(COOPERATIVE)
        runs.append([e.to_json() for e in lab.trace])
    assert runs[0] == runs[1]


def test_rebalance_metrics_follow_kip429():
    lab = strict_lab()
    lab.create_topic("a", 2)
    add(lab, "C1", COOPERATIVE, ["a"], callbacks=CallbackConfig(on_partitions_assigned_ms=200))
    stable(lab)
    metrics = lab.clients["C1"].rebalance_metrics.summary(lab.now)
    assert metrics["rebalance-total"] == 1
    assert metrics["rebalance-rate-per-hour"] == pytest.approx(3_600_000 / lab.now)
    assert metrics["failed-rebalance-total"] == 0 and metrics["failed-rebalance-rate-per-hour"] == 0
    assert metrics["partitions-assigned-latency-max"] == 200
    assert metrics["rebalance-latency-max"] >= 200  # M-2: callback time included
    assert metrics["partitions-revoked-latency-avg"] is None  # M-3


# ---------------------------------------------------------------------------- rarer transitions
def _joining_member(max_poll_interval_ms: int) -> Lab:
    """C1 stable alone; C2 (6 s session, 3 s request timeout) starting to join."""
    lab = strict_lab()
    lab.create_topic("a", 2)
    add(lab, "C1", COOPERATIVE, ["a"], session_timeout_ms=6_000)
    stable(lab)
    add(
        lab,
        "C2",
        COOPERATIVE,
        ["a"],
        session_timeout_ms=6_000,
        max_poll_interval_ms=max_poll_interval_ms,
        request_timeout_ms=3_000,
    )
    return lab


def _c2_transitions(lab: Lab) -> set[tuple[str, str, str]]:
    return {
        (e.body.from_state, e.body.trigger, e.body.to_state)
        for e in lab.trace
        if e.actor == "C2" and isinstance(e.body, StateTransition)
    }


def _delayed_while_c3_joins(lab: Lab, delay_ms: int = 12_000) -> None:
    lab.delay_messages("C2", 1, delay_ms)
    add(lab, "C3", COOPERATIVE, ["a"])


def _sync_late_while_c3_joins(lab: Lab) -> None:
    """C2's SyncGroup held 2 s (within its 3 s request timeout): it arrives after C3's JoinGroup."""
    _delayed_while_c3_joins(lab, 2_000)


def _leader_slow_and_c2_paused(lab: Lab) -> None:
    lab.delay_messages("C1", 2, 20_000)
    lab.pause("C2")


@pytest.mark.parametrize(
    ("row", "max_poll_interval_ms", "steps", "fault"),
    [
        # C2's SyncGroup arrives after C3's JoinGroup: REBALANCE_IN_PROGRESS, it joins again.
        (
            ("COMPLETING_REBALANCE", "REBALANCE_IN_PROGRESS, JoinGroup sent", "PREPARING_REBALANCE"),
            8_000,
            14,
            _sync_late_while_c3_joins,
        ),
        # Its first JoinGroup is held up past its session: the coordinator forgot its member id.
        (("PREPARING_REBALANCE", "fell out of the group", "UNJOINED"), 8_000, 1, _delayed_while_c3_joins),
        # It stops polling while its JoinGroup, then its SyncGroup, waits for a slow leader.
        (
            ("PREPARING_REBALANCE", "poll timer expired, left the group", "UNJOINED"),
            2_000,
            1,
            _leader_slow_and_c2_paused,
        ),
        (
            ("COMPLETING_REBALANCE", "poll timer expired, left the group", "UNJOINED"),
            2_000,
            14,
            _leader_slow_and_c2_paused,
        ),
    ],
)
def test_rarer_classic_transitions(row, max_poll_interval_ms, steps, fault):
    """Kafka ``AbstractCoordinator`` (``joinGroupIfNeeded``, ``maybeLeaveGroup``, the heartbeat thread): the rarer
    transitions are table rows."""
    lab = _joining_member(max_poll_interval_ms)
    lab.run(steps=steps)
    fault(lab)
    lab.run(until=lab.now + 40_000)
    assert row in _c2_transitions(lab)


@pytest.mark.parametrize("steps", range(0, 8))
def test_closing_at_any_point_of_the_join_is_a_table_row(steps):
    """Kafka ``ConsumerCoordinator.onLeavePrepare``: closing at any point of the join follows a table row."""
    lab = strict_lab()
    lab.create_topic("a", 1)
    add(lab, "C1", COOPERATIVE, ["a"])
    lab.run(steps=steps)
    before = lab.clients["C1"].state.value
    lab.close("C1")
    lab.run(until=lab.now + 10_000)
    assert lab.clients["C1"].state.value == "UNSUBSCRIBED"
    last = [e.body for e in lab.trace.of_type(StateTransition) if e.actor == "C1"][-1]
    assert (last.from_state, last.trigger) == (before, "close")


def test_a_replaced_static_member_fails_with_fenced_instance_id():
    """Kafka ``AbstractCoordinator.JoinGroupResponseHandler``: FENCED_INSTANCE_ID is fatal for the replaced static
    member."""
    lab = strict_lab()
    lab.create_topic("a", 1)
    add(lab, "S1", COOPERATIVE, ["a"], instance_id="s")
    stable(lab)
    add(lab, "S2", COOPERATIVE, ["a"], instance_id="s")
    lab.run(until=lab.now + 30_000)
    assert lab.clients["S1"].state.value == "FATAL"
    assert any(e.body.details.get("fatal") == "FENCED_INSTANCE_ID" for e in lab.trace.of_type(Note) if e.actor == "S1")
    assert owned(lab, "S2") == ["a-0"]


def test_an_old_member_joining_a_cooperative_group_is_refused():
    """Kafka ``ClassicGroup.supportsProtocols`` (via ``GroupMetadataManager.classicGroupJoin``): a member with no
    protocol in common is INCONSISTENT_GROUP_PROTOCOL."""
    lab = strict_lab()
    lab.create_topic("t", 4)
    for name in ("C1", "C2"):
        add(lab, name, COOPERATIVE, ["t"])
    stable(lab)
    before = {m: owned(lab, m) for m in ("C1", "C2")}
    add(lab, "OLD", ["range"], ["t"])
    lab.run(until=lab.now + 30_000)
    assert lab.clients["OLD"].state.value == "FATAL" and not lab.clients["OLD"].owned
    assert {m: owned(lab, m) for m in ("C1", "C2")} == before


class RevokeOnlyListener:
    """Implements only on_partitions_revoked and on_partitions_assigned (a pre-KIP-429 listener)."""

    def __init__(self) -> None:
        self.revoked: list[list[str]] = []

    def on_partitions_revoked(self, partitions: list[str]) -> int:
        self.revoked.append(partitions)
        return 0

    def on_partitions_assigned(self, partitions: list[str]) -> int:
        return 0


def test_a_listener_without_on_partitions_lost_has_its_revocation_called():
    """KIP-429, 'ConsumerRebalanceListener and ConsumerPartitionAssignor Semantics': onPartitionsLost
    defaults to onPartitionsRevoked (a deleted topic's partitions are lost under ``kip``)."""
    lab = strict_lab(fidelity="kip")
    lab.create_topic("a", 1)
    lab.create_topic("x", 1)
    listener = RevokeOnlyListener()
    lab.add_consumer(
        "C1",
        group_protocol="classic",
        subscribed_topic_names=["a", "x"],
        partition_assignment_strategy=COOPERATIVE,
        listener=listener,
    )
    stable(lab)
    lab.delete_topic("x")
    stable(lab)
    lost = [
        e.body
        for e in lab.trace.of_type(CallbackInvoked)
        if e.actor == "C1" and e.body.callback == "on_partitions_lost"
    ]
    assert lost == [CallbackInvoked(callback="on_partitions_lost", partitions=("x-0",), duration_ms=0, error=None)]
    assert listener.revoked == [["x-0"]]


def test_an_assignment_naming_an_unsubscribed_topic_is_refused(monkeypatch):
    """The superset check (Kafka's checkAssignmentMatchedSubscription): not applied, rejoin."""
    original = CooperativeStickyAssignor._assign_partitions

    def with_foreign_topic(self, partitions_per_topic, subscriptions):
        final = original(self, partitions_per_topic, subscriptions)
        return {m: sorted({*parts, ("other", 0)}) if m.startswith("C2") else parts for m, parts in final.items()}

    monkeypatch.setattr(CooperativeStickyAssignor, "_assign_partitions", with_foreign_topic)
    lab = strict_lab()
    lab.create_topic("a", 2)
    lab.create_topic("other", 1)
    add(lab, "C1", COOPERATIVE, ["a"])
    stable(lab)
    mark = lab.step_count
    add(lab, "C2", COOPERATIVE, ["a"])
    lab.run(until=lab.now + 20_000)
    refused = [
        e.body
        for e in lab.trace.of_type(Note)
        if e.step > mark and e.actor == "C2" and "assignment_refused" in e.body.details
    ]
    assert refused and refused[0].details["assignment_refused"] == ["other"]
    assert "other-0" not in owned(lab, "C2")
    rejoins = [
        e.body.details["rejoin"] for e in lab.trace.of_type(Note) if e.actor == "C2" and "rejoin" in e.body.details
    ]
    assert "assignment does not match the subscription" in rejoins
    assert not lab.is_stable()


# -- the leader's rule as a function -----------------------------------------------------------------
def _subscription(topics, owned=(), generation=1):
    return cc.ConsumerProtocolSubscription(
        version=3, topics=list(topics), owned_partitions=list(owned), generation_id=generation
    )


def test_leader_rule_withholds_a_partition_still_claimed_by_another_member():
    """KIP-429, 'Consumer Coordinator Algorithm' step 2d (the ``kip`` leader rule): a maybe-revoking
    partition with a new owner is withheld, here from range's intent."""
    subscriptions = {"C1": _subscription(["a", "b"], [("a", 0), ("b", 0)]), "C2": _subscription(["a", "b"])}
    final, withheld, returned = cc.leader_adjustment(
        {"C1": [("a", 0)], "C2": [("b", 0)]}, subscriptions, {"a": 1, "b": 1}
    )
    assert final == {"C1": [("a", 0)], "C2": []} and withheld == [("b", 0)] and returned == []


def test_leader_rule_returns_an_unknown_but_owned_partition_to_its_claimer():
    """KIP-429, 'Consumer Coordinator Algorithm' step 2f (the ``kip`` leader rule): the leader's metadata
    does not know topic x (stale); C2 keeps x-0."""
    subscriptions = {"C1": _subscription(["a"], [("a", 0)]), "C2": _subscription(["a", "x"], [("a", 1), ("x", 0)])}
    final, withheld, returned = cc.leader_adjustment({"C1": [("a", 0)], "C2": [("a", 1)]}, subscriptions, {"a": 2})
    assert final == {"C1": [("a", 0)], "C2": [("a", 1), ("x", 0)]}
    assert returned == [("x", 0)] and withheld == []


def test_leader_rule_passes_ready_to_migrate_partitions_and_prefers_the_freshest_claim():
    """KIP-429, 'Consumer Coordinator Algorithm' step 2e (the ``kip`` leader rule): nobody claims b-0,
    so it goes straight to its new owner; two claims on x-0 (a zombie
    and the current owner): the higher generation gets it back."""
    subscriptions = {
        "C1": _subscription(["a", "b", "x"], [("a", 0), ("x", 0)], generation=3),
        "C2": _subscription(["a", "b", "x"], [("x", 0)], generation=5),
    }
    final, withheld, returned = cc.leader_adjustment(
        {"C1": [("a", 0)], "C2": [("b", 0)]}, subscriptions, {"a": 1, "b": 1}
    )
    assert final == {"C1": [("a", 0)], "C2": [("b", 0), ("x", 0)]} and returned == [("x", 0)] and withheld == []


def test_time_travel_replays_a_classic_run_exactly():
    """The Lab's time travel: seeking back and stepping again gives the same classic run."""
    lab, _ = two_member_group(COOPERATIVE)
    lab.run(until=lab.now + 20_000)
    full = [e.to_json() for e in lab.trace]
    end = lab.step_count
    lab.seek(end // 3)
    lab.seek(end)
    assert [e.to_json() for e in lab.trace] == full
    twin = lab.fork()
    twin.crash("C1")
    assert twin.run_until_stable() and owned(twin, "C2") == ["a-0", "b-0"]
    assert owned(lab, "C1") == ["a-0"]  # the original is untouched


@pytest.mark.parametrize("strategy", [COOPERATIVE, EAGER])
@pytest.mark.parametrize(
    "callbacks", [CallbackConfig(), CallbackConfig(on_partitions_revoked_ms=300, on_partitions_assigned_ms=700)]
)
def test_the_traces_stable_is_the_labs_stable_at_every_step(strategy, callbacks):
    """Compute_metrics' definition of stable (from the trace alone) agrees with Lab.is_stable for
    classic groups: a leave, a return, added partitions, a deleted topic, callbacks that take time."""
    from kip_lab.lab import actions as a
    from kip_lab.lab.metrics import stability_by_step

    lab = strict_lab()
    lab.create_topic("a", 3)
    lab.create_topic("b", 2)
    for name in ("C1", "C2", "C3"):
        add(lab, name, strategy, ["a", "b"], callbacks=callbacks)
    lab.schedule(a.Close(member="C2"), 20_000)
    lab.schedule(a.Restart(member="C2"), 23_000)
    lab.schedule(a.AddPartitions(topic="a", count=1), 40_000)
    lab.schedule(a.DeleteTopic(topic="b"), 60_000)
    live = {}
    while lab.now < 90_000 and lab.has_next():
        lab.step()
        live[lab.step_count] = lab.is_stable()
    from_trace = stability_by_step(lab.trace)
    assert {s: v for s, v in from_trace.items() if s in live} == {s: live[s] for s in from_trace if s in live}
    assert live[lab.step_count] and sum(live.values()) < len(live)  # it was unsettled at times, stable at the end
    # M-1: every completed SyncGroup is one rebalance, also one requested while callbacks ran.
    for name in ("C1", "C3"):
        synced = [
            e
            for e in lab.trace
            if e.actor == name and isinstance(e.body, StateTransition) and e.body.trigger == "SyncGroup answered"
        ]
        assert lab.clients[name].rebalance_metrics.rebalance_total == len(synced) > 2


def test_a_bad_subscription_change_is_refused_and_changes_nothing():
    """The Lab's input checks (Kafka ``KafkaConsumer.subscribe`` takes names or a pattern): a classic member subscribed
    by names refuses a regex, and nothing changes."""
    lab, _ = two_member_group(COOPERATIVE)
    steps = lab.step_count
    with pytest.raises(ValueError, match="subscribes by topic names"):
        lab.change_subscription("C1", regex="a.*")
    assert lab.step_count == steps and lab.clients["C1"].config.subscribed_topic_names == ["a", "b"]


def test_no_commit_between_sync_group_and_a_cooperative_revocation():
    """Kafka ``ConsumerCoordinator.onJoinComplete``: the partitions the new assignment drops are revoked
    at once — auto-commit runs only before JoinGroup (``onJoinPrepare``); committing them is the listener's job."""
    lab, mark = two_member_group(COOPERATIVE)
    events = [e for e in lab.trace if e.step > mark]
    revoke = next(
        i
        for i, e in enumerate(events)
        if e.actor == "C1" and isinstance(e.body, CallbackInvoked) and e.body.callback == "on_partitions_revoked"
    )
    sync = max(
        i
        for i, e in enumerate(events[:revoke])
        if isinstance(e.body, MessageDelivered) and e.body.destination == "C1" and e.body.api == "SyncGroup"
    )
    between = [e.body.api for e in events[sync:revoke] if isinstance(e.body, MessageSent) and e.body.source == "C1"]
    assert "OffsetCommit" not in between
