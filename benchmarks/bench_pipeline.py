"""Time sweeps: a 10-member KIP-848 rolling bounce (the ``rolling_bounce`` template, 20 partitions), many seeds.

* (a) one run, in-process (the median of 5);
* (b) the in-process loop (``executor="local"``): runs per second and CPU per run;
* (c) the same sweep on ``local[1]``, ``local[2]`` and a standalone cluster of two one-core
  executors on this machine (a master and two workers started here from PySpark's own classes,
  their Python without kip_lab: it is shipped as the session's zip): runs per second, and the
  per-run overhead Spark adds, in CPU time against (b) (every process of the deployment: driver,
  JVMs, Python workers), so that it holds on a machine other jobs load. 1,000 runs on
  ``local[2]`` <= 180 s (the sweep: each session is started before, and its start is reported apart);
* (d) peak memory of the local[2] sweep: this process (the driver's Python), the JVM and the
  Python workers, summed (RSS sampled every 0.2 s; the cluster's daemons left out) — <= 2 GB
  (what Binder gives);
* (e) a 10,000-run sweep of a small scenario (2 members, 4 partitions) on the cluster: the driver
  streams batches of runs to Parquet and keeps none of their rows, so its peak memory (this
  process and its JVM, not the cluster's) is about that of (c)'s short sweep on the cluster,
  and <= 2 GB. The JVM's heap grows up to its maximum (``spark.driver.memory``) whatever the
  rows, so the bound is the configuration's, not the sweep's.

Each case checks its result (every run ok, each written once, the Spark metrics identical to the
in-process ones for the runs both executed). Run ``python -m benchmarks.bench_pipeline``
(``--quick``: 20 runs, a 200-run (e), no targets; ``--runs N``: N runs per Spark deployment, no
target; ``--big N``: N runs in (e)). Full mode exits 1 when a target is missed.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import benchmark_parser, report, verdict
from kip_lab.pipeline import load_sweep, run_sweep
from kip_lab.pipeline.session import SparkSettings, spark_session
from kip_lab.pipeline.templates import TEMPLATES
from kip_lab.scenarios import run_scenario
from tests.pipeline_support import StandaloneCluster, descendants, python_without_kip_lab, stat_fields

SPARK_RUNS, SPARK_TARGET_S = 1_000, 180.0
LOCAL_RUNS = 100
MEMORY_TARGET_MB = 2_048
BIG_RUNS, DRIVER_MEMORY_TARGET_MB = 10_000, 2_048
PARAMS = {"members": 10, "partitions": 20}
SMALL_PARAMS = {"members": 2, "partitions": 4}
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


def sweep(runs: int, params: dict[str, int] = PARAMS):
    name = f"bench-{runs}" + ("" if params == PARAMS else "-small")
    return load_sweep({"name": name, "template": "rolling_bounce", "params": params, "seeds": {"count": runs}})


class ProcessFamily:
    """This process and all its descendants (the JVM, the Python daemon and workers), sampled every 0.2 s:
    the peak of their summed RSS, and the CPU time each used (utime + stime, last seen) — the work
    done, which does not depend on what else loads the machine."""

    def __init__(self, exclude: Callable[[], set[int]] = set) -> None:
        """``exclude``: processes left out of the peak (a cluster's daemons, when measuring its driver)."""
        self.exclude = exclude
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
        excluded = self.exclude()
        self.peak_kb = max(self.peak_kb, sum(_rss_kb(pid) for pid in family if pid not in excluded))
        for pid in family:
            cpu = _cpu_s(pid)
            if cpu is not None:
                self.cpu_s[pid] = cpu


def _cpu_s(pid: int) -> float | None:
    fields = stat_fields(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _family(root: int) -> list[int]:
    return [root, *descendants(root)]


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_benchmarks(quick: bool, spark_runs: int = SPARK_RUNS, big_runs: int = BIG_RUNS) -> list[Row]:
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
    big_runs = 200 if quick else big_runs
    targets = not quick and spark_runs == SPARK_RUNS
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as folder:
        root = Path(folder)
        started, cpu = time.perf_counter(), time.process_time()
        summary = run_sweep(sweep(local_runs), root / "local", executor="local", progress=False)
        local_s, local_cpu = time.perf_counter() - started, (time.process_time() - cpu) / local_runs
        assert summary.failed == 0
        case = f"(b) in-process loop, {local_runs} runs: runs/s (CPU per run)"
        rows.append(Row(case, f"{local_runs / local_s:.1f} ({local_cpu * 1000:.0f} ms)", "", None))
        expected = _metrics(root / "local")

        with StandaloneCluster(root / "cluster", python_without_kip_lab(root / "workers-venv")) as cluster:
            deployments = {
                "local[1]": SparkSettings(master="local[1]"),
                "local[2]": SparkSettings(master="local[2]"),
                "cluster": SparkSettings(master=cluster.url, conf=cluster.session_conf()),
            }
            for name, settings in deployments.items():
                started = time.perf_counter()
                spark = spark_session(settings)
                spark.range(1).count()
                rows.append(Row(f"(c) {name}: session start", f"{time.perf_counter() - started:.1f} s", "", None))
                with ProcessFamily(exclude=cluster.pids) as family:  # CPU: every process; memory: the sweep's
                    started = time.perf_counter()
                    summary = run_sweep(sweep(spark_runs), root / folder_name(name), spark=spark, progress=False)
                    spark_s = time.perf_counter() - started
                assert summary.failed == 0 and summary.executed == spark_runs
                _check_same_metrics(expected, _metrics(root / folder_name(name)))
                judged = targets and name == "local[2]"
                case = f"(c) {name}, {spark_runs} runs: wall (runs/s)"
                value = f"{spark_s:.1f} s ({spark_runs / spark_s:.1f})"
                target = f"<= {SPARK_TARGET_S:.0f} s" if judged else ""
                rows.append(Row(case, value, target, spark_s <= SPARK_TARGET_S if judged else None))
                spark_cpu = family.cpu_total_s / spark_runs
                case = f"(c) {name}: CPU per run (all processes) / Spark's overhead per run"
                rows.append(Row(case, f"{spark_cpu * 1000:.0f} / {(spark_cpu - local_cpu) * 1000:.0f} ms", "", None))
                if name == "local[2]":
                    peak_mb = family.peak_kb / 1024
                    case = "(d) peak RSS of the local[2] sweep (driver + JVM + workers)"
                    target = "" if quick else f"<= {MEMORY_TARGET_MB} MB"
                    rows.append(Row(case, f"{peak_mb:.0f} MB", target, None if quick else peak_mb <= MEMORY_TARGET_MB))
                if name == "cluster":
                    case = "(c) cluster: peak RSS of the driver (Python + JVM)"
                    rows.append(Row(case, f"{family.peak_kb / 1024:.0f} MB", "", None))
                    rows += _big_sweep(spark, root / "big", big_runs, cluster.pids, quick)
                spark.stop()
    return rows


def _big_sweep(spark, out: Path, runs: int, cluster_pids: Callable[[], set[int]], quick: bool) -> list[Row]:
    """(e): many small runs on the cluster; the driver's peak memory (this process and its JVM)."""
    import pyarrow.dataset as ds

    with ProcessFamily(exclude=cluster_pids) as driver:
        started = time.perf_counter()
        summary = run_sweep(sweep(runs, SMALL_PARAMS), out, spark=spark, progress=False)
        seconds = time.perf_counter() - started
    run_ids = ds.dataset(out / "runs", partitioning="hive").to_table(columns=["run_id"]).column("run_id")
    assert summary.failed == 0 and len(run_ids) == len(set(run_ids.to_pylist())) == runs, "each run once"
    peak_mb = driver.peak_kb / 1024
    return [
        Row(
            f"(e) {runs} small runs on the cluster: wall (runs/s)",
            f"{seconds:.0f} s ({runs / seconds:.1f})",
            "",
            None,
        ),
        Row(
            "(e) peak RSS of the cluster sweep's driver (Python + JVM)",
            f"{peak_mb:.0f} MB",
            "" if quick else f"<= {DRIVER_MEMORY_TARGET_MB} MB",
            None if quick else peak_mb <= DRIVER_MEMORY_TARGET_MB,
        ),
    ]


def folder_name(deployment: str) -> str:
    return deployment.replace("[", "-").rstrip("]")


def _metrics(out: Path):
    import pyarrow.dataset as ds

    table = ds.dataset(out / "metrics", partitioning="hive").to_table(columns=COMPARED).to_pandas()
    return table.sort_values("run_id").reset_index(drop=True)


def _check_same_metrics(expected, got) -> None:
    """The runs both executed have identical metrics (the in-process loop ran the first ``len(expected)``)."""
    common = got[got["run_id"].isin(expected["run_id"])].reset_index(drop=True)
    assert len(common) == min(len(expected), len(got))
    assert common.equals(expected[expected["run_id"].isin(common["run_id"])].reset_index(drop=True))


def format_table(rows: list[Row]) -> str:
    width = max(len(r.case) for r in rows)
    return "\n".join(f"{r.case:<{width}}  {r.value:>24}  {r.target:>10}  {r.verdict}" for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, quick_help="20 runs, no targets (a smoke run)")
    runs_help = "runs per Spark deployment (the target is for 1,000)"
    parser.add_argument("--runs", type=int, default=SPARK_RUNS, help=runs_help)
    parser.add_argument("--big", type=int, default=BIG_RUNS, help="runs of the small scenario in (e)")
    args = parser.parse_args(argv)
    return report(run_benchmarks(args.quick, args.runs, args.big), format_table)


if __name__ == "__main__":
    raise SystemExit(main())
