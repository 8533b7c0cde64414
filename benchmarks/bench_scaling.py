"""How each cost grows with the size of its work: the growth exponent of every hot path.

Each cost is measured at four sizes spanning ten times (medians of CPU and wall time), and
its growth exponent fitted by least squares on log(time) against log(size). A cost whose work
grows linearly with the size should have an exponent near 1; the run exits 1 when one of them
exceeds 1.15 (a quadratic path creeping back in). The costs:

* the Lab's overhead: a group of n members on 10 n partitions from empty to stable, with
  assignment batching (``assignment_interval_ms=1000``), minus the time inside the assignor —
  everything the Lab, clients, network, coordinator and invariants do; its steps grow with n;
* the same join without batching (no limit: every join recomputes the whole target, so it is
  quadratic by design — the reason Kafka 4.3 added batching);
* the Lab steady state: 60 simulated seconds of the stable group;
* rebuilding a coordinator from the log of a stable n-member group (replay and load duties);
* 100 members joining a stable n-member group while batching holds the target back: the coordinator
  alone, whose cost per join must not grow with n (exponent near 0; the run fails above 0.3);
* the server-side uniform and range assignors, n members on 10 n partitions;
* the client-side range, round-robin and cooperative-sticky assignors;
* a share-partition's acquire and acknowledge of n records.

A second table judges the absolute targets on CPU time (wall time beside it): the batched join
of 1,000 members on 10,000 partitions at most 1.5 s, of 5,000 members on 50,000 partitions at
most 10 s, and the rebuild of a 5,000-member group from its log at most 300 ms.

Run ``python -m benchmarks.bench_scaling`` (``--quick``: small sizes, no limits).
"""

from __future__ import annotations

import gc
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_assignors import homogeneous_spec
from benchmarks.bench_client_assignors import scratch_group
from benchmarks.bench_coordinator import stable_group
from benchmarks.bench_share import acquire_accept
from benchmarks.common import benchmark_parser, verdict
from kip_lab.assignors import range_assign, uniform_assign
from kip_lab.assignors.client import client_assignor
from kip_lab.coordinator import CoordinatorConfig, GroupCoordinator
from kip_lab.lab import Lab, LabConfig, LatencyModel, LinkConfig
from kip_lab.protocol import ConsumerGroupHeartbeatRequest

LINEAR_LIMIT = 1.15
CONSTANT_LIMIT = 0.3  # a cost that should not grow with the size at all
LINK = LinkConfig(latency=LatencyModel(ms=10))


def growth_exponent(sizes: Sequence[float], times: Sequence[float]) -> float:
    """The slope of log(time) against log(size), by least squares."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(t, 1e-9)) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


@dataclass(frozen=True)
class Scaling:
    """One cost at several sizes: CPU and wall medians, and the fitted exponent of the CPU times."""

    cost: str
    unit: str
    sizes: tuple[int, ...]
    cpu: tuple[float, ...]  # seconds
    wall: tuple[float, ...]
    limit: float | None  # None: reported only

    @property
    def exponent(self) -> float:
        return growth_exponent(self.sizes, self.cpu)

    @property
    def verdict(self) -> str:
        return verdict(None if self.limit is None else self.exponent <= self.limit)


def measure(run: Callable[[], Callable[[], object]], repeats: int) -> tuple[float, float]:
    """Median CPU and wall seconds of ``repeats`` calls; ``run`` (untimed) prepares each call."""
    cpus, walls = [], []
    for _ in range(repeats):
        call = run()
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        result = call()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
        del result
    return statistics.median(cpus), statistics.median(walls)


def series(
    cost: str, unit: str, sizes: Sequence[int], prepare: Callable[[int], Callable[[], object]], repeats: int, limit
) -> Scaling:
    timed = [measure(lambda n=n: prepare(n), repeats) for n in sizes]
    return Scaling(cost, unit, tuple(sizes), tuple(c for c, _ in timed), tuple(w for _, w in timed), limit)


# ---------------------------------------------------------------------------------- the Lab
class TimedAssignor:
    """An assignor that keeps the CPU and wall time spent inside it (the Lab's overhead is the rest)."""

    def __init__(self, assignor) -> None:
        self.assignor = assignor
        self.name = assignor.name
        self.cpu = self.wall = 0.0

    def assign(self, spec):
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return self.assignor.assign(spec)
        finally:
            self.cpu += time.process_time() - cpu
            self.wall += time.perf_counter() - wall


def joined_lab(members: int, interval_ms: int) -> tuple[Lab, float, float, float, float]:
    """A group of ``members`` on 10x partitions run to stable: the lab, total CPU/wall and assignor CPU/wall."""
    config = LabConfig(link=LINK, coordinator=CoordinatorConfig(assignment_interval_ms=interval_ms))
    lab = Lab(seed=1, config=config)
    lab.coordinator.assignors = {name: TimedAssignor(a) for name, a in lab.coordinator.assignors.items()}
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    lab.create_topic("foo", 10 * members)
    for i in range(members):
        lab.add_consumer(f"m{i:05d}", subscribed_topic_names=["foo"])
    if not lab.run_until_stable():
        raise AssertionError(f"{members} members never became stable")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if lab.invariants.violations:
        raise AssertionError(f"invariants violated: {lab.invariants.violations[:3]}")
    inside = lab.coordinator.assignors.values()
    return lab, cpu, wall, sum(a.cpu for a in inside), sum(a.wall for a in inside)


def lab_series(sizes: Sequence[int], repeats: int) -> list[Scaling]:
    """The Lab's join with batching (overhead and total), without, and its steady state."""
    overhead_cpu, overhead_wall, total_cpu, total_wall, steady_cpu, steady_wall = ([] for _ in range(6))
    for n in sizes:
        runs = []
        for _ in range(repeats):
            lab, cpu, wall, assign_cpu, assign_wall = joined_lab(n, 1_000)
            runs.append((cpu - assign_cpu, wall - assign_wall, cpu, wall))
        overhead_cpu.append(statistics.median(r[0] for r in runs))
        overhead_wall.append(statistics.median(r[1] for r in runs))
        total_cpu.append(statistics.median(r[2] for r in runs))
        total_wall.append(statistics.median(r[3] for r in runs))
        steady = []
        for _ in range(repeats):
            gc.collect()
            cpu, wall = time.process_time(), time.perf_counter()
            lab.run(until=lab.now + 60_000)
            steady.append((time.process_time() - cpu, time.perf_counter() - wall))
        steady_cpu.append(statistics.median(c for c, _ in steady))
        steady_wall.append(statistics.median(w for _, w in steady))
        del lab
    unbatched = []
    for n in sizes:
        _, cpu, wall, _, _ = joined_lab(n, 0)
        unbatched.append((cpu, wall))
    sizes = tuple(sizes)
    return [
        Scaling(
            "Lab join, batching on: all but the assignor",
            "members",
            sizes,
            tuple(overhead_cpu),
            tuple(overhead_wall),
            LINEAR_LIMIT,
        ),
        Scaling("Lab join, batching on (assignment_interval_ms=1000)", "members", sizes, tuple(total_cpu),
                tuple(total_wall), LINEAR_LIMIT),
        Scaling("Lab join, batching off (a target per join)", "members", sizes, tuple(c for c, _ in unbatched),
                tuple(w for _, w in unbatched), None),
        Scaling("Lab steady state, 60 simulated s", "members", sizes, tuple(steady_cpu), tuple(steady_wall),
                LINEAR_LIMIT),
    ]


# ---------------------------------------------------------------------------------- the rest
def rebuild(members: int) -> Callable[[], object]:
    coordinator, cluster = stable_group(members, topics=10, partitions=max(members, 100))
    log = coordinator.log.truncated(coordinator.log.batch_count)
    return lambda: GroupCoordinator.from_log(log, CoordinatorConfig(), cluster)


def batched_joins(members: int) -> Callable[[], object]:
    """100 members join a stable group of ``members`` while batching holds the target back (the first
    join, untimed, computes a target; the next ones only bump the group epoch)."""
    coordinator, cluster = stable_group(members, topics=10, partitions=max(members, 100))
    log = coordinator.log.truncated(coordinator.log.batch_count)
    joined = GroupCoordinator.from_log(log, CoordinatorConfig(assignment_interval_ms=1_000), cluster)
    requests = [
        ConsumerGroupHeartbeatRequest(
            group_id="bench",
            member_id=f"joiner-{i:03d}",
            member_epoch=0,
            rebalance_timeout_ms=60_000,
            subscribed_topic_names=["topic-0"],
            topic_partitions=[],
        )
        for i in range(101)
    ]
    joined.consumer_group_heartbeat(requests[0])
    return partial(send_all, joined, requests[1:])


def send_all(coordinator: GroupCoordinator, requests: Sequence[ConsumerGroupHeartbeatRequest]) -> None:
    for request in requests:
        coordinator.consumer_group_heartbeat(request)


def server_assignor(assign) -> Callable[[int], Callable[[], object]]:
    def prepare(members: int) -> Callable[[], object]:
        spec = homogeneous_spec(members, 10, members)
        return lambda: assign(spec)

    return prepare


def client_side(name: str) -> Callable[[int], Callable[[], object]]:
    def prepare(members: int) -> Callable[[], object]:
        group = scratch_group(members, 10, members)
        assignor = client_assignor(name)
        return lambda: assignor.assign(group.partitions_per_topic, group.subscriptions)

    return prepare


def run_benchmarks(quick: bool) -> list[Scaling]:
    repeats = 1 if quick else 3
    limit = None if quick else LINEAR_LIMIT
    lab_sizes = (20, 40, 80, 200) if quick else (100, 200, 400, 1_000)
    rows = lab_series(lab_sizes, repeats)
    if quick:
        rows = [Scaling(r.cost, r.unit, r.sizes, r.cpu, r.wall, None) for r in rows]
    rebuild_sizes = (100, 200, 400, 1_000) if quick else (500, 1_000, 2_000, 5_000)
    assignor_sizes = (100, 200, 500, 1_000) if quick else (1_000, 2_000, 5_000, 10_000)
    client_sizes = (20, 50, 100, 200) if quick else (100, 200, 500, 1_000)
    sticky_sizes = (10, 20, 50, 100) if quick else (50, 100, 200, 500)
    share_sizes = (5_000, 10_000, 20_000, 50_000) if quick else (50_000, 100_000, 200_000, 500_000)
    rows += [
        series("rebuild from log + load duties", "members", rebuild_sizes, rebuild, repeats, limit),
        series(
            "100 batched joins into a stable group (coordinator)",
            "members",
            rebuild_sizes,
            batched_joins,
            repeats,
            None if quick else CONSTANT_LIMIT,
        ),
        series("uniform assignor", "members", assignor_sizes, server_assignor(uniform_assign), repeats, limit),
        series("range assignor", "members", assignor_sizes, server_assignor(range_assign), repeats, limit),
        series("client range assignor", "members", client_sizes, client_side("range"), repeats, limit),
        series("client roundrobin assignor", "members", client_sizes, client_side("roundrobin"), repeats, limit),
        series(
            "client cooperative-sticky assignor",
            "members",
            sticky_sizes,
            client_side("cooperative-sticky"),
            repeats,
            limit,
        ),
        series("share acquire + accept", "records", share_sizes, lambda n: acquire_accept(n, 500), repeats, limit),
    ]
    return rows


@dataclass(frozen=True)
class Target:
    """One absolute target, judged on CPU seconds."""

    case: str
    cpu: float
    wall: float
    limit: float | None  # None: reported only (quick mode)

    @property
    def verdict(self) -> str:
        return verdict(None if self.limit is None else self.cpu <= self.limit)


def absolute_targets(rows: Sequence[Scaling], quick: bool) -> list[Target]:
    """The largest size of the batched join and of the rebuild, and (full mode) the 5,000-member join."""
    by_cost = {r.cost: r for r in rows}
    join = by_cost["Lab join, batching on (assignment_interval_ms=1000)"]
    rebuilt = by_cost["rebuild from log + load duties"]
    targets = [
        Target(
            f"Lab join, batching on, {join.sizes[-1]:,} members on {10 * join.sizes[-1]:,} partitions",
            join.cpu[-1],
            join.wall[-1],
            None if quick else 1.5,
        ),
        Target(
            f"rebuild of a {rebuilt.sizes[-1]:,}-member group from its log",
            rebuilt.cpu[-1],
            rebuilt.wall[-1],
            None if quick else 0.3,
        ),
    ]
    if not quick:
        _, cpu, wall, _, _ = joined_lab(5_000, 1_000)
        targets.append(Target("Lab join, batching on, 5,000 members on 50,000 partitions", cpu, wall, 10.0))
    return targets


def format_targets(targets: Sequence[Target]) -> str:
    lines = [f"{'target':<64} {'cpu s':>8} {'wall s':>8} {'limit s':>8}  verdict"]
    for t in targets:
        limit = "-" if t.limit is None else f"{t.limit:.1f}"
        lines.append(f"{t.case:<64} {t.cpu:>8.2f} {t.wall:>8.2f} {limit:>8}  {t.verdict}")
    return "\n".join(lines)


def format_table(rows: Sequence[Scaling]) -> str:
    def seconds(values: Sequence[float]) -> str:
        return " / ".join(f"{v * 1000:,.0f}" if v >= 0.01 else f"{v * 1000:.1f}" for v in values)

    lines = [f"{'cost':<52} {'sizes':<40} {'cpu ms (median)':<34} {'wall ms (median)':<34} exponent  limit  verdict"]
    for r in rows:
        sizes = " / ".join(f"{s:,}" for s in r.sizes) + f" {r.unit}"
        limit = "-" if r.limit is None else f"{r.limit:.2f}"
        lines.append(
            f"{r.cost:<52} {sizes:<40} {seconds(r.cpu):<34} {seconds(r.wall):<34} {r.exponent:>8.2f}  {limit:>5}  "
            f"{r.verdict}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = benchmark_parser(__doc__).parse_args(argv)
    rows = run_benchmarks(args.quick)
    print(format_table(rows))
    targets = absolute_targets(rows, args.quick)
    print()
    print(format_targets(targets))
    return 1 if any(r.verdict == "FAIL" for r in [*rows, *targets]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
