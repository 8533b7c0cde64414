"""A review's runs on Spark: each variant is a sweep of the pipeline (``kip_lab.pipeline.run_sweep``).

The variant's scenario is written to ``sweeps/variant-<i>.yaml``, swept over the review's seeds
with its events kept (``events: true``), and each run's trace is read back from the events
table, so the review's numbers are ``compute_metrics`` of the very traces Spark produced, as in
process. Needs the ``spark`` extra.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from kip_lab.files import write_atomically
from kip_lab.lab.metrics import compute_metrics
from kip_lab.lab.trace import Trace, TraceEvent
from kip_lab.review.compare import ReviewError, RunOutcome, Variant


def spark_runs(
    variants: Sequence[Variant], seeds: Sequence[int], folder: Path, spark: Any, say: Callable[[str], None]
) -> tuple[list[RunOutcome], Callable[[int, int], Trace]]:
    import pyarrow.dataset as ds

    from kip_lab.pipeline import SweepSpec, run_sweep
    from kip_lab.pipeline.session import spark_session

    spark = spark if spark is not None else spark_session()
    folder.mkdir(parents=True, exist_ok=True)
    runs, traces = [], {}
    for variant in variants:
        scenario_file = folder / f"variant-{variant.index}.yaml"
        data = variant.scenario.model_dump(mode="json", exclude_unset=True)
        write_atomically(scenario_file, yaml.safe_dump(data, sort_keys=False))
        name = f"review-variant-{variant.index}"
        spec = SweepSpec(name=name, scenario=str(scenario_file), seeds=list(seeds), events=True)
        out = folder / f"variant-{variant.index}"
        summary = run_sweep(spec, out, executor="spark", spark=spark, progress=False)
        if summary.failed:
            raise ReviewError(f"{variant.label}: {summary.failed} runs failed on Spark:\n{summary}")
        seed_of = {run.run_id: run.seed for run in spec.plan()}
        events = ds.dataset(out / "events", format="parquet", partitioning="hive").to_table().to_pylist()
        by_run: dict[str, list[dict[str, Any]]] = {}
        for row in events:
            by_run.setdefault(row["run_id"], []).append(row)
        for run_id, rows in sorted(by_run.items(), key=lambda item: seed_of[item[0]]):
            rows.sort(key=lambda row: row["seq"])
            heads = ("step", "time_ms", "actor", "kind")
            trace = Trace(
                TraceEvent.from_dict({**{k: row[k] for k in heads}, "payload": json.loads(row["payload"])})
                for row in rows
            )
            seed = seed_of[run_id]
            metrics = compute_metrics(trace, totals_before_ms=variant.scenario.first_event_ms)
            runs.append(RunOutcome(variant.index, seed, metrics, metrics["stable_at_end"]))
            traces[(variant.index, seed)] = trace
        say(f"{variant.label}: {len(seeds)} runs on Spark")
    return runs, lambda variant, seed: traces[(variant, seed)]
