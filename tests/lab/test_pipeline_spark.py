"""Sweeps on Spark (``local[2]``, one session for the module): the same tables as the in-process loop,
resuming, failed runs, analytics against an independent computation, charts, the CLI; and, last, a
``local-cluster`` run proving the runs execute in separate executor processes with identical results."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from pipeline_support import CHECKED_METRICS, FAILING, GRID, SPARK_MARKS, Interrupt

pytest.importorskip("pyspark")

from kip_lab import cli
from kip_lab.pipeline import load_sweep, run_sweep
from kip_lab.pipeline.analytics import failed_runs, metric_percentiles, run_metrics, sweep_tables
from kip_lab.pipeline.charts import distribution_chart, metric_panels, percentile_chart
from kip_lab.pipeline.session import SparkSettings, spark_session
from kip_lab.viz import to_svg

pytestmark = SPARK_MARKS
COMPARED = ["run_id", "template", "protocol", *CHECKED_METRICS]


@pytest.fixture(scope="module")
def spark():
    session = spark_session(SparkSettings(master="local[2]"))
    yield session
    session.stop()


@pytest.fixture(scope="module")
def grid_outputs(spark, tmp_path_factory):
    """The GRID sweep written by both executors."""
    spec = load_sweep(GRID)
    local, on_spark = tmp_path_factory.mktemp("local"), tmp_path_factory.mktemp("spark")
    run_sweep(spec, local, executor="local", progress=False)
    summary = run_sweep(spec, on_spark, spark=spark, progress=False)
    assert (summary.executed, summary.failed) == (8, 0)
    return spec, local, on_spark


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="utf-8") as status:
        return int(next(line for line in status if line.startswith("PPid:")).split()[1])


def _executor_jvm(worker_pid: int) -> int:
    """A Python worker is forked by its executor's Python daemon, which the executor's JVM started."""
    return _parent(_parent(worker_pid))


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", encoding="utf-8") as cmdline:
        return cmdline.read().replace("\0", " ")


def _sorted(frame, key):
    return frame.sort_values(key).reset_index(drop=True)


def test_spark_and_the_in_process_loop_write_the_same_tables(spark, grid_outputs):
    spec, local, on_spark = grid_outputs
    a, b = sweep_tables(spark, local), sweep_tables(spark, on_spark)
    metrics_a = _sorted(a.metrics.select(*COMPARED).toPandas(), "run_id")
    metrics_b = _sorted(b.metrics.select(*COMPARED).toPandas(), "run_id")
    assert len(metrics_a) == 8 and metrics_a.equals(metrics_b)
    assert sorted(metrics_a["run_id"]) == sorted(r.run_id for r in spec.plan())
    columns = ["run_id", "seed", "point", "params", "status", "members", "protocol"]
    assert _sorted(a.runs.select(*columns).toPandas(), "run_id").equals(
        _sorted(b.runs.select(*columns).toPandas(), "run_id")
    )
    events = ["run_id", "seq", "step", "time_ms", "actor", "kind", "payload"]
    events_a = _sorted(a.events.select(*events).toPandas(), ["run_id", "seq"])
    events_b = _sorted(b.events.select(*events).toPandas(), ["run_id", "seq"])
    assert len(events_a) > 1000 and events_a.equals(events_b)


def test_analytics_percentiles_match_an_independent_computation(spark, grid_outputs):
    _, _, out = grid_outputs
    summary = metric_percentiles(spark, out, by=["members", "protocol"], quantiles=(0.5, 0.9))
    per_run = run_metrics(spark, out, by=["members", "protocol"])
    assert len(per_run) == 8
    assert list(summary.columns) == ["members", "protocol", "metric", "runs", "mean", "p50", "p90", "max"]
    for (members, protocol), runs in per_run.groupby(["members", "protocol"]):
        for metric in ("max_time_to_stable_ms", "total_unavailability_ms", "revocations", "records_written"):
            row = summary[
                (summary["members"] == members) & (summary["protocol"] == protocol) & (summary["metric"] == metric)
            ].iloc[0]
            values = runs[metric].astype(float).to_numpy()
            assert row["runs"] == len(values) == 2
            assert row["p50"] == pytest.approx(np.percentile(values, 50))
            assert row["p90"] == pytest.approx(np.percentile(values, 90))
            assert row["max"] == values.max() and row["mean"] == pytest.approx(values.mean())
    share = summary[summary["metric"] == "share_redeliveries"]
    assert (share["runs"] == 2).all() and (share["max"] == 0).all()  # consumer groups: no share records
    with pytest.raises(ValueError, match="no column \\['colour'\\]"):
        metric_percentiles(spark, out, by=["colour"])


def test_comparison_charts_are_built_from_the_analytics_frames(spark, grid_outputs):
    _, _, out = grid_outputs
    summary = metric_percentiles(spark, out, by=["members", "protocol"])
    chart = percentile_chart(summary, "total_unavailability_ms", x="members", color="protocol")
    spec = chart.to_dict()
    line = spec["layer"][1]
    assert line["mark"]["type"] == "line" and line["encoding"]["x"]["field"] == "members"
    assert line["encoding"]["color"]["scale"]["domain"] == ["consumer", "cooperative"]
    assert spec["layer"][0]["encoding"]["y2"]["field"] == "p90"
    panels = metric_panels(summary, ["max_time_to_stable_ms", "revocations"], x="members", color="protocol")
    assert [p["title"] for p in panels.to_dict()["hconcat"]] == [
        "time to stable (ms, worst trigger)",
        "revoked partitions",
    ]
    box = distribution_chart(run_metrics(spark, out, by=["members", "protocol"]), "revocations", "members", "protocol")
    assert box.to_dict()["mark"]["type"] == "boxplot"
    assert to_svg(panels).startswith("<svg")


def test_a_failing_run_on_spark_is_recorded_and_the_sweep_goes_on(spark, tmp_path):
    summary = run_sweep(load_sweep(FAILING), tmp_path, spark=spark, progress=False)
    assert (summary.executed, summary.failed) == (2, 1)
    failed = failed_runs(spark, tmp_path)
    assert len(failed) == 1 and failed["seed"].item() == 3 and "is never reached" in failed["error"].item()
    assert (tmp_path / "failed" / f"{failed['run_id'].item()}.yaml").exists()
    assert failed["repro"].item() == summary.failed_repro[0]
    assert len(sweep_tables(spark, tmp_path).metrics.collect()) == 1


def test_an_interrupted_spark_sweep_resumes_without_redoing_finished_runs(spark, tmp_path):
    spec = load_sweep({**GRID, "events": False})
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path, spark=spark, batch_runs=3, progress=Interrupt(after=3))
    first = spark.read.parquet(str(tmp_path / "runs")).select("run_id", "wall_ms").toPandas()
    assert len(first) == 3
    summary = run_sweep(spec, tmp_path, spark=spark, batch_runs=3, progress=False)
    assert (summary.already_done, summary.executed) == (3, 5)
    runs = spark.read.parquet(str(tmp_path / "runs")).select("run_id", "wall_ms").toPandas().set_index("run_id")
    assert sorted(runs.index) == sorted(r.run_id for r in spec.plan())
    assert list(runs.loc[list(first["run_id"]), "wall_ms"]) == list(first["wall_ms"])


def test_a_spark_sweep_killed_before_its_runs_write_resumes_with_no_duplicate_rows(spark, tmp_path):
    """The events and metrics of a batch are written before its runs rows: a kill in between left those
    rows behind, and the resume appended them again. The resume now drops the rows of unfinished runs."""
    spec = load_sweep(GRID)
    run_sweep(spec, tmp_path, spark=spark, batch_runs=4, progress=False)
    events_before = spark.read.parquet(str(tmp_path / "events")).count()
    for runs_file in (tmp_path / "runs").rglob("*.parquet"):  # as if no runs row of any batch had landed
        runs_file.unlink()
    summary = run_sweep(spec, tmp_path, spark=spark, batch_runs=8, progress=False)
    assert summary.executed == 8
    planned = sorted(r.run_id for r in spec.plan())
    for table in ("runs", "metrics"):
        ids = [row.run_id for row in spark.read.parquet(str(tmp_path / table)).select("run_id").collect()]
        assert sorted(ids) == planned, f"{table}: each run once"
    events = spark.read.parquet(str(tmp_path / "events"))
    assert events.count() == events_before == events.select("run_id", "seq").distinct().count()


def test_the_sweep_command_runs_on_the_given_master(spark, tmp_path, capsys):
    path = tmp_path / "sweep.yaml"
    path.write_text("name: cli\ntemplate: member_failures\ngrid: {members: [2, 3]}\nseeds: [5]\n", encoding="utf-8")
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "out"), "--master", "local[2]"]) == 0
    out, err = capsys.readouterr()
    assert "2 runs (0 already done, 2 executed, 0 failed)" in out and "2/2 runs" in err
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 0
    assert "2 runs (2 already done, 0 executed, 0 failed)" in capsys.readouterr().out


def test_local_cluster_runs_in_separate_executor_processes_with_the_same_results(spark, grid_outputs, tmp_path):
    """Last in the module: it stops the shared local[2] session to start a cluster of two executors."""
    spec, local, _ = grid_outputs
    expected = _sorted(sweep_tables(spark, local).metrics.select(*COMPARED).toPandas(), "run_id")
    spark.stop()
    cluster = spark_session(SparkSettings(master="local-cluster[2,1,1024]"))
    try:
        assert cluster.sparkContext.master == "local-cluster[2,1,1024]"
        status = cluster.sparkContext._jsc.sc().getExecutorMemoryStatus()
        for _ in range(600):  # both executors registered (plus the driver's block manager)
            if status.size() >= 3:
                break
            time.sleep(0.1)
            status = cluster.sparkContext._jsc.sc().getExecutorMemoryStatus()
        run_sweep(spec, tmp_path, spark=cluster, progress=False)
        tables = sweep_tables(cluster, tmp_path)
        pids = {row.executor_pid for row in tables.runs.select("executor_pid").distinct().collect()}
        assert os.getpid() not in pids
        # each Python worker's grandparent is its executor's JVM: two of them, neither the driver's
        executors = {_executor_jvm(pid) for pid in pids}
        assert len(executors) == 2, executors
        assert all("CoarseGrainedExecutorBackend" in _cmdline(jvm) for jvm in executors)
        got = _sorted(tables.metrics.select(*COMPARED).toPandas(), "run_id")
        assert got.equals(expected)
    finally:
        cluster.stop()
