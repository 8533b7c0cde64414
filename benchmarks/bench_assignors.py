"""Time the server-side assignors at the sizes KIP-848 cares about.

Run ``python -m benchmarks.bench_assignors`` (or ``--quick`` for small sizes). Only the
assign call is timed; building the spec and checking the result happen outside. As in Kafka's
``ServerSideAssignorBenchmark``, topic ids are random ``Uuid``s and the spec carries the group's
subscription type. Every result is checked for exactly-once coverage, so a fast but wrong
assignor cannot PASS. Each row shows the median wall and CPU time; in full mode the exit status
is 1 when a case's median CPU time misses its target; quick mode has no targets.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import BenchRow, median_benchmark_main, time_runs
from kip_lab.assignors import (
    AssignmentSpec,
    GroupAssignment,
    MemberSubscription,
    SubscriptionType,
    TopicMetadata,
    range_assign,
    uniform_assign,
)
from kip_lab.cluster import random_topic_id


@dataclass(frozen=True)
class BenchCase:
    """A benchmark: how to build its spec (untimed), what to time, and its target."""

    case: str
    build: Callable[[], AssignmentSpec]
    assign: Callable[[AssignmentSpec], GroupAssignment]
    target_ms: float | None


def _topics(topic_count: int, partitions_per_topic: int) -> dict[str, TopicMetadata]:
    """Topics with Kafka-style random ids (the same ones every run)."""
    rng = random.Random(topic_count)
    ids = [random_topic_id(rng) for _ in range(topic_count)]
    return {ids[t]: TopicMetadata(ids[t], f"topic-{t:02d}", partitions_per_topic) for t in range(topic_count)}


def homogeneous_spec(member_count: int, topic_count: int, partitions_per_topic: int) -> AssignmentSpec:
    """Everyone subscribes to every topic, nobody holds anything yet."""
    topics = _topics(topic_count, partitions_per_topic)
    members = {
        f"member-{m:05d}": MemberSubscription(subscribed_topic_ids=frozenset(topics)) for m in range(member_count)
    }
    return AssignmentSpec(members=members, topics=topics, subscription_type=SubscriptionType.HOMOGENEOUS)


def joining_spec(member_count: int, topic_count: int, partitions_per_topic: int) -> AssignmentSpec:
    """A balanced group (its own previous uniform output as targets) plus one empty member."""
    start = homogeneous_spec(member_count, topic_count, partitions_per_topic)
    previous = uniform_assign(start)
    members = {
        member_id: MemberSubscription(subscription.subscribed_topic_ids, previous[member_id])
        for member_id, subscription in start.members.items()
    }
    members["member-new"] = MemberSubscription(frozenset(start.topics))
    return AssignmentSpec(members=members, topics=start.topics, subscription_type=SubscriptionType.HOMOGENEOUS)


def heterogeneous_spec(member_count: int, topic_count: int, partitions_per_topic: int) -> AssignmentSpec:
    """Member m subscribes to a window of 1 to 4 consecutive topics starting at topic m."""
    topics = _topics(topic_count, partitions_per_topic)
    names = list(topics)  # topic m, m + 1, ...
    members = {}
    for m in range(member_count):
        window = 1 + m % 4
        subscribed = frozenset(names[(m + k) % topic_count] for k in range(window))
        members[f"member-{m:05d}"] = MemberSubscription(subscribed_topic_ids=subscribed)
    return AssignmentSpec(members=members, topics=topics, subscription_type=SubscriptionType.HETEROGENEOUS)


def check_coverage(spec: AssignmentSpec, assignment: GroupAssignment) -> None:
    """Raise unless every partition of a subscribed topic is assigned exactly once."""
    subscribed = set().union(*(m.subscribed_topic_ids for m in spec.members.values()))
    for topic_id in subscribed & set(spec.topics):
        owned = [p for a in assignment.values() for p in a.get(topic_id, ())]
        if sorted(owned) != list(range(spec.topics[topic_id].num_partitions)):
            raise AssertionError(f"{topic_id} is not covered exactly once")
    if set(assignment) != set(spec.members):
        raise AssertionError("the assignment does not list every member")


def _cases(quick: bool) -> list[BenchCase]:
    if quick:
        return [
            BenchCase(
                "uniform homogeneous scratch 50x500",
                lambda: homogeneous_spec(50, 5, 100),
                uniform_assign,
                None,
            ),
            BenchCase("uniform one joins 50x500", lambda: joining_spec(50, 5, 100), uniform_assign, None),
            BenchCase("range 50x500", lambda: homogeneous_spec(50, 5, 100), range_assign, None),
            BenchCase("uniform heterogeneous 50x500", lambda: heterogeneous_spec(50, 5, 100), uniform_assign, None),
        ]
    return [
        BenchCase(
            "uniform homogeneous scratch 1,000x10,000",
            lambda: homogeneous_spec(1_000, 10, 1_000),
            uniform_assign,
            20.0,
        ),
        BenchCase(
            "uniform homogeneous scratch 10,000x100,000",
            lambda: homogeneous_spec(10_000, 10, 10_000),
            uniform_assign,
            20.0,
        ),
        BenchCase(
            "uniform one joins 10,000x100,000",
            lambda: joining_spec(10_000, 10, 10_000),
            uniform_assign,
            20.0,
        ),
        BenchCase("range 10,000x100,000", lambda: homogeneous_spec(10_000, 10, 10_000), range_assign, 250.0),
        BenchCase(
            "uniform heterogeneous 1,000x10,000",
            lambda: heterogeneous_spec(1_000, 10, 1_000),
            uniform_assign,
            None,
        ),
    ]


def time_case(case: BenchCase, runs: int) -> BenchRow:
    """Median wall time of ``runs`` assign calls on one prebuilt spec, after a checked warm-up."""
    spec = case.build()
    check_coverage(spec, case.assign(spec))
    return time_runs(case.case, lambda: partial(case.assign, spec), runs, case.target_ms)


def run_benchmarks(quick: bool = False, runs: int | None = None) -> list[BenchRow]:
    runs = runs if runs is not None else (3 if quick else 7)
    return [time_case(case, runs) for case in _cases(quick)]


def main(argv: list[str] | None = None) -> int:
    return median_benchmark_main(__doc__, argv, run_benchmarks)


if __name__ == "__main__":
    sys.exit(main())
