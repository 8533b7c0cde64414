"""Classic consumers' offsets in the Lab, end to end: what a user counts.

Every auto-commit of a classic member is accepted and the group's committed offsets follow the
members' positions; a member that crashes is replaced by one that starts exactly at the last
committed offsets (re-reading only the crashed member's uncommitted progress, skipping nothing);
and a classic member inside a consumer group (online migration) commits with its generation,
which is its member epoch.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from kip_lab.clients import ConsumerConfig
from kip_lab.events import MessageDelivered, MessageSent
from kip_lab.lab import Lab
from kip_lab.protocol import Errors

RATE_PER_S = 10  # records produced per second to each partition
INTERVAL_MS = 5_000  # auto.commit.interval.ms (the default)


def classic_lab(strategy: str, seed: int = 3, members: str = "AB", **settings) -> Lab:
    lab = Lab(seed=seed)
    lab.create_topic("t", 4, produce_rate_per_s=RATE_PER_S)
    for name in members:
        lab.add_consumer(
            name,
            group_protocol="classic",
            subscribed_topic_names=["t"],
            partition_assignment_strategy=[strategy],
            **settings,
        )
    return lab


def commits(lab: Lab, member: str, since_ms: int = 0, until_ms: int | None = None) -> list[tuple]:
    """``member``'s OffsetCommit requests sent in [since_ms, until_ms), each with the response it
    received (None if none came)."""
    until_ms = lab.now if until_ms is None else until_ms
    requests, responses = [], {}
    for e in lab.trace.of_type(MessageSent):
        if e.body.api != "OffsetCommit":
            continue
        if e.body.source == member and since_ms <= e.time_ms < until_ms:
            requests.append(e.body)
        elif e.body.destination == member:
            responses[e.body.id] = e.body
    delivered = {
        responses[e.body.id].correlation_id: responses[e.body.id].message
        for e in lab.trace.of_type(MessageDelivered)
        if e.actor == member and e.body.id in responses
    }
    return [(r.message, delivered.get(r.correlation_id)) for r in requests]


def all_accepted(exchanges: list[tuple]) -> bool:
    """Every request answered, every partition of every answer without error."""
    return all(
        answer is not None and all(p.error_code is Errors.NONE for t in answer.topics for p in t.partitions)
        for _, answer in exchanges
    )


def committed_by_partition(lab: Lab, group: str = "g") -> dict[int, int]:
    return {p: value.offset for (_, p), value in lab.coordinator.offsets.get(group, {}).items()}


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_every_auto_commit_of_two_classic_consumers_succeeds_and_the_offsets_follow_them(strategy):
    """Two classic consumers (eager or cooperative), auto-commit on, for 60 s: every OffsetCommit is
    answered without error, each partition's committed offset only goes up, and at the end it
    is what its owner committed last, at most one interval's records behind the owner's position."""
    lab = classic_lab(strategy)
    lab.run(until=60_000)
    committed_offsets: dict[int, list[int]] = defaultdict(list)
    total = 0
    for member in "AB":
        exchanges = commits(lab, member, until_ms=59_900)  # the answer to a later one may be on its way
        assert all_accepted(exchanges)
        total += len(exchanges)
        for request, _ in exchanges:
            for topic in request.topics:
                for p in topic.partitions:
                    committed_offsets[p.partition_index].append(p.committed_offset)
    # joined at ~6 s, then one commit per member every 5 s: 10 or 11 each
    assert 20 <= total <= 22, total
    for offsets in committed_offsets.values():
        assert offsets == sorted(offsets) and offsets[-1] > offsets[0]
    final = committed_by_partition(lab)
    assert sorted(final) == [0, 1, 2, 3]
    for name, client in lab.clients.items():
        positions = client._positions(client.fetching)
        assert {tp[1] for tp in positions} == {tp[1] for tp in client.committed}, name
        for tp, position in positions.items():
            assert final[tp[1]] == client.committed[tp]
            assert 0 <= position - final[tp[1]] <= RATE_PER_S * INTERVAL_MS // 1_000
    assert final[0] >= RATE_PER_S * 50  # the last commit, after 50 s of 10 records/s
    assert lab.invariants.violations == []


def starts(lab: Lab, until_ms: int) -> dict[tuple[str, int], tuple[int, int | None]]:
    """Step to ``until_ms``; each (member, partition) a member starts fetching -> (where it started,
    the group's committed offset at that moment)."""
    seen: dict[tuple[str, int, int], tuple[int, int | None]] = {}
    while lab.now < until_ms and lab.has_next():
        lab.step()
        committed = committed_by_partition(lab)
        for name, client in lab.clients.items():
            for tp, fetch in client.fetching.items():
                seen.setdefault((name, tp[1], fetch.since_ms), (fetch.offset, committed.get(tp[1])))
    return {(name, p): where for (name, p, _), where in sorted(seen.items(), key=lambda kv: kv[0][2])}


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_crashed_classic_member_is_replaced_at_exactly_the_committed_offsets(strategy):
    """A crashes 3 s after a commit: B takes A's partitions once A's session expires and starts each
    at the offset A committed last, never past it (nothing skipped) and re-reads only what A had
    processed since (30 records a partition at 10 records/s); then a restarted A resumes where B
    committed."""
    lab = classic_lab(strategy, session_timeout_ms=10_000)
    assert lab.run_until_stable()
    lab.run(until=lab.now + 12_000)
    a = lab.clients["A"]
    crashed_at = a._positions(a.fetching)
    committed_at_crash = dict(a.committed)
    assert crashed_at and all(crashed_at[tp] > committed_at_crash[tp] for tp in crashed_at)
    lab.crash("A")
    taken = starts(lab, lab.now + 30_000)
    for tp, last_commit in committed_at_crash.items():
        start, committed = taken[("B", tp[1])]
        assert start == committed == last_commit
        assert crashed_at[tp] - start == 30  # A's uncommitted progress, re-read by B
    lab.restart("A")
    back = starts(lab, lab.now + 30_000)
    resumed = {p: where for (name, p), where in back.items() if name == "A"}
    assert resumed  # the new A got partitions back
    assert all(start == committed for start, committed in resumed.values())
    assert lab.invariants.violations == []


def test_a_classic_member_inside_a_consumer_group_commits_with_its_generation():
    """Online migration: A comes back on the consumer protocol and the group becomes a consumer
    group; B, still classic, commits with its generation, which is its member epoch there (Kafka
    ``ConsumerGroup.validateOffsetCommit``), and every commit of both is accepted."""
    lab = classic_lab("range", seed=1)
    assert lab.run_until_stable()
    lab.close("A")
    lab.restart("A", ConsumerConfig(subscribed_topic_names=["t"]))
    assert lab.run_until_stable()
    since_ms = lab.now
    lab.run(until=lab.now + 30_000)
    group = lab.coordinator.groups["g"]
    b = lab.clients["B"]
    assert group.members[b.member_id].uses_classic_protocol
    epoch = group.members[b.member_id].member_epoch
    assert b.generation_id == epoch
    exchanges = {member: commits(lab, member, since_ms, lab.now - 100) for member in "AB"}
    assert all(all_accepted(e) for e in exchanges.values())
    assert {request.generation_id_or_member_epoch for request, _ in exchanges["B"]} == {epoch}
    assert all(len(e) >= 30_000 // INTERVAL_MS - 1 for e in exchanges.values())
    final = committed_by_partition(lab)
    for client in (lab.clients["A"], b):
        for tp, position in client._positions(client.fetching).items():
            assert 0 <= position - final[tp[1]] <= RATE_PER_S * INTERVAL_MS // 1_000
    assert lab.invariants.violations == []
