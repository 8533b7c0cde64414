"""Reading a sweep's tables back with Spark, and summarising them: percentiles by any grid dimension.

``sweep_tables(spark, out)`` gives the runs, metrics and events DataFrames, keeping only the
rows of finished runs, once each (see ``schema``). ``metric_percentiles`` groups the metrics
by any columns of the runs table (the spec's parameters, ``protocol``, ``template``, ``seed``)
and returns pandas, ready for ``kip_lab.pipeline.charts``; ``run_metrics`` returns one row
per run for distributions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kip_lab.pipeline import schema as s

DEFAULT_METRICS = (
    "max_time_to_stable_ms",
    "total_unavailability_ms",
    "max_partition_unavailability_ms",
    "revocations",
    "partition_moves",
    "records_written",
    "share_redeliveries",
    "share_records_archived",
    "records_reprocessed",
    "records_skipped",
    "processing_pause_ms",
)
DEFAULT_QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class SweepTables:
    runs: Any  # pyspark DataFrames
    metrics: Any
    events: Any | None  # None: the sweep kept no traces


def sweep_tables(spark: Any, out: str | Path) -> SweepTables:
    """The three tables of the sweep in ``out``, finished runs only, each row once."""
    from pyspark.sql import functions as F

    root = Path(out)
    if not (root / "runs").exists():
        raise FileNotFoundError(f"{root} has no runs table: is it a sweep's output folder?")
    runs = spark.read.parquet(str(root / "runs"))
    versions = {row.schema_version for row in runs.select("schema_version").distinct().collect()}
    if versions - {s.SCHEMA_VERSION}:
        raise ValueError(f"{root}: schema version(s) {sorted(versions)}; this kip_lab reads {s.SCHEMA_VERSION}")
    runs = runs.dropDuplicates(["run_id"])
    finished = runs.select("run_id")
    metrics = spark.read.parquet(str(root / "metrics")).join(finished, "run_id", "left_semi")
    metrics = metrics.dropDuplicates(["run_id"])
    events = None
    if (root / "events").exists():
        events = spark.read.parquet(str(root / "events")).join(F.broadcast(finished), "run_id", "left_semi")
        events = events.dropDuplicates(["run_id", "seq"])
    return SweepTables(runs, metrics, events)


def _with_dimensions(tables: SweepTables, by: Sequence[str]) -> Any:
    """The metrics with the grouping columns of the runs table joined on."""
    missing = [c for c in by if c not in tables.runs.columns]
    if missing:
        raise ValueError(f"no column {missing} in the runs table; have: {sorted(tables.runs.columns)}")
    extra = [c for c in by if c not in tables.metrics.columns]
    return tables.metrics.join(tables.runs.select("run_id", *extra), "run_id")


def metric_percentiles(
    spark: Any,
    out: str | Path,
    by: Sequence[str],
    metrics: Sequence[str] = DEFAULT_METRICS,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
):
    """Per group of ``by`` and per metric: runs, mean, the quantiles (exact), max — a long pandas frame.

    Columns: the ``by`` columns, ``metric``, ``runs`` (runs with a value), ``mean``, ``p50``,
    ``p90``... (one per quantile, named by its percent), ``max``. A metric no run has (share
    metrics without share groups) gives rows with ``runs`` 0 and nulls.
    """
    import pandas as pd
    from pyspark.sql import functions as F

    unknown = [m for m in metrics if m not in s.METRIC_NAMES]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; metrics: {s.METRIC_NAMES}")
    frame = _with_dimensions(sweep_tables(spark, out), by)
    aggregates = []
    for m in metrics:
        value = F.col(m).cast("double")
        aggregates += [
            F.count(value).alias(f"{m}|runs"),
            F.avg(value).alias(f"{m}|mean"),
            F.percentile(value, list(quantiles)).alias(f"{m}|q"),
            F.max(value).alias(f"{m}|max"),
        ]
    wide = frame.groupBy(*by).agg(*aggregates).orderBy(*by).toPandas()
    names = [_quantile_name(q) for q in quantiles]
    rows = []
    for record in wide.to_dict("records"):
        for m in metrics:
            qs = record[f"{m}|q"]
            qs = [None] * len(quantiles) if qs is None else list(qs)
            rows.append(
                {
                    **{c: record[c] for c in by},
                    "metric": m,
                    "runs": int(record[f"{m}|runs"]),
                    "mean": record[f"{m}|mean"],
                    **dict(zip(names, qs, strict=True)),
                    "max": record[f"{m}|max"],
                }
            )
    return pd.DataFrame(rows, columns=[*by, "metric", "runs", "mean", *names, "max"])


def run_metrics(spark: Any, out: str | Path, by: Sequence[str], metrics: Sequence[str] = DEFAULT_METRICS):
    """One row per finished run: its ``by`` columns, run_id, seed and the metrics — pandas, sorted by run_id."""
    tables = sweep_tables(spark, out)
    frame = _with_dimensions(tables, [*by, "seed"])
    columns = list(dict.fromkeys(["run_id", "seed", *by, *metrics]))
    return frame.select(*columns).orderBy("run_id").toPandas()


def failed_runs(spark: Any, out: str | Path):
    """The failed runs: run_id, seed, params, error, repro — pandas."""
    from pyspark.sql import functions as F

    runs = sweep_tables(spark, out).runs
    return runs.where(F.col("status") == s.FAILED).select("run_id", "seed", "params", "error", "repro").toPandas()


def _quantile_name(q: float) -> str:
    percent = q * 100
    return f"p{int(percent)}" if percent == int(percent) else f"p{percent:g}".replace(".", "_")
