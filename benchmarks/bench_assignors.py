"""Time the server-side assignors at the sizes KIP-848 cares about.

Run ``python -m benchmarks.bench_assignors`` (or ``--quick`` for small sizes). Only the
assign call is timed; building the spec and checking the result happen outside. Every
result is checked for exactly-once coverage, so a fast but wrong assignor cannot PASS. In
full mode the exit status is 1 when a case misses its target; quick mode has no targets.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kip_lab.assignors import (
    AssignmentSpec,
    GroupAssignment,
    MemberSubscription,
    TopicMetadata,
    range_assign,
    uniform_assign,
)


@dataclass(frozen=True)
class BenchRow:
    """One line of the report; ``target_ms`` is None where there is nothing to meet.

    The target applies to the median; the best run is shown too, since on a shared machine
    the gap between the two is the noise.
    """

    case: str
    median_ms: float
    best_ms: float
    target_ms: float | None

    @property
    def verdict(self) -> str:
        if self.target_ms is None:
            return "-"
        return "PASS" if self.median_ms <= self.target_ms else "FAIL"


@dataclass(frozen=True)
class BenchCase:
    """A benchmark: how to build its spec (untimed), what to time, and its target."""

    case: str
    build: Callable[[], AssignmentSpec]
    assign: Callable[[AssignmentSpec], GroupAssignment]
    target_ms: float | None


def _topics(topic_count: int, partitions_per_topic: int) -> dict[str, TopicMetadata]:
    return {
        f"topic-{t:02d}": TopicMetadata(f"topic-{t:02d}", f"name-{t:02d}", partitions_per_topic)
        for t in range(topic_count)
    }


def homogeneous_spec(member_count: int, topic_count: int, partitions_per_topic: int) -> AssignmentSpec:
    """Everyone subscribes to every topic, nobody holds anything yet."""
    topics = _topics(topic_count, partitions_per_topic)
    members = {
        f"member-{m:05d}": MemberSubscription(subscribed_topic_ids=frozenset(topics)) for m in range(member_count)
    }
    return AssignmentSpec(members=members, topics=topics)


def joining_spec(member_count: int, topic_count: int, partitions_per_topic: int) -> AssignmentSpec:
    """A balanced group (its own previous uniform output as targets) plus one empty member."""
    start = homogeneous_spec(member_count, topic_count, partitions_per_topic)
    previous = uniform_assign(start)
    members = {
        member_id: MemberSubscription(subscription.subscribed_topic_ids, previous[member_id])
        for member_id, subscription in start.members.items()
    }
    members["member-new"] = MemberSubscription(frozenset(start.topics))
    return AssignmentSpec(members=members, topics=start.topics)


def heterogeneous_spec(member_count: int, topic_count: int, partitions_per_topic: int) -> AssignmentSpec:
    """Member m subscribes to a window of 1 to 4 consecutive topics starting at topic m."""
    topics = _topics(topic_count, partitions_per_topic)
    names = sorted(topics)
    members = {}
    for m in range(member_count):
        window = 1 + m % 4
        subscribed = frozenset(names[(m + k) % topic_count] for k in range(window))
        members[f"member-{m:05d}"] = MemberSubscription(subscribed_topic_ids=subscribed)
    return AssignmentSpec(members=members, topics=topics)


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
            250.0,
        ),
        BenchCase(
            "uniform one joins 10,000x100,000",
            lambda: joining_spec(10_000, 10, 10_000),
            uniform_assign,
            100.0,
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
    timings = []
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        result = case.assign(spec)
        timings.append((time.perf_counter() - started) * 1000)
        del result  # freeing the result is the caller's cost, not the assignor's
    return BenchRow(case.case, statistics.median(timings), min(timings), case.target_ms)


def run_benchmarks(quick: bool = False, runs: int | None = None) -> list[BenchRow]:
    runs = runs if runs is not None else (3 if quick else 7)
    return [time_case(case, runs) for case in _cases(quick)]


def format_table(rows: list[BenchRow]) -> str:
    width = max(len(row.case) for row in rows)
    lines = [f"{'case':<{width}}  {'median ms':>10}  {'best ms':>8}  {'target ms':>10}  result"]
    for row in rows:
        target = "-" if row.target_ms is None else f"{row.target_ms:.0f}"
        lines.append(f"{row.case:<{width}}  {row.median_ms:>10.1f}  {row.best_ms:>8.1f}  {target:>10}  {row.verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, no targets (smoke test)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per case (median reported)")
    args = parser.parse_args(argv)
    rows = run_benchmarks(quick=args.quick, runs=args.runs)
    print(format_table(rows))
    return 1 if any(row.verdict == "FAIL" for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
