"""Executing runs: one planned run -> one row (its runs row, metrics and events side by side), and tables.

``execute_run`` is the whole of what a Spark task does for a run, and what the in-process
loop does: build the run's scenario, ``run_scenario`` it, turn the result into a row. An
exception is the run's outcome (``status: failed`` with the error), never the sweep's.
Both executors turn rows into Arrow with ``rows_to_arrow`` and split them into the three
tables with ``split_tables``, so the two write the same data.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kip_lab.events import MessageDropped
from kip_lab.lab.ledger import LEDGER_METRICS
from kip_lab.pipeline import schema as s
from kip_lab.pipeline.spec import PlannedRun, SweepSpec, column_name
from kip_lab.scenarios import ScenarioResult, run_scenario

MAX_ERROR_CHARS = 4_000
SHARE_METRICS = ("share_records_acquired", "share_redeliveries", "share_records_acknowledged", "share_records_archived")


def parameter_columns(spec: SweepSpec) -> list[tuple[str, str, pa.DataType]]:
    """(parameter, column, type) of each of the sweep's parameters, typed from the values it takes.

    A parameter that is already a column of every runs table (``protocol``) is not repeated.
    """
    fixed = {name for name, _, _ in s.RUN_COLUMNS}
    return [
        (name, column_name(name), s.param_type([point.get(name) for point in spec.points]))
        for name in spec.dimensions
        if column_name(name) not in fixed
    ]


def param_columns(spec: SweepSpec) -> list[tuple[str, pa.DataType]]:
    """The runs table's parameter columns: (column, type)."""
    return [(column, kind) for _, column, kind in parameter_columns(spec)]


def failed_scenario_path(out: str | Path, run_id: str) -> Path:
    return Path(out) / "failed" / f"{run_id}.yaml"


def repro_command(out: str | Path, run: PlannedRun) -> str:
    return f"kip-lab run {failed_scenario_path(out, run.run_id)} --seed {run.seed}"


def execute_run(
    spec: SweepSpec, run: PlannedRun, out: str | Path, columns: list[tuple[str, str, pa.DataType]] | None = None
) -> dict[str, Any]:
    """Run one planned run; returns its row (columns of ``schema.wide_schema``).

    ``columns``: ``parameter_columns(spec)``, when the caller runs many runs of the spec.
    """
    started = time.perf_counter()
    row: dict[str, Any] = {
        "schema_version": s.SCHEMA_VERSION,
        "run_id": run.run_id,
        "template": spec.family,
        "protocol": spec.protocol(run.point),
        "sweep": spec.name,
        "seed": run.seed,
        "point": run.point,
        "params": json.dumps(spec.points[run.point], sort_keys=True),
        "status": s.OK,
        "error": None,
        "repro": None,
        "executor_pid": os.getpid(),
        **{name: None for name in s.METRIC_NAMES},
        "events": None,
    }
    point = spec.points[run.point]
    for name, column, kind in parameter_columns(spec) if columns is None else columns:
        row[column] = s.param_value(point.get(name), kind)
    try:
        scenario = spec.scenario_for(run.point, run.seed)
        result = run_scenario(scenario)
        if result.stopped is not None:
            raise RuntimeError(f"the run stopped: {result.stopped}")
        row.update(metric_values(result))
        if spec.events:
            row["events"] = [
                {
                    "seq": seq,
                    "step": e.step,
                    "time_ms": e.time_ms,
                    "actor": e.actor,
                    "kind": e.kind.value,
                    "payload": json.dumps(e.payload, sort_keys=True, default=str),
                }
                for seq, e in enumerate(result.trace)
            ]
    except Exception as exc:  # the run's outcome, recorded; the sweep goes on
        row["status"] = s.FAILED
        row["error"] = "".join(traceback.format_exception(exc))[-MAX_ERROR_CHARS:]
        row["repro"] = repro_command(out, run)
    row["wall_ms"] = (time.perf_counter() - started) * 1000
    return row


def metric_values(result: ScenarioResult) -> dict[str, Any]:
    """The metrics columns of a finished run."""
    m = result.metrics or {}
    after = _after(m)
    per_partition = [ms for group in m.get("partition_unavailability_ms", {}).values() for ms in group.values()]
    return {
        "steps": result.steps,
        "end_ms": result.end_ms,
        "stable_at_end": result.stable,
        "time_to_stable_ms": result.time_to_stable_ms,
        "triggers": len(m.get("triggers", ())),
        "unsettled_triggers": m.get("unsettled_triggers"),
        "max_time_to_stable_ms": m.get("max_time_to_stable_ms"),
        "mean_time_to_stable_ms": m.get("mean_time_to_stable_ms"),
        "total_unavailability_ms": m.get("total_unavailability_ms"),
        "max_partition_unavailability_ms": max(per_partition, default=0),
        "unavailable_partitions": sum(1 for ms in per_partition if ms > 0),
        "revocations": m.get("revocations"),
        "partition_moves": m.get("partition_moves"),
        "stops_without_move": m.get("stops_without_move"),
        "heartbeats_sent": m.get("heartbeats_sent"),
        "records_written": m.get("records_written"),
        "messages_dropped": len(result.trace.of_type(MessageDropped)),
        **after,
        "invariant_violations": len(result.violations),
        **{name: m.get(name) for name in SHARE_METRICS},
        **{name: m.get(name) for name in LEDGER_METRICS},
    }


AFTER_FIRST_EVENT = {  # column -> compute_metrics key; counted from the first timed event on
    "unavailability_after_first_event_ms": "total_unavailability_ms",
    "revocations_after_first_event": "revocations",
    "moves_after_first_event": "partition_moves",
}


def _after(metrics: dict[str, Any]) -> dict[str, Any]:
    """What the run's first timed event (the fault) cost: totals minus those of the run before it.

    ``run_scenario`` has the metrics report, under ``totals_before``, the totals of the events
    before the first timed event with the unavailability windows closed then: the run's startup
    (the group forming). Every one of these metrics adds up over time, so the difference is
    exactly what happened from the first timed event on.
    """
    before = metrics.get("totals_before")
    if before is None:
        return dict.fromkeys(AFTER_FIRST_EVENT)
    return {column: metrics[key] - before[key] for column, key in AFTER_FIRST_EVENT.items()}


def rows_to_arrow(rows: Iterable[dict[str, Any]], wide: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=wide)


def split_tables(wide: pa.Table, param_names: list[str]) -> dict[str, pa.Table]:
    """The runs, metrics and events tables of executed rows (events only if there are any)."""
    tables = {"runs": wide.select([n for n, _, _ in s.RUN_COLUMNS] + param_names)}
    ok = wide.filter(pc.equal(wide["status"], s.OK))
    tables["metrics"] = ok.select([n for n, _, _ in s.METRIC_COLUMNS])
    with_events = ok.filter(pc.invert(pc.is_null(ok["events"])))
    if with_events.num_rows:
        keys = [n for n, _, _ in s.EVENT_COLUMNS[:4]]
        indices = pc.list_parent_indices(with_events["events"])
        flat = pc.list_flatten(with_events["events"])
        columns = {k: pc.take(with_events[k], indices) for k in keys}
        columns.update({f.name: flat.combine_chunks().field(f.name) for f in s.EVENT_STRUCT})
        tables["events"] = pa.table(columns, schema=s.schema(s.EVENT_COLUMNS))
    return tables
