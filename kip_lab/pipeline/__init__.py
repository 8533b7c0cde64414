"""Sweeps: many deterministic Lab runs over a grid of parameters, on Spark or in-process, into Parquet tables.

    from kip_lab.pipeline import load_sweep, run_sweep
    spec = load_sweep("sweep.yaml")                 # validated: a bad field is named before anything runs
    run_sweep(spec, "out/", executor="spark")       # or executor="local" (the plain in-process loop)

``kip_lab.pipeline.analytics`` reads the tables back with Spark and ``kip_lab.pipeline.charts``
draws the comparisons. Nothing here is imported by the rest of kip_lab; it needs the ``spark``
extra (pyspark, pyarrow, pandas).
"""

from kip_lab.pipeline.schema import SCHEMA_VERSION
from kip_lab.pipeline.spec import PlannedRun, SweepSpec, load_sweep
from kip_lab.pipeline.sweep import SweepOutputError, SweepSummary, finished_runs, run_sweep
from kip_lab.pipeline.templates import PROTOCOLS, TEMPLATES

__all__ = [
    "PROTOCOLS",
    "SCHEMA_VERSION",
    "TEMPLATES",
    "PlannedRun",
    "SweepOutputError",
    "SweepSpec",
    "SweepSummary",
    "finished_runs",
    "load_sweep",
    "run_sweep",
]
