"""Time the Lab: clients, network, coordinator and trace stepping together.

* (a) a 100-member group on 1,000 partitions, from empty to stable over 10 ms links — <= 2 s;
* (b) ten simulated minutes of that group, stable (heartbeats and auto-commits) — <= 3 s for
  the median of three runs, as (a) (each run is listed too); the same group without auto-commit
  (heartbeats only) is timed once, for scale, with no target;
* (c) ``seek`` to random steps of a 10,000-step run of that group with faults — <= 200 ms
  for the slowest of 50 seeks (the median is reported too).

Every case also checks its result (one owner per partition, stable, no invariant violated,
the step sought reached). Each target applies to the process's CPU time (``time.process_time``):
the work the Lab did, whatever else the machine was running; the wall time is printed beside it
(on a shared machine it also holds the waits for a core). Run ``python -m benchmarks.bench_lab``
(``--quick``: small sizes, no targets). Full mode exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kip_lab.lab import Lab, LabConfig, LatencyModel, LinkConfig

LINK = LinkConfig(latency=LatencyModel(ms=10))


@dataclass
class Row:
    case: str
    value: str  # wall-clock time
    cpu: str  # this process's CPU time
    target: str
    ok: bool | None  # None: no target (quick mode)

    @property
    def verdict(self) -> str:
        return "-" if self.ok is None else ("PASS" if self.ok else "FAIL")


def group(members: int, partitions: int, **consumer: object) -> Lab:
    lab = Lab(seed=1, config=LabConfig(link=LINK))
    lab.create_topic("foo", partitions)
    for i in range(members):
        lab.add_consumer(f"m{i:03d}", subscribed_topic_names=["foo"], **consumer)
    return lab


def stable_group(members: int, partitions: int, **consumer: object) -> Lab:
    """The group, run until it is stable (an error if it never is)."""
    lab = group(members, partitions, **consumer)
    if not lab.run_until_stable():
        raise AssertionError(f"the group ({consumer or 'defaults'}) never became stable")
    return lab


def check_stable(lab: Lab, partitions: int) -> None:
    owners = [tp for c in lab.clients.values() if c.alive for tp in c.owned]
    if not lab.is_stable() or len(owners) != len(set(owners)) or len(owners) != partitions:
        raise AssertionError(f"not a stable, complete assignment: {len(owners)} owned of {partitions}")
    if lab.invariants.violations:
        raise AssertionError(f"invariants violated: {lab.invariants.violations[:3]}")


class Clock:
    """Wall and CPU time of a block."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def bench_join(members: int, partitions: int, repeats: int, **consumer: object) -> tuple[float, float, Lab]:
    """Median wall and CPU time of building the group and running it to stable; the last lab."""
    walls, cpus = [], []
    lab = None
    for _ in range(repeats):
        lab = None
        gc.collect()  # the previous repeat's world is garbage: do not time its collection
        with Clock() as clock:
            lab = stable_group(members, partitions, **consumer)
        walls.append(clock.wall)
        cpus.append(clock.cpu)
        check_stable(lab, partitions)
    return statistics.median(walls), statistics.median(cpus), lab


def bench_steady(lab: Lab, partitions: int, minutes: float) -> tuple[float, float, int]:
    before = lab.step_count
    gc.collect()  # what came before is garbage: do not time its collection
    with Clock() as clock:
        lab.run(until=lab.now + int(minutes * 60_000))
    check_stable(lab, partitions)
    return clock.wall, clock.cpu, lab.step_count - before


def faulty_run(lab: Lab, steps: int) -> Lab:
    """Continue ``lab`` with faults until it has ``steps`` steps."""
    names = sorted(lab.clients)
    names = [names[k % len(names)] for k in (7, 13, 21, 4)]
    faults = [
        lambda: lab.crash(names[0]),
        lambda: lab.pause(names[1]),
        lambda: lab.add_partitions("foo", 10),
        lambda: lab.restart(names[0]),
        lambda: lab.fail_over(),
        lambda: lab.resume(names[1]),
        lambda: lab.partition_link(names[2], 8_000),
        lambda: lab.close(names[3]),
    ]
    chunk = max(1, (steps - lab.step_count) // (len(faults) + 1))
    for fault in faults:
        lab.run(steps=chunk)
        fault()
    lab.run(steps=steps - lab.step_count)
    if lab.step_count != steps:
        raise AssertionError(f"the run stopped at step {lab.step_count}")
    return lab


def bench_seek(lab: Lab, seeks: int) -> tuple[list[float], list[float]]:
    rng = random.Random(0)
    horizon = lab.step_count
    walls, cpus = [], []
    for _ in range(seeks):
        target = rng.randrange(horizon + 1)
        with Clock() as clock:
            lab.seek(target)
        walls.append(clock.wall)
        cpus.append(clock.cpu)
        if lab.step_count != target:
            raise AssertionError(f"seek({target}) reached {lab.step_count}")
    return walls, cpus


def run_benchmarks(quick: bool) -> list[Row]:
    members, partitions = (10, 100) if quick else (100, 1_000)
    minutes = 1 if quick else 10
    steps, seeks = (1_000, 10) if quick else (10_000, 50)
    repeats = 1 if quick else 3
    join_wall, join_cpu, lab = bench_join(members, partitions, repeats)
    # (b) as (a): the median of three runs, each on a group of its own (the first is (a)'s).
    steady = []
    for _ in range(repeats):
        lab = lab or stable_group(members, partitions)
        steady.append(bench_steady(lab, partitions, minutes))
        lab = None
        gc.collect()
    steady_wall = statistics.median(wall for wall, _, _ in steady)
    steady_cpu = statistics.median(cpu for _, cpu, _ in steady)
    steady_steps = steady[0][2]
    # The same stable group without its application's auto-commits: the protocol's own share of (b).
    quiet_wall, quiet_cpu, quiet_steps = bench_steady(
        stable_group(members, partitions, enable_auto_commit=False), partitions, minutes
    )
    gc.collect()
    seek_lab = faulty_run(group(members, partitions), steps)
    seek_walls, seek_cpus = bench_seek(seek_lab, seeks)

    def target(ok: bool) -> bool | None:
        return None if quick else ok

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:,.0f} ms" if seconds >= 1 else f"{seconds * 1000:,.1f} ms"

    return [
        Row(
            f"(a) {members} members, {partitions} partitions, 10 ms links: empty to stable",
            ms(join_wall),
            ms(join_cpu),
            "<= 2,000 ms",
            target(join_cpu <= 2.0),
        ),
        Row(
            f"(b) {minutes} simulated min of the stable group ({steady_steps:,} steps), median",
            ms(steady_wall),
            ms(steady_cpu),
            "<= 3,000 ms",
            target(steady_cpu <= 3.0),
        ),
        Row(f"    (b) each run, cpu: {' / '.join(ms(cpu) for _, cpu, _ in steady)}", "", "", "", None),
        Row(
            f"    (b) without auto-commit: heartbeats only ({quiet_steps:,} steps)",
            ms(quiet_wall),
            ms(quiet_cpu),
            "",
            None,
        ),
        Row(
            f"(c) seek in a {steps:,}-step faulty run of it: slowest of {seeks}",
            ms(max(seek_walls)),
            ms(max(seek_cpus)),
            "<= 200 ms",
            target(max(seek_cpus) <= 0.2),
        ),
        Row(
            f"    seek: median of {seeks}",
            ms(statistics.median(seek_walls)),
            ms(statistics.median(seek_cpus)),
            "",
            None,
        ),
    ]


def format_table(rows: list[Row]) -> str:
    lines = [f"{'case':<72} {'wall':>10} {'cpu':>10}  {'target':<12}  verdict"]
    lines += [f"{r.case:<72} {r.value:>10} {r.cpu:>10}  {r.target:<12}  {r.verdict}" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, no targets (a smoke run)")
    args = parser.parse_args(argv)
    rows = run_benchmarks(args.quick)
    print(format_table(rows))
    return 0 if all(r.ok is not False for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
