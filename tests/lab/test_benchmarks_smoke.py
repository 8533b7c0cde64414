"""The assignor benchmark runs end to end in quick mode (correctness only, not timing)."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest
from bench_support import import_benchmark


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return import_benchmark("bench_assignors")


def test_quick_benchmark_returns_checked_rows(bench: ModuleType) -> None:
    rows = bench.run_benchmarks(quick=True, runs=1)
    assert [row.case.split()[0] for row in rows] == ["uniform", "uniform", "range", "uniform"]
    assert all(row.median_ms > 0 and row.target_ms is None and row.verdict == "-" for row in rows)
    assert len(importlib.import_module("benchmarks.common").format_table(rows).splitlines()) == len(rows) + 1


def test_quick_mode_exits_zero(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--quick", "--runs", "1"]) == 0
    assert "median ms" in capsys.readouterr().out


def test_coverage_check_rejects_a_wrong_assignment(bench: ModuleType) -> None:
    spec = bench.homogeneous_spec(2, 1, 3)
    with pytest.raises(AssertionError):
        bench.check_coverage(spec, {"member-00000": {"topic-00": [0, 1]}, "member-00001": {}})


@pytest.mark.parametrize("name", ["bench_classic", "bench_coordinator", "bench_lab", "bench_review", "bench_widgets"])
def test_every_quick_benchmark_runs_its_checks(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Quick mode runs each case with its own correctness checks (a request the coordinator refuses
    fails the run), so a change that breaks a benchmark's scenario shows here, not at ``make bench``.
    (The pipeline benchmark starts Spark; the pipeline tests cover that path.)"""
    assert import_benchmark(name).main(["--quick"]) == 0
    assert "Traceback" not in capsys.readouterr().out
