"""Time classic consumers (KIP-429) in the Lab: clients, network, classic coordinator, trace.

* (a) 100 cooperative classic consumers on 1,000 partitions, empty to stable over 10 ms links
  (MEMBER_ID_REQUIRED, the join barrier, the leader's cooperative-sticky, SyncGroup) — <= 2 s;
* (b) a cooperative rolling bounce of 20 members on 200 partitions (every member closed and
  restarted; two rebalances per move), to stable — <= 8 s;
* (c) ten simulated minutes of the stable 100-member group (heartbeats, auto-commits) — <= 15 s.

Every case checks its result (one owner per partition, stable, no invariant violated). Run
``python -m benchmarks.bench_classic_lab`` (``--quick``: small sizes, no targets). Full mode
exits 1 when a target is missed.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_lab import Clock, Row, bench_join, bench_steady, check_stable, format_table, stable_group
from benchmarks.common import benchmark_parser, report
from kip_lab.lab import actions as a

CLASSIC = {"group_protocol": "classic", "partition_assignment_strategy": ["cooperative-sticky"]}  # every member


def bench_rolling_bounce(members: int, partitions: int) -> tuple[float, float, int]:
    lab = stable_group(members, partitions, **CLASSIC)
    start = lab.now
    for i, name in enumerate(sorted(lab.clients)):
        lab.schedule(a.Close(member=name), start + 10_000 * (i + 1))
        lab.schedule(a.Restart(member=name), start + 10_000 * (i + 1) + 2_000)
    before = lab.step_count
    gc.collect()
    with Clock() as clock:
        lab.run(until=start + 10_000 * (members + 1))
        if not lab.run_until_stable():
            raise AssertionError("the rolling bounce never settled")
    check_stable(lab, partitions)
    return clock.wall, clock.cpu, lab.step_count - before


def run_benchmarks(quick: bool) -> list[Row]:
    members, partitions = (10, 100) if quick else (100, 1_000)
    bounce_members, bounce_partitions = (5, 50) if quick else (20, 200)
    minutes = 1 if quick else 10
    join_wall, join_cpu, lab = bench_join(members, partitions, 1, **CLASSIC)
    steady_wall, steady_cpu, steady_steps = bench_steady(lab, partitions, minutes)
    del lab
    bounce_wall, bounce_cpu, bounce_steps = bench_rolling_bounce(bounce_members, bounce_partitions)

    def target(ok: bool) -> bool | None:
        return None if quick else ok

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:,.0f} ms"

    return [
        Row(
            f"(a) {members} classic members, {partitions} partitions: empty to stable",
            ms(join_wall),
            ms(join_cpu),
            "<= 2,000 ms",
            target(join_wall <= 2.0),
        ),
        Row(
            f"(b) cooperative rolling bounce, {bounce_members} members ({bounce_steps:,} steps)",
            ms(bounce_wall),
            ms(bounce_cpu),
            "<= 8,000 ms",
            target(bounce_wall <= 8.0),
        ),
        Row(
            f"(c) {minutes} simulated min of the stable group ({steady_steps:,} steps)",
            ms(steady_wall),
            ms(steady_cpu),
            "<= 15,000 ms",
            target(steady_wall <= 15.0),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    args = benchmark_parser(__doc__).parse_args(argv)
    return report(run_benchmarks(args.quick), format_table)


if __name__ == "__main__":
    raise SystemExit(main())
