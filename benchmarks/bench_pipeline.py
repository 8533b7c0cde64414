"""Time sweeps: a 10-member KIP-848 rolling bounce (the ``rolling_bounce`` template, 20 partitions), many seeds.

* (a) one run, in-process (the median of 5);
* (b) the in-process loop (``executor="local"``): per-run cost;
* (c) 1,000 runs on ``local[2]`` (``executor="spark"``) — <= 180 s (the sweep: the session is
  started before, and its start is reported apart); the per-run overhead of Spark against (b),
  in CPU time (the driver, the JVM and the Python workers on Spark; this process in-process), so
  that it holds on a machine other jobs load;
* (d) peak memory of the local Spark sweep: this process (the driver's Python), the JVM and the
  Python workers, summed (RSS sampled every 0.2 s) — <= 2 GB (what Binder gives).

Each case checks its result (every run ok, the Spark metrics identical to the in-process ones
for the runs both executed). Run ``python -m benchmarks.bench_pipeline`` (``--quick``: 20
runs, no targets; ``--runs N``: N runs on Spark, no target). Full mode exits 1 when a target is missed.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import benchmark_parser, report, verdict
from kip_lab.pipeline import load_sweep, run_sweep
from kip_lab.pipeline.templates import TEMPLATES
from kip_lab.scenarios import run_scenario

SPARK_RUNS, SPARK_TARGET_S = 1_000, 180.0
LOCAL_RUNS = 100
MEMORY_TARGET_MB = 2_048
PARAMS = {"members": 10, "partitions": 20}
COMPARED = ["run_id", "steps", "end_ms", "max_time_to_stable_ms", "total_unavailability_ms", "revocations"]


@dataclass
class Row:
    case: str
    value: str
    target: str
    ok: bool | None  # None: no target

    @property
    def verdict(self) -> str:
        return verdict(self.ok)


def sweep(runs: int):
    return load_sweep(
        {"name": f"bench-{runs}", "template": "rolling_bounce", "params": PARAMS, "seeds": {"count": runs}}
    )


class ProcessFamily:
    """This process and all its descendants (the JVM, the Python daemon and workers), sampled every 0.2 s:
    the peak of their summed RSS, and the CPU time each used (utime + stime, last seen) — the work
    done, which does not depend on what else loads the machine."""

    def __init__(self) -> None:
        self.peak_kb = 0
        self.cpu_s: dict[int, float] = {}
        self._start = {pid: _cpu_s(pid) or 0.0 for pid in _family(os.getpid())}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> ProcessFamily:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample_once()

    @property
    def cpu_total_s(self) -> float:
        return sum(cpu - self._start.get(pid, 0.0) for pid, cpu in self.cpu_s.items())

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            self._sample_once()

    def _sample_once(self) -> None:
        family = _family(os.getpid())
        self.peak_kb = max(self.peak_kb, sum(_rss_kb(pid) for pid in family))
        for pid in family:
            cpu = _cpu_s(pid)
            if cpu is not None:
                self.cpu_s[pid] = cpu


def _cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(parent, []).append(int(entry.name))
    return tree


def _family(root: int) -> list[int]:
    tree, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += tree.get(pid, [])
    return out


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_benchmarks(quick: bool, spark_runs: int = SPARK_RUNS) -> list[Row]:
    import pyarrow.dataset as ds

    from kip_lab.pipeline.session import SparkSettings, spark_session

    rows: list[Row] = []
    scenario = TEMPLATES["rolling_bounce"].scenario(PARAMS, 0)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        result = run_scenario(scenario)
        times.append(time.perf_counter() - started)
    assert result.ok and result.stable, "the benchmark run must end stable with no invariant violated"
    case = f"(a) one run: {result.steps} steps, {len(result.trace)} events"
    rows.append(Row(case, f"{statistics.median(times) * 1000:.0f} ms", "", None))

    local_runs = 20 if quick else LOCAL_RUNS
    spark_runs = 20 if quick else spark_runs
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as folder:
        root = Path(folder)
        started, cpu = time.perf_counter(), time.process_time()
        summary = run_sweep(sweep(local_runs), root / "local", executor="local", progress=False)
        local_s, local_cpu = time.perf_counter() - started, (time.process_time() - cpu) / local_runs
        assert summary.failed == 0
        case = f"(b) in-process loop, {local_runs} runs: wall (CPU per run)"
        rows.append(Row(case, f"{local_s:.1f} s ({local_cpu * 1000:.0f} ms)", "", None))

        started = time.perf_counter()
        spark = spark_session(SparkSettings(master="local[2]"))
        spark.range(1).count()
        start_s = time.perf_counter() - started
        with ProcessFamily() as family:
            started = time.perf_counter()
            summary = run_sweep(sweep(spark_runs), root / "spark", spark=spark, progress=False)
            spark_s = time.perf_counter() - started
        assert summary.failed == 0 and summary.executed == spark_runs
        local = ds.dataset(root / "local" / "metrics", partitioning="hive").to_table(columns=COMPARED).to_pandas()
        on_spark = ds.dataset(root / "spark" / "metrics", partitioning="hive").to_table(columns=COMPARED).to_pandas()
        common = on_spark[on_spark["run_id"].isin(local["run_id"])].sort_values("run_id").reset_index(drop=True)
        assert len(common) == min(local_runs, spark_runs)
        assert common.equals(local[local["run_id"].isin(common["run_id"])].sort_values("run_id").reset_index(drop=True))
        spark.stop()
    rows.append(Row("(c) Spark session start (local[2])", f"{start_s:.1f} s", "", None))
    target = quick or spark_runs != SPARK_RUNS
    rows.append(
        Row(
            f"(c) {spark_runs} runs on local[2]: wall",
            f"{spark_s:.1f} s ({spark_s / spark_runs * 1000:.0f} ms/run)",
            "" if target else f"<= {SPARK_TARGET_S:.0f} s",
            None if target else spark_s <= SPARK_TARGET_S,
        )
    )
    spark_cpu = family.cpu_total_s / spark_runs
    case = "(c) CPU per run on Spark (driver + JVM + workers) / in-process"
    rows.append(Row(case, f"{spark_cpu * 1000:.0f} / {local_cpu * 1000:.0f} ms", "", None))
    rows.append(Row("(c) Spark overhead per run (CPU)", f"{(spark_cpu - local_cpu) * 1000:.0f} ms", "", None))
    peak_mb = family.peak_kb / 1024
    rows.append(
        Row(
            "(d) peak RSS of the local Spark sweep (driver + JVM + workers)",
            f"{peak_mb:.0f} MB",
            "" if quick else f"<= {MEMORY_TARGET_MB} MB",
            None if quick else peak_mb <= MEMORY_TARGET_MB,
        )
    )
    return rows


def format_table(rows: list[Row]) -> str:
    width = max(len(r.case) for r in rows)
    return "\n".join(f"{r.case:<{width}}  {r.value:>24}  {r.target:>10}  {r.verdict}" for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, quick_help="20 runs, no targets (a smoke run)")
    parser.add_argument("--runs", type=int, default=SPARK_RUNS, help="runs on Spark (the target is for 1,000)")
    args = parser.parse_args(argv)
    return report(run_benchmarks(args.quick, args.runs), format_table)


if __name__ == "__main__":
    raise SystemExit(main())
