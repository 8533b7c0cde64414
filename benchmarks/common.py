"""What the benchmarks share: the command line, the verdict, the exit status and the median-of-runs timing.

Every benchmark module keeps its own cases and checks; how a case is timed, judged, printed and
turned into an exit status is said once here so the modules cannot drift apart.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

QUICK_HELP = "small sizes, no targets (a smoke run)"


def verdict(ok: bool | None) -> str:
    """``-`` where there is no target (quick mode), else PASS or FAIL."""
    return "-" if ok is None else ("PASS" if ok else "FAIL")


def benchmark_parser(doc: str, quick_help: str = QUICK_HELP) -> argparse.ArgumentParser:
    """The parser every benchmark starts from: its docstring's first line and ``--quick``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    return parser


class Judged(Protocol):
    @property
    def verdict(self) -> str: ...


def report(rows: Sequence[Judged], format_table: Callable[[Any], str]) -> int:
    """Print the table; the exit status is 1 when a row missed its target."""
    print(format_table(rows))
    return 1 if any(row.verdict == "FAIL" for row in rows) else 0


@dataclass(frozen=True)
class BenchRow:
    """One line of the report; ``target_ms`` is None where there is nothing to meet.

    The target applies to the median CPU time of the process when it was measured (the work the
    code did; on a shared machine the wall time also holds the waits for a core), else to the wall
    median. Both medians are shown, and the best wall time: the gap between it and the median is
    the noise.
    """

    case: str
    median_ms: float
    best_ms: float
    target_ms: float | None
    median_cpu_ms: float | None = None

    @property
    def verdict(self) -> str:
        judged = self.median_ms if self.median_cpu_ms is None else self.median_cpu_ms
        return verdict(None if self.target_ms is None else judged <= self.target_ms)


def time_runs(case: str, prepare: Callable[[], Callable[[], object]], runs: int, target_ms: float | None) -> BenchRow:
    """Median and best wall time of ``runs`` timed calls; ``prepare`` (untimed) returns each call.

    The result is dropped only after the clock stops: freeing it is the caller's cost, not the
    code under test's.
    """
    timings = []
    cpu_timings = []
    for _ in range(runs):
        run = prepare()
        gc.collect()
        started, cpu_started = time.perf_counter(), time.process_time()
        result = run()
        cpu_timings.append((time.process_time() - cpu_started) * 1000)
        timings.append((time.perf_counter() - started) * 1000)
        del result
    return BenchRow(case, statistics.median(timings), min(timings), target_ms, statistics.median(cpu_timings))


def median_benchmark_main(doc: str, argv: list[str] | None, run_benchmarks: Callable[..., Sequence[BenchRow]]) -> int:
    """``main`` of a benchmark whose rows are medians: ``--quick`` and ``--runs`` go to ``run_benchmarks``."""
    parser = benchmark_parser(doc, quick_help="small sizes, no targets (smoke test)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per case (median reported)")
    args = parser.parse_args(argv)
    return report(run_benchmarks(quick=args.quick, runs=args.runs), format_table)


def format_table(rows: Sequence[BenchRow]) -> str:
    width = max(len(row.case) for row in rows)
    lines = [f"{'case':<{width}}  {'median ms':>10}  {'best ms':>8}  {'cpu ms':>7}  {'target ms':>10}  result"]
    for row in rows:
        target = "-" if row.target_ms is None else f"{row.target_ms:.1f}"
        cpu = "-" if row.median_cpu_ms is None else f"{row.median_cpu_ms:.1f}"
        lines.append(
            f"{row.case:<{width}}  {row.median_ms:>10.1f}  {row.best_ms:>8.1f}  {cpu:>7}  {target:>10}  {row.verdict}"
        )
    return "\n".join(lines)
