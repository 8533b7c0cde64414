"""Time the client-side (classic protocol) assignors at 500 members x 5,000 partitions.

Run ``python -m benchmarks.bench_client_assignors`` (or ``--quick`` for small sizes). Only the
leader's ``assign`` call is timed; building the subscriptions and checking the result happen
outside. Every result is checked: exactly-once coverage for the eager cases, and for the
cooperative rebalances that only partitions changing owner are withheld. The 2 s target for
cooperative-sticky (from scratch, one joining, one leaving) recalls librdkafka's port, which
took 30 s near this size before it was fixed. Range is also timed at 1,000 members x 10,000
partitions and, when kafka-python is installed (an optional benchmark dependency), against
kafka-python's ``RangePartitionAssignor`` on the same group: its median is range's target there.
Each row shows the median wall and CPU time; in full mode the exit status is 1 when a case's
median CPU time misses its target.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import SimpleNamespace

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import BenchRow, median_benchmark_main, time_runs
from kip_lab.assignors.client import client_assignor, partitions_transferring_ownership
from kip_lab.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription

Subscriptions = dict[str, ConsumerProtocolSubscription]


@dataclass(frozen=True)
class Group:
    """The leader's input: metadata and every member's subscription."""

    partitions_per_topic: dict[str, int]
    subscriptions: Subscriptions


@dataclass(frozen=True)
class ClientBenchCase:
    """A benchmark: the assignor, how to build its group (untimed), and its target."""

    case: str
    assignor: str
    build: Callable[[], Group]
    target_ms: float | None


def _topics(topic_count: int, partitions_per_topic: int) -> dict[str, int]:
    return {f"topic-{t:02d}": partitions_per_topic for t in range(topic_count)}


def scratch_group(member_count: int, topic_count: int, partitions_per_topic: int) -> Group:
    """Everyone subscribes to every topic and owns nothing."""
    topics = _topics(topic_count, partitions_per_topic)
    subscription = ConsumerProtocolSubscription(version=3, topics=list(topics))
    return Group(topics, {f"member-{m:05d}": subscription for m in range(member_count)})


def heterogeneous_group(member_count: int, topic_count: int, partitions_per_topic: int) -> Group:
    """Member m subscribes to a window of 1 to 4 consecutive topics starting at topic m."""
    topics = _topics(topic_count, partitions_per_topic)
    names = sorted(topics)
    return Group(
        topics,
        {
            f"member-{m:05d}": ConsumerProtocolSubscription(
                version=3, topics=[names[(m + k) % topic_count] for k in range(1 + m % 4)]
            )
            for m in range(member_count)
        },
    )


def _balanced(member_count: int, topic_count: int, partitions_per_topic: int) -> Group:
    """A settled group: each member owns what cooperative-sticky gave it from scratch."""
    start = scratch_group(member_count, topic_count, partitions_per_topic)
    settled = client_assignor("cooperative-sticky").assign(start.partitions_per_topic, start.subscriptions)
    return Group(
        start.partitions_per_topic,
        {
            member_id: ConsumerProtocolSubscription(
                version=3,
                topics=list(start.partitions_per_topic),
                owned_partitions=assignment.assigned_partitions,
                generation_id=1,
            )
            for member_id, assignment in settled.items()
        },
    )


def joining_group(member_count: int, topic_count: int, partitions_per_topic: int) -> Group:
    """A settled group of ``member_count`` plus one member that owns nothing."""
    group = _balanced(member_count, topic_count, partitions_per_topic)
    joiner = ConsumerProtocolSubscription(version=3, topics=list(group.partitions_per_topic))
    return Group(group.partitions_per_topic, group.subscriptions | {"member-joiner": joiner})


def leaving_group(member_count: int, topic_count: int, partitions_per_topic: int) -> Group:
    """A settled group of ``member_count + 1`` after its first member left."""
    group = _balanced(member_count + 1, topic_count, partitions_per_topic)
    leaver = min(group.subscriptions)
    return Group(group.partitions_per_topic, {m: s for m, s in group.subscriptions.items() if m != leaver})


def check_result(name: str, group: Group, result: dict[str, ConsumerProtocolAssignment]) -> None:
    """Raise unless every partition is assigned once, or withheld because it changes owner."""
    if list(result) != sorted(group.subscriptions):
        raise AssertionError("the assignment does not list every member once")
    owners: dict[tuple[str, int], str] = {}
    for member_id, assignment in result.items():
        for tp in assignment.assigned_partitions:
            if owners.setdefault(tp, member_id) != member_id:
                raise AssertionError(f"{tp} is assigned twice")
    expected = {(t, p) for t, count in group.partitions_per_topic.items() for p in range(count)}
    if owners.keys() - expected:
        raise AssertionError("a partition that does not exist was assigned")
    missing = expected - owners.keys()
    if name != "cooperative-sticky":
        if missing:
            raise AssertionError("the partitions are not covered exactly once")
        return
    claimed = {tp for s in group.subscriptions.values() for tp in s.owned_partitions}
    if not missing <= claimed:
        raise AssertionError("a partition nobody owns was withheld")
    intent = {m: a.assigned_partitions for m, a in result.items()}
    if partitions_transferring_ownership(intent, group.subscriptions):
        raise AssertionError("a partition went to a new owner while its old owner still claims it")


def kafka_python_range() -> Callable[[Group], Callable[[], object]] | None:
    """kafka-python's range assignor as a call on one group, or None when kafka-python is not installed."""
    try:
        from kafka.coordinator.assignors.range import RangePartitionAssignor
    except ImportError:
        return None

    def prepare(group: Group) -> Callable[[], object]:
        counts = group.partitions_per_topic
        cluster = SimpleNamespace(
            partitions_for_topic=lambda topic: set(range(counts[topic])) if topic in counts else None
        )
        members = [
            SimpleNamespace(member_id=m, group_instance_id=None, metadata=SimpleNamespace(topics=list(s.topics)))
            for m, s in group.subscriptions.items()
        ]
        assignment = RangePartitionAssignor.assign(cluster, members)
        assigned = sorted((t, p) for a in assignment.values() for t, ps in a.assigned_partitions for p in ps)
        if assigned != sorted((t, p) for t, count in counts.items() for p in range(count)):
            raise AssertionError("kafka-python's range did not cover the partitions exactly once")
        return partial(RangePartitionAssignor.assign, cluster, members)

    return prepare


def _cases(quick: bool) -> list[ClientBenchCase]:
    members, topics, per_topic = (50, 5, 100) if quick else (500, 10, 500)
    size = f"{members}x{topics * per_topic:,}"
    cooperative_target = None if quick else 2_000.0
    return [
        ClientBenchCase(
            f"cooperative-sticky scratch {size}",
            "cooperative-sticky",
            lambda: scratch_group(members, topics, per_topic),
            cooperative_target,
        ),
        ClientBenchCase(
            f"cooperative-sticky one joins {size}",
            "cooperative-sticky",
            lambda: joining_group(members, topics, per_topic),
            cooperative_target,
        ),
        ClientBenchCase(
            f"cooperative-sticky one leaves {size}",
            "cooperative-sticky",
            lambda: leaving_group(members, topics, per_topic),
            cooperative_target,
        ),
        ClientBenchCase(
            f"cooperative-sticky heterogeneous {size}",
            "cooperative-sticky",
            lambda: heterogeneous_group(members, topics, per_topic),
            None,
        ),
        ClientBenchCase(f"sticky scratch {size}", "sticky", lambda: scratch_group(members, topics, per_topic), None),
        ClientBenchCase(f"range {size}", "range", lambda: scratch_group(members, topics, per_topic), None),
        ClientBenchCase(f"roundrobin {size}", "roundrobin", lambda: scratch_group(members, topics, per_topic), None),
    ]


def range_against_kafka_python(quick: bool, runs: int) -> list[BenchRow]:
    """Range at each size, and kafka-python's range on the same group when it is installed (its median: the target).

    The two alternate run by run, so that other work on the machine weighs on both alike.
    """
    sizes = [(50, 5, 100)] if quick else [(500, 10, 500), (1_000, 10, 1_000)]
    theirs = kafka_python_range()
    rows = []
    for members, topics, per_topic in sizes:
        group = scratch_group(members, topics, per_topic)
        size = f"{members:,}x{topics * per_topic:,}"
        assignor = client_assignor("range")
        check_result("range", group, assignor.assign(group.partitions_per_topic, group.subscriptions))
        ours = partial(assignor.assign, group.partitions_per_topic, group.subscriptions)
        if theirs is None:
            rows.append(time_runs(f"range vs kafka-python {size}", lambda call=ours: call, runs, None))
            continue
        reference = theirs(group)
        pairs = [
            (time_runs("", lambda call=reference: call, 1, None), time_runs("", lambda call=ours: call, 1, None))
            for _ in range(runs)
        ]
        kafka_python = _merged(f"kafka-python range {size}", [theirs_run for theirs_run, _ in pairs], None)
        target = None if quick else kafka_python.median_cpu_ms
        rows += [kafka_python, _merged(f"range vs kafka-python {size}", [our_run for _, our_run in pairs], target)]
    return rows


def _merged(case: str, single_runs: list[BenchRow], target_ms: float | None) -> BenchRow:
    """One row from single-run rows: the medians and the best of their times."""
    return BenchRow(
        case,
        statistics.median(row.median_ms for row in single_runs),
        min(row.best_ms for row in single_runs),
        target_ms,
        statistics.median(row.median_cpu_ms for row in single_runs if row.median_cpu_ms is not None),
    )


def time_case(case: ClientBenchCase, runs: int) -> BenchRow:
    """Median wall time of ``runs`` assign calls on one prebuilt group, after a checked warm-up."""
    group = case.build()
    assignor = client_assignor(case.assignor)
    check_result(case.assignor, group, assignor.assign(group.partitions_per_topic, group.subscriptions))
    timed = partial(assignor.assign, group.partitions_per_topic, group.subscriptions)
    return time_runs(case.case, lambda: timed, runs, case.target_ms)


def run_benchmarks(quick: bool = False, runs: int | None = None) -> list[BenchRow]:
    runs = runs if runs is not None else (3 if quick else 7)
    return [time_case(case, runs) for case in _cases(quick)] + range_against_kafka_python(quick, runs)


def main(argv: list[str] | None = None) -> int:
    return median_benchmark_main(__doc__, argv, run_benchmarks)


if __name__ == "__main__":
    sys.exit(main())
