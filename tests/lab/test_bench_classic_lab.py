"""The classic-consumer Lab benchmark runs end to end in quick mode (its checks, not its timing)."""

from __future__ import annotations

from bench_support import import_benchmark


def test_quick_benchmark_checks_its_results_and_exits_zero(capsys) -> None:
    bench = import_benchmark("bench_classic_lab")
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["(a)", "(b)", "(c)"]
