"""The Lab's five invariants catch a broken coordinator or client at the step that broke it.

Each test breaks one thing on purpose — the coordinator's reconciliation, its ownership
bookkeeping, a record it writes, or what a client is told — then checks that the violation
is traced at exactly that step, and that ``LabConfig(raise_on_violation=True)`` raises
``InvariantViolation`` there instead. A healthy run full of faults records none.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

import kip_lab.coordinator.coordinator as coordinator_module
from kip_lab.clients import CallbackConfig
from kip_lab.coordinator.group import ConsumerGroup
from kip_lab.coordinator.member import ReconciliationState
from kip_lab.events import AssignmentChanged, HandlerResult, InvariantViolated
from kip_lab.lab import Lab, LabConfig, LatencyModel, LinkConfig
from kip_lab.lab.invariants import INVARIANTS, InvariantViolation
from kip_lab.protocol import Errors
from kip_lab.protocol.common import TopicPartitions
from kip_lab.protocol.consumer_group import HeartbeatAssignment
from kip_lab.protocol.records import ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue
from kip_lab.runtime.log import Record
from kip_lab.runtime.result import CoordinatorResult


def stable_pair(raise_on_violation: bool) -> Lab:
    lab = Lab(seed=0, config=LabConfig(raise_on_violation=raise_on_violation))
    lab.create_topic("foo", 6)
    for name in "AB":
        lab.add_consumer(name, subscribed_topic_names=["foo"])
    assert lab.run_until_stable()
    return lab


def first_violation(lab: Lab, limit: int = 5_000) -> tuple[int, list[Any]]:
    """Step until a step traces a violation; returns that step and its events."""
    for _ in range(limit):
        stepped = lab.step()
        found = [e for e in stepped if e.kind.value == "invariant_violated"]
        if found:
            return lab.step_count, stepped
    raise AssertionError("no invariant was violated")


def raised_at(lab: Lab, limit: int = 5_000) -> tuple[int, str]:
    with pytest.raises(InvariantViolation) as caught:
        for _ in range(limit):
            lab.step()
    return lab.step_count, str(caught.value)


def check_both_ways(break_it: Callable[[Lab], None], name: str) -> list[Any]:
    """Break a fresh lab twice: traced (returns the step's events), then raised at the same step."""
    traced = stable_pair(raise_on_violation=False)
    raising = stable_pair(raise_on_violation=True)  # built before anything is broken
    break_it(traced)
    step, stepped = first_violation(traced)
    names = {e.body.invariant for e in stepped if isinstance(e.body, InvariantViolated)}
    assert name in names
    assert not [e for e in traced.trace if e.kind.value == "invariant_violated" and e.step < step]
    break_it(raising)
    raised_step, message = raised_at(raising)
    assert raised_step == step and name in message
    return stepped


def on_next_heartbeat(lab: Lab, member: str, change: Callable[[Lab, Any], Any]) -> None:
    """Let ``change(lab, result)`` rewrite the coordinator's next successful answer to ``member``."""
    coordinator = lab.coordinator
    original = coordinator.consumer_group_heartbeat
    armed = [True]

    def handler(request):
        result = original(request)
        if armed[0] and request.member_id == member and result.response.error_code is Errors.NONE:
            armed[0] = False
            result = change(lab, result)
        return result

    coordinator.consumer_group_heartbeat = handler


def test_the_invariants_are_named() -> None:
    assert set(INVARIANTS) == {
        "share-single-acquirer",
        "share-delivery-counts-never-decrease",
        "share-start-offset-never-back",
        "share-at-least-once",
        "classic-assignment-disjoint",
        "single-owner",
        "epochs-never-go-back",
        "target-covers-subscriptions",
        "stable-means-converged",
        "partition-epochs-match-ownership",
        "no-skip",
        "commits-monotonic",
        "reprocessing-explained",
    }


def test_single_owner_catches_a_client_told_to_take_anothers_partition() -> None:
    def tell_a_to_take_foo_3(lab: Lab) -> None:
        topic_id = lab.topic_id("foo")

        def change(lab: Lab, result: CoordinatorResult) -> CoordinatorResult:
            assignment = HeartbeatAssignment(
                assigned_topic_partitions=[TopicPartitions(topic_id=topic_id, partitions=[0, 1, 2, 3])]
            )
            return replace(result, response=result.response.model_copy(update={"assignment": assignment}))

        on_next_heartbeat(lab, "A", change)

    stepped = check_both_ways(tell_a_to_take_foo_3, "single-owner")
    grabbed = [e.body for e in stepped if e.actor == "A" and isinstance(e.body, AssignmentChanged)]
    assert grabbed and [grabbed[-1].owned[i][1] for i in range(4)] == [0, 1, 2, 3]
    text = next(e.body.explanation for e in stepped if isinstance(e.body, InvariantViolated))
    assert text == "foo-3 is owned by A and B"


def test_epochs_never_go_back_catches_a_member_epoch_written_lower(monkeypatch: pytest.MonkeyPatch) -> None:
    real = coordinator_module.reconcile

    def break_it(lab: Lab) -> None:
        armed = [True]

        def reconcile(member, target_epoch, target, partition_held, owned_reported):
            updated, trigger = real(member, target_epoch, target, partition_held, owned_reported)
            if armed[0] and member.member_id == "A" and trigger is not None:
                armed[0] = False
                updated = replace(updated, member_epoch=member.member_epoch - 1)
            return updated, trigger

        monkeypatch.setattr(coordinator_module, "reconcile", reconcile)
        lab.add_consumer("C", subscribed_topic_names=["foo"])

    stepped = check_both_ways(break_it, "epochs-never-go-back")
    assert any(e.kind.value == "handler_result" and e.actor == "broker-0" for e in stepped)
    text = next(e.body.explanation for e in stepped if isinstance(e.body, InvariantViolated))
    assert text == "A went from epoch 2 to 1"


def test_target_covers_subscriptions_catches_a_partition_assigned_twice() -> None:
    def break_it(lab: Lab) -> None:
        topic_id = lab.topic_id("foo")

        def change(lab: Lab, result: CoordinatorResult) -> CoordinatorResult:
            forged = (
                Record(
                    ConsumerGroupTargetAssignmentMemberKey(group_id="g", member_id="B"),
                    ConsumerGroupTargetAssignmentMemberValue(
                        topic_partitions=[TopicPartitions(topic_id=topic_id, partitions=[0, 3, 4, 5])]
                    ),
                ),
            )
            lab.coordinator._apply(CoordinatorResult(None, (forged,)))
            return replace(result, batches=(*result.batches, forged))

        on_next_heartbeat(lab, "A", change)

    stepped = check_both_ways(break_it, "target-covers-subscriptions")
    text = next(e.body.explanation for e in stepped if isinstance(e.body, InvariantViolated))
    assert "assigned twice" in text and "unassigned []" in text


def test_stable_means_converged_catches_a_member_marked_stable_while_still_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = coordinator_module.reconcile

    def break_it(lab: Lab) -> None:
        def reconcile(member, target_epoch, target, partition_held, owned_reported):
            updated, trigger = real(member, target_epoch, target, partition_held, owned_reported)
            if updated.state is ReconciliationState.UNRELEASED_PARTITIONS:  # C, waiting for A's and B's
                updated = replace(updated, state=ReconciliationState.STABLE)
            return updated, trigger

        monkeypatch.setattr(coordinator_module, "reconcile", reconcile)
        lab.add_consumer("C", subscribed_topic_names=["foo"])

    stepped = check_both_ways(break_it, "stable-means-converged")
    text = next(e.body.explanation for e in stepped if isinstance(e.body, InvariantViolated))
    assert text == "group g is Stable but C is not converged"
    # The step that made the group Stable: the last revocation acknowledged.
    assert any(isinstance(e.body, HandlerResult) and e.body.origin == "ConsumerGroupHeartbeat" for e in stepped)


def test_partition_epochs_match_ownership_catches_lost_bookkeeping(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ConsumerGroup._set_ownership

    def break_it(lab: Lab) -> None:
        def set_ownership(self, old, new):
            if new is not None and new.member_id == "C" and new.assigned:
                return real(self, old, None)  # forgets to record what C now holds
            return real(self, old, new)

        monkeypatch.setattr(ConsumerGroup, "_set_ownership", set_ownership)
        lab.add_consumer("C", subscribed_topic_names=["foo"])

    stepped = check_both_ways(break_it, "partition-epochs-match-ownership")
    text = next(e.body.explanation for e in stepped if isinstance(e.body, InvariantViolated))
    assert text == "group g: partition epochs differ from ownership"


def test_a_forged_record_replayed_later_is_caught_when_written() -> None:
    """Replaying a stale group-epoch record (a zombie coordinator's write) moves the epoch back."""
    from kip_lab.protocol.records import ConsumerGroupMetadataKey, ConsumerGroupMetadataValue

    def break_it(lab: Lab) -> None:
        def change(lab: Lab, result: CoordinatorResult) -> CoordinatorResult:
            stale = (Record(ConsumerGroupMetadataKey(group_id="g"), ConsumerGroupMetadataValue(epoch=1)),)
            lab.coordinator._apply(CoordinatorResult(None, (stale,)))
            return replace(result, batches=(*result.batches, stale))

        on_next_heartbeat(lab, "B", change)

    stepped = check_both_ways(break_it, "epochs-never-go-back")
    texts = [e.body.explanation for e in stepped if isinstance(e.body, InvariantViolated)]
    assert "group g went from epochs (2, 2) to (1, 2)" in texts


# ---------------------------------------------------------------------------- the delivery ledger
def on_coordinator(lab: Lab, api: str, change: Callable[[Any], Any]) -> None:
    """Let ``change(result)`` rewrite every answer the coordinator gives to ``api`` (``offset_commit``...)."""
    coordinator = lab.coordinator
    original = getattr(coordinator, api)
    setattr(coordinator, api, lambda request: change(original(request)))


def test_reprocessing_explained_catches_a_coordinator_that_stores_a_lower_offset() -> None:
    """The coordinator acknowledges each commit but stores ten records less: the next owner re-reads
    records the group was told are committed."""

    def store_ten_less(lab: Lab) -> None:
        coordinator = lab.coordinator
        original = coordinator.offset_commit

        def offset_commit(request):
            topics = [
                t.model_copy(
                    update={
                        "partitions": [
                            p._replace(committed_offset=max(0, p.committed_offset - 10)) for p in t.partitions
                        ]
                    }
                )
                for t in request.topics
            ]
            return original(request.model_copy(update={"topics": topics}))

        coordinator.offset_commit = offset_commit
        lab.close("A")  # B takes A's partitions from the offsets stored

    stepped = check_both_ways(store_ten_less, "reprocessing-explained")
    text = next(e.body.explanation for e in stepped if e.body.kind.value == "invariant_violated")
    assert (
        text.startswith("B processed foo-")
        and "the offset the group's last successful commit was acknowledged at when B" in text
    )
    first, last = map(int, text.split(" again")[0].rsplit(" ", 1)[1].split(".."))
    acknowledged = int(text.split("below ")[1].split(",")[0])
    assert (first, last) == (acknowledged - 10, acknowledged - 1)  # exactly the ten records stored short


def test_no_skip_catches_a_consumer_that_starts_past_what_was_processed() -> None:
    """OffsetFetch answers fifty records past the committed offset: the new owner would never process them."""

    def answer_fifty_more(lab: Lab) -> None:
        def fifty_more(p: Any) -> Any:
            return p.model_copy(update={"committed_offset": p.committed_offset + 50}) if p.committed_offset >= 0 else p

        def change(result: CoordinatorResult) -> CoordinatorResult:
            groups = [
                g.model_copy(
                    update={
                        "topics": [
                            t.model_copy(update={"partitions": list(map(fifty_more, t.partitions))}) for t in g.topics
                        ]
                    }
                )
                for g in result.response.groups
            ]
            return replace(result, response=result.response.model_copy(update={"groups": groups}))

        on_coordinator(lab, "offset_fetch", change)
        lab.close("A")

    stepped = check_both_ways(answer_fifty_more, "no-skip")
    text = next(e.body.explanation for e in stepped if e.body.kind.value == "invariant_violated")
    assert text.startswith("B starts foo-") and "(committed), but group g has processed" in text
    owed, start = int(text.split("only up to ")[1].split(":")[0]), int(text.split(" at ")[1].split(" ")[0])
    assert start - owed == 50


def test_commits_monotonic_catches_a_member_committing_an_old_position() -> None:
    def commit_zero(lab: Lab) -> None:
        a = lab.clients["A"]
        a._commit([], None, extra=dict.fromkeys(sorted(a.fetching), 0), cause="manual")

    stepped = check_both_ways(commit_zero, "commits-monotonic")
    texts = [e.body.explanation for e in stepped if e.body.kind.value == "invariant_violated"]
    assert texts and all(
        t.startswith("A's commit moved group g's offset for foo-") and t.endswith(" to 0") for t in texts
    )


def test_two_groups_reading_one_topic_share_partitions_legitimately() -> None:
    lab = Lab(seed=0, config=LabConfig(raise_on_violation=True))
    lab.create_topic("foo", 4)
    lab.add_consumer("A", subscribed_topic_names=["foo"], group_id="g1")
    lab.add_consumer("B", subscribed_topic_names=["foo"], group_id="g2")
    assert lab.run_until_stable()
    assert lab.clients["A"].owned == lab.clients["B"].owned and len(lab.clients["A"].owned) == 4
    assert lab.invariants.violations == []


def test_a_healthy_run_full_of_faults_violates_nothing() -> None:
    rng = random.Random(4)
    link = LinkConfig(latency=LatencyModel(kind="uniform", low=1, high=40), drop_probability=0.03)
    lab = Lab(seed=4, config=LabConfig(raise_on_violation=True, link=link))
    lab.create_topic("foo", 8)
    lab.create_topic("bar", 3)
    names = "ABCDE"
    for name in names:
        lab.add_consumer(
            name,
            subscribed_topic_names=["foo"],
            instance_id="static-E" if name == "E" else None,
            max_poll_interval_ms=20_000,
            request_timeout_ms=5_000,
            callbacks=CallbackConfig(
                on_partitions_revoked_ms=rng.randrange(1_500),
                on_partitions_assigned_ms=rng.randrange(500),
                revoked_failures=1 if name == "D" else 0,
            ),
        )
    faults = [
        lambda: lab.crash("B"),
        lambda: lab.restart("B"),
        lambda: lab.pause("C"),
        lambda: lab.resume("C"),
        lambda: lab.add_partitions("foo", 2),
        lambda: lab.fail_over(),
        lambda: lab.partition_link("D", 50_000),
        lambda: lab.change_subscription("A", topics=["foo", "bar"]),
        lambda: lab.close("E"),
        lambda: lab.restart("E"),
        lambda: lab.delete_topic("bar"),
        lambda: lab.drop_messages("A", 2),
        lambda: lab.delay_messages("B", 3, 2_000),
    ]
    for fault in faults:
        lab.run(until=lab.now + rng.randrange(5_000, 25_000))
        fault()
    lab.run(until=lab.now + 120_000)
    assert lab.step_count > 1_000
    assert lab.invariants.violations == []
    assert not [e for e in lab.trace if e.kind.value == "invariant_violated"]
    assert lab.run_until_stable()
