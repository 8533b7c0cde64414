"""Time one click on the stepper's "Step ▶" and "◀ Back": seek the run, redraw the timeline and the diagram.

For the case-study sizes — Basic (3 members, foo with 3 partitions) and Member Failure
(3 members, foo with 6 partitions, a crash and a session timeout) — each run to the end of the
library scenario, then:

* **Step**: 50 clicks from step 0 (a seek forward by one: the usual way through a case study);
* **Back**: 50 clicks from the end of the run (a seek backward by one: a snapshot restored and
  replayed up to the step before).

Each click goes through ``Button.click()`` like a user's, and the chart is serialised to JSON
as the kernel would send it (no kernel or browser here: widget messages and the browser's
drawing are not counted). Target: median ≤ 150 ms per click; the max is reported.

Run ``python -m benchmarks.bench_widgets`` (``--quick``: Basic only, a few clicks, no targets).
Full mode exits 1 when a target is missed.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import benchmark_parser, report, verdict

TARGET_MS = 150.0
CASES = ("basic", "member_failure")


@dataclass(frozen=True)
class Row:
    case: str
    clicks: int
    median_ms: float
    max_ms: float
    target_ms: float | None

    @property
    def verdict(self) -> str:
        return verdict(None if self.target_ms is None else self.median_ms <= self.target_ms)


@contextlib.contextmanager
def kernel_like_display() -> Iterator[None]:
    """An IPython shell whose display() serialises each bundle to JSON, as ipykernel does, and prints nothing."""
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    class JsonPublisher(DisplayPublisher):
        def publish(self, data: dict, metadata: dict | None = None, *args: Any, **kwargs: Any) -> None:
            json.dumps(data)
            json.dumps(metadata or {})

        def clear_output(self, wait: bool = False) -> None:
            pass

    shell = InteractiveShell.instance()
    shell.display_pub = JsonPublisher(shell=shell)
    try:
        yield
    finally:
        InteractiveShell.clear_instance()


def case_lab(name: str) -> Any:
    """The library scenario's Lab, run past its last timed event until stable (as ``kip-lab run`` does)."""
    from kip_lab.scenarios import build_lab, load_library_scenario

    scenario = load_library_scenario(name)
    lab = build_lab(scenario)
    times = [e.at_ms for e in scenario.events if e.at_ms is not None]
    times += [m.start_at_ms for m in scenario.members.values()]
    lab.run(until=max(times, default=0))
    if not lab.run_until_stable(timeout_ms=scenario.run.timeout_ms):
        raise AssertionError(f"{name}: the run did not settle")
    return lab


def time_clicks(stepper: Any, button: Any, clicks: int) -> list[float]:
    """``clicks`` clicks on ``button`` (Step or Back), each moving the stepper by one step."""
    move = 1 if button is stepper.step_button else -1
    times = []
    for _ in range(clicks):
        before = stepper.lab.step_count
        start = time.perf_counter()
        button.click()
        times.append((time.perf_counter() - start) * 1000)
        if stepper.lab.step_count != before + move or stepper.errors.layout.display != "none":
            raise AssertionError(f"the click did not step (step {before} -> {stepper.lab.step_count})")
    return times


def run_benchmarks(quick: bool = False, clicks: int | None = None) -> list[Row]:
    from widgets import Stepper

    clicks = clicks or (5 if quick else 50)
    target = None if quick else TARGET_MS
    rows = []
    with kernel_like_display():
        for name in CASES[:1] if quick else CASES:
            lab = case_lab(name)
            partitions = sum(lab.cluster.topic(t).num_partitions for t in lab.cluster.topic_names())
            size = f"{len(lab.clients)} members, {partitions} partitions"
            stepper = Stepper(lab)
            if lab.horizon < clicks:
                raise AssertionError(f"{name}: only {lab.horizon} steps, fewer than {clicks} clicks")
            stepper.slider.value = 0
            forward = time_clicks(stepper, stepper.step_button, clicks)
            stepper.slider.value = lab.horizon
            backward = time_clicks(stepper, stepper.back_button, clicks)
            for label, times in (("Step", forward), ("Back", backward)):
                rows.append(Row(f"{name} ({size}): {label}", len(times), statistics.median(times), max(times), target))
    return rows


def format_table(rows: list[Row]) -> str:
    lines = [f"{'case':<66} {'clicks':>6} {'median ms':>10} {'max ms':>8}  target      verdict"]
    for row in rows:
        target = "-" if row.target_ms is None else f"<= {row.target_ms:.0f} ms"
        lines.append(
            f"{row.case:<66} {row.clicks:>6} {row.median_ms:>10.1f} {row.max_ms:>8.1f}  {target:<10}  {row.verdict}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, quick_help="Basic only, a few clicks, no targets (a smoke run)")
    parser.add_argument("--clicks", type=int, default=None, help="clicks per case (default 50, quick 5)")
    args = parser.parse_args(argv)
    return report(run_benchmarks(quick=args.quick, clicks=args.clicks), format_table)


if __name__ == "__main__":
    raise SystemExit(main())
