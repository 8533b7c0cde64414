"""Running a sweep: plan its runs, skip the finished ones, execute the rest in batches, write the tables.

Two executors do the same thing with the same rows (``kip_lab.pipeline.execute``):

* ``spark`` — the runs of a batch become a DataFrame (``run_id``, ``point``, ``seed``), spread
  over Spark tasks; each task runs its runs with ``execute_run`` (``mapInArrow``); the result
  is cached, then written as the events, metrics and runs tables (in that order: a run counts
  as finished once its runs row is written).
* ``local`` — the plain in-process loop, writing the same tables with pyarrow. For small
  sweeps, notebooks, and as the reference the Spark executor is tested against.

Resuming: the runs table says which runs are finished; running a sweep again into the same
folder executes only the others. The folder keeps the spec (``sweep.json``); a different
spec is refused rather than mixed in.

Crash safety: every file is written under a temporary name and renamed into place, so a kill
leaves whole files or none. A resume first repairs what a kill (or a disk) can still leave:
it removes unreadable Parquet files and the leftovers of unfinished writes, and drops from
the events and metrics tables the rows of runs that are not finished (they run again), so no
table ever holds a run twice.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import yaml

from kip_lab.errors import KipLabError
from kip_lab.files import atomic_path, write_atomically
from kip_lab.pipeline import schema as s
from kip_lab.pipeline.execute import (
    execute_run,
    failed_scenario_path,
    param_columns,
    parameter_columns,
    repro_command,
    rows_to_arrow,
    split_tables,
)
from kip_lab.pipeline.spec import PlannedRun, SweepSpec

Executor = Literal["spark", "local"]
BATCH_RUNS = 500  # runs per batch: what an interruption can lose, and one Spark job's worth
RUNS_PER_TASK = 8  # runs per Spark task: few tasks (each costs the JVM), small enough to balance uneven runs
TABLE_ORDER = ("events", "metrics", "runs")  # runs last: its row marks a run finished


class SweepOutputError(KipLabError, RuntimeError):
    """The output folder cannot take this sweep (it holds another one, another schema version, a
    damaged ``sweep.json``, or it cannot be written)."""


@dataclass(frozen=True)
class SweepSummary:
    out: Path
    planned: int  # runs in the spec
    already_done: int  # finished before this call (resumed)
    executed: int
    failed: int  # of the executed ones
    seconds: float
    failed_repro: list[str]  # the kip-lab run command of each failed run executed now

    def __str__(self) -> str:
        text = (
            f"sweep written to {self.out}: {self.planned} runs ({self.already_done} already done, "
            f"{self.executed} executed, {self.failed} failed) in {self.seconds:.1f} s"
        )
        return "\n".join([text, *(f"  failed: {command}" for command in self.failed_repro)])


class Progress:
    """Plain-text progress on stderr: redrawn in place on a terminal, else a line per 10 % (and per failure)."""

    def __init__(self, name: str, total: int, done: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.name, self.total, self.done, self.failed = name, total, done, 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.started = time.monotonic()
        self._tty = self.stream.isatty()
        self._shown: tuple[int, int] | None = None  # (decile, failed) of the last line written
        self.show()

    def advance(self, done: int, failed: int = 0) -> None:
        self.done, self.failed = done, failed
        self.show()

    def show(self) -> None:
        share = self.done / self.total if self.total else 1.0
        shown = (int(share * 10), self.failed)
        if not self._tty and shown == self._shown:
            return
        self._shown = shown
        filled = round(share * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        line = (
            f"sweep {self.name} [{bar}] {self.done}/{self.total} runs"
            + (f", {self.failed} failed" if self.failed else "")
            + f", {time.monotonic() - self.started:.0f} s"
        )
        self.stream.write(("\r" + line) if self._tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._tty:
            self.stream.write("\n")
            self.stream.flush()


def run_sweep(
    spec: SweepSpec,
    out: str | Path,
    *,
    executor: Executor = "spark",
    spark: Any = None,
    batch_runs: int = BATCH_RUNS,
    progress: bool | TextIO = True,
) -> SweepSummary:
    """Execute every run of ``spec`` not yet finished in ``out``; returns what was done.

    ``spark``: a session for the ``spark`` executor (default: ``session.spark_session()``,
    which follows ``KIP_LAB_SPARK_MASTER`` / ``KIP_LAB_SPARK_REMOTE``).
    """
    if executor not in ("spark", "local"):
        raise ValueError(f"executor must be 'spark' or 'local', got {executor!r}")
    started = time.monotonic()
    out = Path(out).absolute()
    _claim(out, spec)
    repair(out)
    if executor == "spark" and spark is None:
        from kip_lab.pipeline.session import spark_session

        spark = spark_session()
    plan = spec.plan()
    done = finished_runs(out)
    pending = [run for run in plan if run.run_id not in done]
    bar = None
    if progress:
        bar = Progress(spec.name, len(plan), len(plan) - len(pending), None if progress is True else progress)
    executed = failed = 0
    repro: list[str] = []
    with _CtrlC(spark if executor == "spark" else None) as ctrl_c:
        for start in range(0, len(pending), batch_runs):
            batch = pending[start : start + batch_runs]

            def advance(count: int, failed_now: int = 0, base: int = executed, failed_before: int = failed) -> None:
                if bar is not None:
                    bar.advance(len(plan) - len(pending) + base + count, failed_before + failed_now)

            if executor == "spark":
                failures = _spark_batch(spark, spec, out, batch, advance, ctrl_c)
            else:
                failures = _local_batch(spec, out, batch, advance)
            for run in failures:
                _write_failed_scenario(spec, out, run)
                repro.append(repro_command(out, run))
            advance(len(batch), len(failures))
            executed += len(batch)
            failed += len(failures)
    if bar is not None:
        bar.close()
    return SweepSummary(out, len(plan), len(plan) - len(pending), executed, failed, time.monotonic() - started, repro)


# ---------------------------------------------------------------------------- the output folder
def _claim(out: Path, spec: SweepSpec) -> None:
    manifest = out / "sweep.json"
    wanted = {"schema_version": s.SCHEMA_VERSION, "spec": spec.model_dump(mode="json")}
    check_output_folder(out)
    if manifest.exists():
        try:
            held = json.loads(manifest.read_text(encoding="utf-8"))
            if not isinstance(held, dict) or not isinstance(held.get("spec"), dict):
                raise ValueError("it is not a sweep manifest")
        except (OSError, ValueError) as exc:
            raise SweepOutputError(
                f"{manifest} is damaged ({exc}); it says which sweep {out} holds: restore it, or use another folder"
            ) from None
        if held.get("schema_version") != s.SCHEMA_VERSION:
            raise SweepOutputError(
                f"{out} holds tables of schema version {held.get('schema_version')}; this kip_lab writes "
                f"version {s.SCHEMA_VERSION}: use another folder"
            )
        if held.get("spec") != wanted["spec"]:
            name = held["spec"].get("name")
            raise SweepOutputError(f"{out} holds the sweep {name!r} with another spec: use another folder")
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_atomically(manifest, json.dumps(wanted, indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        raise SweepOutputError(f"cannot write to {out}: {exc.strerror or exc}") from None


def check_output_folder(out: Path) -> None:
    """Refuse an --out that is a file, lies under a file, or cannot be written, before any run."""
    if out.exists() and not out.is_dir():
        raise SweepOutputError(f"{out} is a file, not a folder: give a folder for the sweep's tables")
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not existing.is_dir():
        raise SweepOutputError(f"{out} lies under {existing}, which is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise SweepOutputError(f"{out} cannot be written: {existing} is not writable")


STAGING = ".staging"  # in-process batches are written here, then renamed into the tables


def repair(out: Path) -> list[str]:
    """Make a folder an interrupted sweep left consistent again; returns what was repaired (one line each).

    Removes the leftovers of unfinished writes (the in-process staging folder, Spark's
    ``_temporary``), Parquet files that cannot be read (truncated by a kill), and the rows of
    the events and metrics tables whose run has no runs row (written before the kill reached
    the runs table: the run executes again and writes them again).
    """
    notes: list[str] = []
    for leftover in [out / STAGING, *(out / table / "_temporary" for table in TABLE_ORDER)]:
        if leftover.exists():
            shutil.rmtree(leftover)
            notes.append(f"removed {leftover}, an unfinished write")
    files = {table: sorted((out / table).rglob("*.parquet")) for table in TABLE_ORDER}
    finished: set[str] = set()
    for path in files["runs"]:
        run_ids = _run_ids(path, notes)
        finished |= run_ids or set()
    for table in ("events", "metrics"):
        for path in files[table]:
            run_ids = _run_ids(path, notes)
            if run_ids is None or run_ids <= finished:
                continue
            kept = pq.read_table(path).filter(pc.field("run_id").isin(pa.array(sorted(finished), pa.string())))
            if kept.num_rows:  # the kept rows replace the file whole
                with atomic_path(path) as temporary:
                    pq.write_table(kept, temporary)
            else:
                _remove(path)
            notes.append(f"dropped the rows of unfinished runs from {path}")
    return notes


def _run_ids(path: Path, notes: list[str]) -> set[str] | None:
    """The run ids in one Parquet file; None (and the file removed) if it cannot be read."""
    try:
        return set(pq.read_table(path, columns=["run_id"]).column("run_id").to_pylist())
    except (OSError, pa.ArrowException) as exc:
        _remove(path)
        notes.append(f"removed {path}: it cannot be read ({exc})")
        return None


def _remove(path: Path) -> None:
    """Remove a Parquet file and Spark's checksum of it (which a rewritten file would no longer match)."""
    path.unlink(missing_ok=True)
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)


def finished_runs(out: str | Path) -> set[str]:
    """The ids of the runs whose row is in ``out``'s runs table.

    Read here with pyarrow, also for a Spark sweep: the driver repairs the same folder with file
    operations, so it sees it anyway, and a few ids need no Spark job.
    """
    path = Path(out) / "runs"
    if not any(path.rglob("*.parquet")):  # none yet, or a repair removed every one
        return set()
    table = ds.dataset(path, format="parquet", partitioning="hive").to_table(columns=["run_id"])
    return set(table.column("run_id").to_pylist())


def local_uri(path: Path) -> str:
    """The ``file:`` URI Spark writes a local (or shared) folder by: a bare path would resolve against
    a cluster's default file system (HDFS, DBFS). Not ``Path.as_uri()``: Hadoop does not undo its
    percent-escapes, and would write to ``a%20b`` for ``a b``."""
    return f"file://{path.absolute()}"


def _write_failed_scenario(spec: SweepSpec, out: Path, run: PlannedRun) -> None:
    path = failed_scenario_path(out, run.run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    scenario = spec.scenario_for(run.point, run.seed)
    data = scenario.model_dump(mode="json", exclude_unset=True)
    write_atomically(path, yaml.safe_dump(data, sort_keys=False))


def _batch_name(batch: list[PlannedRun]) -> str:
    """Files of a batch are named after its runs: rewriting the same batch replaces them instead of adding."""
    return hashlib.sha256(",".join(r.run_id for r in batch).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------- in-process
def _local_batch(spec: SweepSpec, out: Path, batch: list[PlannedRun], advance) -> list[PlannedRun]:
    rows = []
    columns = parameter_columns(spec)
    failed = 0
    for index, run in enumerate(batch):
        rows.append(execute_run(spec, run, out, columns))
        failed += rows[-1]["status"] == s.FAILED
        advance(index + 1, failed)
    wide = s.wide_schema([(column, kind) for _, column, kind in columns])
    tables = split_tables(rows_to_arrow(rows, wide), [column for _, column, _ in columns])
    name = _batch_name(batch)
    for table_name in TABLE_ORDER:
        if table_name in tables:
            staging = out / STAGING / table_name
            pq.write_to_dataset(
                tables[table_name],
                root_path=str(staging),
                partition_cols=s.PARTITION_COLUMNS,
                basename_template=f"part-{name}-{{i}}.parquet",
                existing_data_behavior="overwrite_or_ignore",
            )
            for written in sorted(staging.rglob("*.parquet")):  # whole files, renamed into the table
                target = out / table_name / written.relative_to(staging)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(written, target)
            shutil.rmtree(out / STAGING)
    return [run for run, row in zip(batch, rows, strict=True) if row["status"] == s.FAILED]


# ---------------------------------------------------------------------------- Spark
class _ExecuteRuns:
    """The function each Spark task applies (``mapInArrow``): planned runs in, executed rows out."""

    def __init__(self, spec: SweepSpec, out: str, wide: pa.Schema) -> None:
        self.spec, self.out, self.wide = spec, out, wide

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        columns = parameter_columns(self.spec)
        for batch in batches:
            for planned in batch.to_pylist():
                row = execute_run(self.spec, PlannedRun(**planned), self.out, columns)
                yield pa.RecordBatch.from_pylist([row], schema=self.wide)


def _spark_batch(
    spark: Any, spec: SweepSpec, out: Path, batch: list[PlannedRun], advance, ctrl_c: _CtrlC
) -> list[PlannedRun]:
    import pandas as pd
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    columns = param_columns(spec)
    wide = s.wide_schema(columns)
    cores = _cores(spark)
    tasks = max(math.ceil(len(batch) / RUNS_PER_TASK), min(len(batch), 2 * cores))
    planned = pd.DataFrame(
        {"run_id": [r.run_id for r in batch], "point": [r.point for r in batch], "seed": [r.seed for r in batch]}
    )
    rows = (
        spark.createDataFrame(planned)
        .repartition(tasks)
        .mapInArrow(_ExecuteRuns(spec, str(out), wide), from_arrow_schema(wide))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        ctrl_c.check()
        with _watch_tasks(spark, tasks, len(batch), advance):
            rows.count()  # runs every run once, into the cache the three writes read
        written = rows.coalesce(cores)  # the writes: a task per core over the cache, a few files per batch
        keys = [n for n, _, _ in s.EVENT_COLUMNS[:4]]
        ok = written.where(F.col("status") == s.OK)
        tables = {
            "events": ok.where(F.col("events").isNotNull()).select(*keys, F.inline("events")),
            "metrics": ok.select(*[n for n, _, _ in s.METRIC_COLUMNS]),
            "runs": written.select(*[n for n, _, _ in s.RUN_COLUMNS], *[n for n, _ in columns]),
        }
        for table_name in TABLE_ORDER:
            if table_name == "events" and not spec.events:
                continue
            ctrl_c.check()
            target = local_uri(out / table_name)
            tables[table_name].write.mode("append").partitionBy(*s.PARTITION_COLUMNS).parquet(target)
        failed = {r.run_id for r in written.where(F.col("status") == s.FAILED).select("run_id").collect()}
    finally:
        rows.unpersist()
    return [run for run in batch if run.run_id in failed]


def _cores(spark: Any) -> int:
    """The cores Spark runs tasks on (Spark Connect does not say: assume 2)."""
    try:
        return max(1, spark.sparkContext.defaultParallelism)
    except Exception:
        return 2


class _watch_tasks:
    """Report finished runs while a Spark job runs, from its finished tasks (classic Spark only)."""

    def __init__(self, spark: Any, tasks: int, runs: int, advance) -> None:
        try:
            self.tracker = spark.sparkContext.statusTracker()
        except Exception:  # Spark Connect has no SparkContext: progress per batch only
            self.tracker = None
        self.tasks, self.runs, self.advance = tasks, runs, advance
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> _watch_tasks:
        if self.tracker is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()

    def _poll(self) -> None:
        while not self.stop.wait(0.5):
            finished = 0
            for stage_id in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(stage_id)
                if info is not None and info.numTasks == self.tasks:
                    finished = max(finished, info.numCompletedTasks)
            if finished:
                self.advance(min(finished * self.runs // self.tasks, self.runs - 1))  # done once written


class _CtrlC:
    """Ctrl-C during a Spark sweep: cancel its jobs, then raise ``KeyboardInterrupt`` in the driver.

    The driver waits inside a Spark call; pyspark's own handler would call Spark from the signal
    handler on that same connection (and log a traceback). Here the handler only starts a thread
    that cancels the session's jobs until the sweep stops (so a job submitted a moment later is
    cancelled too); the waiting call then fails, and leaving the ``with`` turns that failure into
    ``KeyboardInterrupt``. What the runs table holds stays: a resume executes the rest. A second
    Ctrl-C interrupts at once. Only in the main thread (where signals are handled) and on Spark.
    """

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.pressed = threading.Event()
        self.finished = threading.Event()
        self.previous: Any = None

    def __enter__(self) -> _CtrlC:
        if self.spark is not None and threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._pressed)
        return self

    def _pressed(self, signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.pressed.set()
        threading.Thread(target=self._cancel, daemon=True).start()

    def _cancel(self) -> None:
        from kip_lab.pipeline.session import cancel_jobs

        while not self.finished.is_set():
            try:
                cancel_jobs(self.spark)
            except Exception:  # the session is stopping: nothing left to cancel
                return
            self.finished.wait(0.5)

    def check(self) -> None:
        """Between Spark calls: stop here once Ctrl-C was pressed."""
        if self.pressed.is_set():
            raise KeyboardInterrupt

    def __exit__(self, kind: type[BaseException] | None, *exc: Any) -> None:
        from kip_lab.pipeline.session import wait_for_idle_executors

        self.finished.set()
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        if self.pressed.is_set():
            wait_for_idle_executors(self.spark)
            if kind is not KeyboardInterrupt:
                raise KeyboardInterrupt from None  # in place of the cancelled job's error
