"""The scaling benchmark fits growth exponents right and fails a cost that grows faster than linearly."""

from __future__ import annotations

from types import ModuleType

import pytest
from bench_support import import_benchmark


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return import_benchmark("bench_scaling")


def test_the_exponent_of_a_power_law_is_its_power(bench: ModuleType) -> None:
    sizes = (100, 200, 500, 1_000)
    assert bench.growth_exponent(sizes, [3e-6 * n for n in sizes]) == pytest.approx(1.0)
    assert bench.growth_exponent(sizes, [2e-9 * n * n for n in sizes]) == pytest.approx(2.0)
    assert bench.growth_exponent(sizes, [0.5 for _ in sizes]) == pytest.approx(0.0)


def test_a_cost_past_the_linear_limit_fails_and_one_without_a_limit_is_only_reported(bench: ModuleType) -> None:
    sizes = (100, 200, 500, 1_000)
    quadratic = tuple(1e-6 * n * n for n in sizes)
    linear = tuple(1e-4 * n for n in sizes)
    assert bench.Scaling("q", "members", sizes, quadratic, quadratic, bench.LINEAR_LIMIT).verdict == "FAIL"
    assert bench.Scaling("l", "members", sizes, linear, linear, bench.LINEAR_LIMIT).verdict == "PASS"
    assert bench.Scaling("q", "members", sizes, quadratic, quadratic, None).verdict == "-"


def test_the_lab_series_measure_a_join_and_its_steady_state(bench: ModuleType) -> None:
    rows = bench.lab_series((4, 8), repeats=1)
    assert [row.cost.split(",")[0] for row in rows] == ["Lab join", "Lab join", "Lab join", "Lab steady state"]
    overhead, batched = rows[0], rows[1]
    assert all(o <= b for o, b in zip(overhead.cpu, batched.cpu, strict=True))
    assert all(c > 0 for row in rows for c in row.cpu)
    assert len(bench.format_table(rows).splitlines()) == len(rows) + 1


def test_the_batched_joins_only_bump_the_epoch(bench: ModuleType) -> None:
    """Kafka ``GroupMetadataManager.consumerGroupHeartbeat`` with batching: the 100 timed joins each bump
    the group epoch and leave the target where the untimed first join put it."""
    join_all = bench.batched_joins(20)
    join_all()
    group = join_all.args[0].groups["bench"]
    assert len(group.members) == 20 + 101
    assert group.group_epoch == group.assignment_epoch + 100


def test_the_absolute_targets_are_judged_on_cpu_time(bench: ModuleType) -> None:
    """A run over its CPU limit fails even when its wall time is under it; quick mode only reports."""
    assert bench.Target("join", cpu=1.6, wall=1.0, limit=1.5).verdict == "FAIL"
    assert bench.Target("join", cpu=1.4, wall=9.0, limit=1.5).verdict == "PASS"
    rebuilt = bench.Scaling("rebuild from log + load duties", "members", (4, 8), (0.01, 0.02), (0.01, 0.02), None)
    rows = [*bench.lab_series((4, 8), repeats=1), rebuilt]
    targets = bench.absolute_targets(rows, quick=True)
    assert [t.verdict for t in targets] == ["-", "-"]
    assert targets[0].cpu == rows[1].cpu[-1] and "8 members on 80 partitions" in targets[0].case
