"""Sweeps on real Spark deployments, started by the tests on 127.0.0.1 from PySpark's own launcher:
a standalone master with two workers, and a Spark Connect server. Their Python workers run an
interpreter that cannot import kip_lab: it reaches them only as the zip the session ships.

Every deployment writes the same runs, metrics and events tables as the in-process loop; a
driver killed mid-sweep on the cluster resumes with each run once; Ctrl-C stops a cluster sweep
(its jobs, its session, the executors it held) with one line and exit 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pyarrow.dataset as ds
import pytest
from pipeline_support import (
    GRID,
    SPARK_MARKS,
    ConnectServer,
    StandaloneCluster,
    cmdline,
    descendants,
    java_missing,
    parent_of,
    python_without_kip_lab,
)

REASON = java_missing()
if REASON is not None:
    pytest.skip(f"Spark cannot start here: {REASON}", allow_module_level=True)

pytestmark = SPARK_MARKS

from pyspark import cloudpickle  # noqa: E402  (after the skip: pyspark may be missing)

from kip_lab.pipeline import load_sweep, run_sweep  # noqa: E402

# what differs between two executions of the same run: where and how fast it ran
PER_EXECUTION = {"executor_pid", "wall_ms"}
KEYS = {"runs": ["run_id"], "metrics": ["run_id"], "events": ["run_id", "seq"]}
REPO = Path(__file__).resolve().parents[2]


def tables(out: Path) -> dict[str, pd.DataFrame]:
    """The three tables as written (every file, no de-duplication), sorted, without per-execution columns."""
    frames = {}
    for name, keys in KEYS.items():
        table = ds.dataset(out / name, format="parquet", partitioning="hive").to_table().to_pandas()
        for column in ("template", "protocol"):  # hive partition values: plain strings
            table[column] = table[column].astype(str)
        columns = sorted(c for c in table.columns if c not in PER_EXECUTION)
        frames[name] = table[columns].sort_values(keys).reset_index(drop=True)
    return frames


def assert_same_tables(got: Path, expected: dict[str, pd.DataFrame]) -> None:
    actual = tables(got)
    for name, frame in expected.items():
        assert actual[name].duplicated(KEYS[name]).sum() == 0, f"{name}: a run written twice"
        pd.testing.assert_frame_equal(actual[name], frame, check_dtype=False, obj=name)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, pd.DataFrame]:
    """GRID, run by the in-process loop: the tables every deployment must write."""
    out = tmp_path_factory.mktemp("in-process")
    run_sweep(load_sweep(GRID), out, executor="local", progress=False)
    expected = tables(out)
    assert (len(expected["runs"]), len(expected["metrics"])) == (8, 8) and len(expected["events"]) > 1000
    return expected


@pytest.fixture(scope="module")
def workers_python(tmp_path_factory) -> str:
    return python_without_kip_lab(tmp_path_factory.mktemp("workers-venv"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, workers_python):
    with StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers_python) as running:
        yield running
    assert not running.pids(), "processes of the cluster outlived it"


@pytest.fixture(scope="module")
def cluster_spark(cluster):
    from kip_lab.pipeline.session import SparkSettings, spark_session

    session = spark_session(SparkSettings(master=cluster.url, conf=cluster.session_conf()))
    yield session
    session.stop()


def alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if Path(f"/proc/{pid}").exists()}


def wait_until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} after {timeout_s:.0f} s"
        time.sleep(0.2)


def driver_env(**extra: str) -> dict[str, str]:
    """A child driver: this tree's kip_lab on its path, nothing else of this process's Spark setup."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "KIP_LAB_SPARK"))}
    return {**env, "PYTHONPATH": str(REPO), **extra}


def test_the_standalone_cluster_writes_the_in_process_tables(cluster, cluster_spark, reference, tmp_path):
    wait_until(lambda: len(executors(cluster)) == 2, 60, "the session has no executor on each worker")
    summary = run_sweep(load_sweep(GRID), tmp_path, spark=cluster_spark, progress=False)
    assert (summary.executed, summary.failed) == (8, 0)
    assert_same_tables(tmp_path, reference)
    pids = set(ds.dataset(tmp_path / "runs", partitioning="hive").to_table().column("executor_pid").to_pylist())
    assert len(pids) >= 2 and os.getpid() not in pids
    # the cluster's Python workers: on both workers, a Python without kip_lab, which imports the shipped zip
    for module in (__name__, "pipeline_support"):  # the executors cannot import these modules
        cloudpickle.register_pickle_by_value(sys.modules[module])
    where = cluster_spark.sparkContext.parallelize(range(8), 8).map(lambda _: _whereabouts()).collect()
    assert {executor for executor, _, _ in where} == executors(cluster)
    assert {(python, Path(origin).parent.parent.name) for _, python, origin in where} == {
        (cluster.python, "kip_lab.zip")
    }


def _whereabouts() -> tuple[int | None, str, str]:
    """In a Spark task: its executor's JVM, its Python, where it imported kip_lab from."""
    import kip_lab

    return _executor_of(os.getpid()), sys.executable, kip_lab.__file__


def executors(cluster: StandaloneCluster) -> set[int]:
    """The executor JVMs running on the cluster's workers."""
    return {pid for pid in cluster.pids() if "CoarseGrainedExecutorBackend" in cmdline(pid)}


def _executor_of(pid: int | None) -> int | None:
    """The executor JVM a process descends from, if any."""
    while pid is not None and pid > 1:
        if "CoarseGrainedExecutorBackend" in cmdline(pid):
            return pid
        pid = parent_of(pid)
    return None


KILLED_DRIVER = textwrap.dedent(
    """
    import sys
    from kip_lab.pipeline import load_sweep, run_sweep
    from kip_lab.pipeline.session import SparkSettings, spark_session
    master, out, conf = sys.argv[1], sys.argv[2], dict(a.split("=", 1) for a in sys.argv[3:])
    spark = spark_session(SparkSettings(master=master, conf=conf))
    run_sweep(load_sweep({grid!r}), out, spark=spark, batch_runs=2, progress=False)
    """
).format(grid=GRID)


def committed_runs(out: Path) -> int:
    """Rows in the runs table's committed files (not those of a write in progress, under ``_temporary``)."""
    files = [str(p) for p in (out / "runs").rglob("*.parquet") if "_temporary" not in p.parts]
    return ds.dataset(files, format="parquet").count_rows() if files else 0


def test_a_sweep_whose_driver_is_killed_resumes_on_the_cluster(cluster, cluster_spark, reference, tmp_path):
    conf = [f"{k}={v}" for k, v in cluster.session_conf().items()]
    driver = subprocess.Popen(
        [sys.executable, "-c", KILLED_DRIVER, cluster.url, str(tmp_path), *conf],
        env=driver_env(),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: committed_runs(tmp_path), 240, "no batch finished")
        spawned = descendants(driver.pid)  # the driver's JVM
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    wait_until(lambda: not alive(spawned), 60, "the killed driver's JVM is still running")
    finished = committed_runs(tmp_path)
    assert 2 <= finished < 8
    summary = run_sweep(load_sweep(GRID), tmp_path, spark=cluster_spark, batch_runs=2, progress=False)
    assert (summary.already_done, summary.executed) == (finished, 8 - finished)
    assert_same_tables(tmp_path, reference)


def test_ctrl_c_stops_a_cluster_sweep_its_session_and_executors(cluster, tmp_path):
    """As a terminal does: SIGINT to the command's whole process group."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    defaults = "\n".join(f"{k} {v}" for k, v in cluster.session_conf().items())
    (conf_dir / "spark-defaults.conf").write_text(defaults + "\n", encoding="utf-8")
    spec = tmp_path / "long.yaml"
    spec.write_text("name: long\ntemplate: rolling_bounce\nparams: {members: 3}\nseeds: {count: 600}\n")
    command = [sys.executable, "-m", "kip_lab.cli", "sweep", str(spec), "--out", str(tmp_path / "out")]
    before = executors(cluster)
    cli = subprocess.Popen(
        [*command, "--master", cluster.url],
        env=driver_env(SPARK_CONF_DIR=str(conf_dir)),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:

        def running_tasks() -> bool:  # the sweep's executors run Python workers
            started = {_executor_of(pid) for pid in cluster.pids() if "pyspark.daemon" in cmdline(pid)}
            return bool(started - before - {None})

        wait_until(running_tasks, 300, "the sweep's tasks did not start")
        spawned = descendants(cli.pid)
        os.killpg(cli.pid, signal.SIGINT)
        out, err = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait()
    assert cli.returncode == 130, err
    said = [line for line in err.splitlines() if not line.startswith(("sweep long [", "WARNING: Using incubator"))]
    assert said == ["kip-lab: interrupted"] and out == "", err
    wait_until(lambda: not alive(spawned), 30, "the driver's JVM outlived the command")
    wait_until(lambda: not executors(cluster) - before, 30, "the sweep's executors outlived it")


def test_local_2_writes_the_in_process_tables(reference, tmp_path):
    """``kip-lab sweep --master local[2]``, in its own process (this one's session is on the cluster)."""
    spec = tmp_path / "grid.yaml"
    spec.write_text(json.dumps(GRID), encoding="utf-8")  # JSON is YAML
    command = [sys.executable, "-m", "kip_lab.cli", "sweep", str(spec), "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [*command, "--master", "local[2]"], env=driver_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert_same_tables(tmp_path / "out", reference)


def test_spark_connect_writes_the_in_process_tables(workers_python, reference, tmp_path):
    """``kip-lab sweep --remote``: the command in its own process (a Connect client changes pyspark's
    mode for the whole process), the server's Python workers without kip_lab."""
    spec = tmp_path / "grid.yaml"
    spec.write_text(json.dumps(GRID), encoding="utf-8")  # JSON is YAML
    with ConnectServer(tmp_path / "server", workers_python) as server:
        command = [sys.executable, "-m", "kip_lab.cli", "sweep", str(spec), "--out", str(tmp_path / "out")]
        done = subprocess.run(
            [*command, "--remote", server.url],
            env=driver_env(),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert not server.pids(), "processes of the Connect server outlived it"
    # the server's workers ran every run (their Python cannot import kip_lab: the artifact brought it)
    assert done.returncode == 0, done.stderr
    assert "8 runs (0 already done, 8 executed, 0 failed)" in done.stdout
    assert_same_tables(tmp_path / "out", reference)
