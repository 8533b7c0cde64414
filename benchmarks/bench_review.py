"""Time a design review: ``kip-lab compare`` of the library's rolling bounce, two variants over five seeds.

One case, the command as a reviewer types it: ``kip-lab compare rolling_bounce --vary
lab.coordinator.assignment_interval_ms=0,1000 --seeds 5 --out DIR`` — ten runs, their metrics,
and the self-contained report (Vega's JavaScript bundled anew each time) — target: at most
60,000 ms. The report is checked (written, both players in it), so a run that fails cannot PASS.

Run ``python -m benchmarks.bench_review`` (``--quick``: one seed, no target). Full mode exits 1
when the target is missed.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import BenchRow, median_benchmark_main, time_runs
from kip_lab import cli
from kip_lab.review.report import vega_javascript

TARGET_MS = 60_000.0
VARY = "lab.coordinator.assignment_interval_ms=0,1000"


def run_benchmarks(quick: bool = False, runs: int | None = None) -> list[BenchRow]:
    seeds = 1 if quick else 5

    def prepare():
        vega_javascript.cache_clear()
        out = Path(tempfile.mkdtemp(prefix="kip-lab-review-"))

        def review() -> Path:
            argv = ["compare", "rolling_bounce", "--vary", VARY, "--seeds", str(seeds), "--out", str(out)]
            if cli.main(argv) != 0:
                raise AssertionError("kip-lab compare failed")
            page = (out / "report.html").read_text(encoding="utf-8")
            if page.count('class="player"') != 2:
                raise AssertionError("the report does not hold a player per variant")
            return out

        return review

    case = f"kip-lab compare rolling_bounce, 2 variants x {seeds} seeds"
    return [time_runs(case, prepare, runs or 1, None if quick else TARGET_MS)]


def main(argv: list[str] | None = None) -> int:
    return median_benchmark_main(__doc__, argv, run_benchmarks)


if __name__ == "__main__":
    sys.exit(main())
