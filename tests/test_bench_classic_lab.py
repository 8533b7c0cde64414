"""The classic-consumer Lab benchmark runs end to end in quick mode (its checks, not its timing)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def test_quick_benchmark_checks_its_results_and_exits_zero(capsys) -> None:
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    bench = importlib.import_module("benchmarks.bench_classic_lab")
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["(a)", "(b)", "(c)"]
