"""What a consumer does when its auto-commit is refused, end to end, as Kafka's does.

A coordinator that moved (NOT_COORDINATOR) is retried after ``retry.backoff.ms`` by both consumers
(``ConsumerCoordinator.autoCommitOffsetsAsync``, ``CommitRequestManager.maybeResetTimerWithBackoff``).
For the classic consumer, Kafka's ``ConsumerCoordinator.OffsetCommitResponseHandler.handle`` decides
the rest, by the error of the first partition refused:
UNKNOWN_MEMBER_ID resets the member and rejoins (``resetStateOnResponseError``); a static member whose
instance id now belongs to a newer process is fenced (FENCED_INSTANCE_ID, fatal: its next poll
throws ``FencedInstanceIdException``), which it can only hear because its OffsetCommit names its
``group.instance.id`` (``sendOffsetCommitRequest``). Each test counts the records from the ledger.
"""

from __future__ import annotations

from typing import Any

import pytest

from kip_lab.events import CommitResult, MessageSent, PositionSet, StateTransition
from kip_lab.lab import Lab, LabConfig
from kip_lab.lab.ledger import build_ledger
from kip_lab.lab.metrics import compute_metrics

RATE_PER_S = 20  # records per second per partition
CLASSIC: dict[str, Any] = {"group_protocol": "classic", "partition_assignment_strategy": ["range"]}


def pair_of(settings: dict[str, Any]) -> Lab:
    """A and B share foo's four partitions (A: foo-0, foo-1)."""
    lab = Lab(seed=3, config=LabConfig(raise_on_violation=True))
    lab.create_topic("foo", 4, produce_rate_per_s=RATE_PER_S)
    for name in "AB":
        lab.add_consumer(name, subscribed_topic_names=["foo"], **settings)
    return lab


def classic_pair(**settings: Any) -> Lab:
    """Two classic consumers; the group starts after its 3 s initial delay."""
    return pair_of({**CLASSIC, **settings})


def commit_results(lab: Lab, member: str) -> list[tuple[int, list[tuple[int, int, str | None]]]]:
    """``member``'s commits: (time, [(partition, offset, error)])."""
    return [
        (e.time_ms, [(p, offset, error) for _, p, offset, error in e.body.offsets])
        for e in lab.trace.of_type(CommitResult)
        if e.actor == member
    ]


def transitions(lab: Lab, member: str, since_ms: int) -> list[tuple[int, str, str]]:
    return [
        (e.time_ms, e.body.to_state, e.body.trigger)
        for e in lab.trace.of_type(StateTransition)
        if e.actor == member and e.time_ms >= since_ms
    ]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_commit_refused_by_a_moved_coordinator_is_retried_after_the_backoff(protocol: str) -> None:
    """Both consumers (Kafka ``CommitRequestManager.maybeResetTimerWithBackoff`` for the new one)."""
    lab = classic_pair() if protocol == "classic" else pair_of({})
    lab.run(until=9_000)
    while not any(
        e.actor == "A" and isinstance(e.body, MessageSent) and e.body.api == "OffsetCommit" for e in lab.step()
    ):
        pass  # A's 10 s auto-commit is on its way to broker-0...
    lab.fail_over()  # ...which no longer hosts the group when it arrives
    lab.run(until=12_000)
    (refused_at, refused), (retried_at, retried) = commit_results(lab, "A")[-2:]
    assert {error for _, _, error in refused} == {"NOT_COORDINATOR"}
    assert {error for _, _, error in retried} == {None}
    assert retried_at - refused_at == 100 + 2  # retry.backoff.ms, then the round trip
    lab.crash("A")  # 1.9 s after the retried commit, instead of 7 s after the last one before it
    lab.run(until=90_000)  # past the session timeout: B takes foo-0 and foo-1
    metrics = compute_metrics(lab.trace)
    position_at_crash = 12_000 * RATE_PER_S // 1_000  # A keeps up with the log end
    uncommitted = sum(position_at_crash - offset for _, offset, _ in retried)
    assert metrics["records_reprocessed"] == uncommitted == 2 * (240 - 202)
    assert metrics["records_skipped"] == 0 and metrics["commits_failed"] == 1
    assert lab.invariants.violations == []


def test_a_member_the_group_removed_rejoins_when_its_commit_hears_unknown_member_id() -> None:
    lab = classic_pair(session_timeout_ms=6_000)
    lab.run(until=10_010)
    lab.partition_link("A", 8_000)  # past its session: the coordinator removes A, B takes its partitions
    lab.run(until=30_000)
    (_, before), (refused_at, refused), *after = commit_results(lab, "A")
    assert {error for _, _, error in before} == {None}
    assert {error for _, _, error in refused} == {"UNKNOWN_MEMBER_ID"} and refused_at == 20_002
    # The commit's answer, not the next heartbeat (a second later), sends A back: member id reset.
    assert transitions(lab, "A", refused_at)[:3] == [
        (refused_at, "UNJOINED", "fell out of the group"),
        (refused_at, "PREPARING_REBALANCE", "JoinGroup sent"),
        (refused_at + 2, "PREPARING_REBALANCE", "MEMBER_ID_REQUIRED, JoinGroup again"),
    ]
    assert after and {error for _, commits in after for _, _, error in commits} == {None}  # in the group again
    metrics = compute_metrics(lab.trace)
    assert metrics["records_skipped"] == 0 and metrics["commits_failed"] == 1
    assert lab.invariants.violations == []


def test_a_static_zombie_is_fenced_by_its_commit_and_only_its_uncommitted_records_are_re_read() -> None:
    lab = Lab(seed=3, config=LabConfig(raise_on_violation=True))
    lab.create_topic("foo", 4, produce_rate_per_s=RATE_PER_S)
    for name in "AB":
        lab.add_consumer(name, subscribed_topic_names=["foo"], instance_id=f"instance-{name}", **CLASSIC)
    lab.run(until=14_990)
    # A new process takes A's group.instance.id while A still runs: A is now a zombie.
    lab.add_consumer("A2", subscribed_topic_names=["foo"], instance_id="instance-A", **CLASSIC)
    lab.run(until=40_000)
    sent = [e.body for e in lab.trace.of_type(MessageSent) if e.body.source == "A" and e.body.api == "OffsetCommit"]
    assert {m.message.group_instance_id for m in sent} == {"instance-A"}
    (_, committed), (fenced_at, fenced) = commit_results(lab, "A")
    assert committed == [(0, 200, None), (1, 200, None)]
    assert fenced == [(0, 300, "FENCED_INSTANCE_ID"), (1, 300, "FENCED_INSTANCE_ID")]
    assert transitions(lab, "A", fenced_at) == [(fenced_at, "FATAL", "fatal error")]
    # A2 starts where A's last successful commit left A's partitions, and re-reads only what A
    # processed after it; nothing skipped; A2's commits carry the group on.
    starts = [
        (e.body.partition, e.body.offset, e.body.reason) for e in lab.trace.of_type(PositionSet) if e.actor == "A2"
    ]
    assert starts == [(0, 200, "committed"), (1, 200, "committed")]
    metrics = compute_metrics(lab.trace)
    assert metrics["records_reprocessed"] == 2 * (300 - 200)
    assert metrics["records_skipped"] == 0 and metrics["commits_failed"] == 1
    assert {error for _, commits in commit_results(lab, "A2") for _, _, error in commits} == {None}
    ledger = build_ledger(lab.trace)
    assert [p.last_committer for (_, (_, index)), p in ledger.partitions.items() if index in (0, 1)] == ["A2", "A2"]
    assert lab.invariants.violations == []
