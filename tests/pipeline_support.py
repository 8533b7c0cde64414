"""What the pipeline tests (and the pipeline benchmark) share: the metrics they check run by run, a
sweep with one failing run, a progress stream that interrupts a sweep, and Spark deployments on
loopback (a standalone cluster, a Spark Connect server)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

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

# A grid of 8 runs (2 sizes x 2 protocols x 2 seeds) with their traces: the sweep every Spark deployment writes.
GRID = {
    "name": "grid",
    "template": "rolling_bounce",
    "params": {"partitions": 4},
    "grid": {"members": [2, 3], "protocol": ["consumer", "cooperative"]},
    "seeds": [1, 2],
    "events": True,
}

# The marks of every Spark test module. pyspark 4.3 with pandas 3: its own conversions warn;
# nothing kip_lab can act on.
SPARK_MARKS = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

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


# ---------------------------------------------------------------------------- Spark clusters on loopback
# A standalone master with its workers, and a Spark Connect server, started from the PySpark
# distribution's own launcher (bin/spark-class, bin/spark-submit) on 127.0.0.1; their Python
# workers run an interpreter that cannot import kip_lab, so kip_lab reaches them only the way
# it reaches a real cluster's: shipped with the session.


MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"
EXECUTOR_MEMORY = "512m"


def java_missing() -> str | None:
    """Why the cluster tests cannot run here (no pyspark, no Java), or None."""
    try:
        import pyspark  # noqa: F401

        from kip_lab.pipeline.session import SparkSetupError, find_java
    except ImportError:
        return "pyspark is not installed"
    try:
        find_java()
    except SparkSetupError as exc:
        return str(exc)
    return None


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def python_without_kip_lab(folder: Path) -> str:
    """A virtual environment whose site has the shared venv's packages (pyspark, pydantic, ...) but
    not kip_lab: its site-packages is added as a plain path, so the editable install's finder
    (a .pth hook there) never runs. Returns its python."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    site = next((folder / "lib").glob("python3*/site-packages"))
    shared = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "pyspark").is_dir())
    (site / "shared.pth").write_text(shared + "\n", encoding="utf-8")
    python = str(folder / "bin" / "python")
    probe = subprocess.run(
        [python, "-c", "import kip_lab"], capture_output=True, text=True, env=_clean_env(), cwd=folder
    )
    assert probe.returncode != 0, "the executors' python must not import kip_lab"
    return python


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without the paths that would hand kip_lab to a child's Python."""
    from kip_lab.pipeline.session import find_java

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "SPARK_HOME")}
    env.update(JAVA_HOME=find_java(), SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", **extra)
    return env


class Daemons:
    """Spark processes this test started, each in its own process group; ``stop`` ends every group
    (the JVM and whatever it forked: executors, Python daemons) and waits for them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.processes: list[subprocess.Popen] = []

    def start(self, name: str, command: list[str], env: dict[str, str], ready: str, timeout_s: float = 120) -> str:
        """Start ``command``; returns the first match of the regex ``ready`` in its log."""
        log = self.folder / f"{name}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=self.folder
            )
        self.processes.append(process)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.search(ready, log.read_text(errors="replace"))
            if found:
                return found.group(0)
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited ({process.returncode}):\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        raise RuntimeError(f"{name} did not start in {timeout_s:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        for process in reversed(self.processes):
            _signal_group(process.pid, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait()
            deadline = time.monotonic() + 20  # the group's other members (executors, Python daemons)
            while _group_alive(process.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            _signal_group(process.pid, signal.SIGKILL)
        self.processes.clear()

    def pids(self) -> set[int]:
        """Every live process of the groups started here."""
        return {pid for process in self.processes for pid in _group_members(process.pid)}


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...), None if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def processes() -> dict[int, list[str]]:
    """Every live process: pid -> its stat fields."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(int(entry.name))
            if fields is not None and fields[0] != "Z":
                found[int(entry.name)] = fields
    return found


def parent_of(pid: int) -> int | None:
    fields = stat_fields(pid)
    return None if fields is None else int(fields[1])


def descendants(root: int) -> set[int]:
    """The live processes below ``root`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for pid, fields in processes().items():
        children.setdefault(int(fields[1]), []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def _group_members(pgid: int) -> set[int]:
    return {pid for pid, fields in processes().items() if int(fields[2]) == pgid}


def _group_alive(pgid: int) -> bool:
    return bool(_group_members(pgid))


def _daemon_env(folder: Path, python: str) -> dict[str, str]:
    return _clean_env(  # Spark's default logging (INFO): the logs say when a daemon is ready
        PYSPARK_PYTHON=python,
        SPARK_WORKER_DIR=str(folder / "work"),
        SPARK_LOG_DIR=str(folder),
        SPARK_CONF_DIR=str(folder),  # none of the machine's spark-defaults.conf / spark-env.sh
    )


class StandaloneCluster(Daemons):
    """A standalone master and ``workers`` workers on 127.0.0.1: ``with`` starts and stops them. Each worker
    offers two cores, so two applications (a sweep and a resumed one, say) run side by side, each
    with one single-core executor per worker (``session_conf``)."""

    def __init__(self, folder: Path, python: str, workers: int = 2, worker_memory: str = "1200m") -> None:
        super().__init__(folder)
        self.python, self.workers, self.worker_memory = python, workers, worker_memory
        self.url = ""

    def __enter__(self) -> StandaloneCluster:
        spark_class = str(spark_home() / "bin" / "spark-class")
        env = {**_daemon_env(self.folder, self.python), "SPARK_DAEMON_MEMORY": "256m"}
        try:
            port = free_port()
            master = [spark_class, MASTER, "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"]
            self.url = f"spark://127.0.0.1:{port}"
            self.start("master", master, env, r"I have been elected leader|ALIVE")
            for index in range(self.workers):
                worker = [spark_class, WORKER, "--host", "127.0.0.1", "--cores", "2", "--memory", self.worker_memory]
                worker += ["--webui-port", "0", "--work-dir", str(self.folder / f"work{index}"), self.url]
                self.start(f"worker{index}", worker, env, r"Successfully registered with master")
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def session_conf(self) -> dict[str, str]:
        """What a sweep's session on this cluster sets: small executors, one per worker, the executors' python."""
        return {
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": "1",
            "spark.cores.max": str(self.workers),
            "spark.driver.memory": "512m",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.pyspark.python": self.python,
        }


class ConnectServer(Daemons):
    """PySpark's Spark Connect server (``local[2]`` behind it) on 127.0.0.1: ``with`` starts and stops it."""

    def __init__(self, folder: Path, python: str) -> None:
        super().__init__(folder)
        self.python = python
        self.url = ""

    def __enter__(self) -> ConnectServer:
        port = free_port()
        submit = [str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_SERVER, "--master", "local[2]"]
        submit += ["--driver-memory", "768m"]
        for key, value in {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "8",
        }.items():
            submit += ["--conf", f"{key}={value}"]
        submit.append("spark-internal")
        try:
            self.start("connect", submit, _daemon_env(self.folder, self.python), r"Spark Connect server started")
        except BaseException:
            self.stop()
            raise
        self.url = f"sc://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
