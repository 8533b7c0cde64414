"""What the in-process and the Spark pipeline tests share: the metrics they check run by run, a
sweep with one failing run, and a progress stream that interrupts a sweep."""

from __future__ import annotations

import io

# The per-run metrics both executors must write as a run of the scenario computes them.
CHECKED_METRICS = (
    "steps",
    "end_ms",
    "max_time_to_stable_ms",
    "total_unavailability_ms",
    "revocations",
    "partition_moves",
    "records_written",
    "heartbeats_sent",
    "invariant_violations",
)

# scripted_basic's requests sit at fixed steps; with 5 ms links the run stops
# before step 5 can happen (run.until_ms 2), and the runner raises: a genuine failing run.
FAILING = {
    "name": "failing",
    "scenario": "scripted_basic",
    "params": {"lab.link.latency.ms": 5},
    "grid": {"run.until_ms": [2, 1000]},
    "seeds": [3],
}


class Interrupt(io.StringIO):
    """A progress stream that stops the sweep (as Ctrl-C would) once ``after`` runs are reported done."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after

    def write(self, text: str) -> int:
        if int(text.split("] ")[1].split("/")[0]) >= self.after:
            raise KeyboardInterrupt
        return super().write(text)
