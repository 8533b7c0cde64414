"""The sweep tables' schema (version ``SCHEMA_VERSION``): three partitioned Parquet datasets in the output folder.

Layout of ``OUT/`` (written by ``run_sweep``, read by ``kip_lab.pipeline.analytics``)::

    OUT/sweep.json                   the spec, with "schema_version"
    OUT/runs/template=T/protocol=P/*.parquet
    OUT/metrics/template=T/protocol=P/*.parquet
    OUT/events/template=T/protocol=P/*.parquet      (only with ``events: true``)
    OUT/failed/<run_id>.yaml         the scenario of each failed run, for ``kip-lab run``

Every row carries ``schema_version``; readers refuse a version they do not know. A run is
finished once its row is in ``runs`` (it is written after its metrics and events), so an
interrupted sweep may leave a few metrics or events rows of runs it will redo: the readers
keep only rows of finished runs, once each.

runs: one row per run
    schema_version, sweep, run_id (hex, from the run's family, full parameters and seed),
    template (partition; ``scenario-<name>`` for a scenario sweep), protocol (partition),
    seed, point (index of the grid point), params (JSON text: the grid point's values),
    status (``ok`` | ``failed``), error (the exception, for a failed run), repro (the
    ``kip-lab run`` command that replays a failed run), executor_pid and wall_ms (where
    and how long it ran: the only columns that differ between two executions of a sweep),
    then one column per parameter the spec names (grid and params; dots become underscores).
metrics: one row per finished ``ok`` run, from ``kip_lab.lab.metrics.compute_metrics``
    (see its module for the exact definitions)
events: one row per trace event (``kip_lab.lab.trace.TraceEvent``); payload is JSON text
    with sorted keys.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

SCHEMA_VERSION = 2  # 2: the delivery ledger's columns
PARTITION_COLUMNS = ["template", "protocol"]
OK, FAILED = "ok", "failed"

_KEY = [
    ("schema_version", pa.int32(), "the version of this schema"),
    ("run_id", pa.string(), "the run's id"),
    ("template", pa.string(), "the scenario family (partition)"),
    ("protocol", pa.string(), "the group protocol (partition)"),
]

RUN_COLUMNS: list[tuple[str, pa.DataType, str]] = [
    *_KEY,
    ("sweep", pa.string(), "the sweep's name"),
    ("seed", pa.int64(), "the Lab's seed"),
    ("point", pa.int64(), "index of the grid point"),
    ("params", pa.string(), "the grid point's values, JSON"),
    ("status", pa.string(), "ok or failed"),
    ("error", pa.string(), "a failed run's exception"),
    ("repro", pa.string(), "a failed run's kip-lab run command"),
    ("executor_pid", pa.int64(), "the process that ran it"),
    ("wall_ms", pa.float64(), "how long it took (wall clock)"),
]

METRIC_COLUMNS: list[tuple[str, pa.DataType, str]] = [
    *_KEY,
    ("steps", pa.int64(), "steps the run took"),
    ("end_ms", pa.int64(), "simulated time at the end"),
    ("stable_at_end", pa.bool_(), "the Lab was stable when the run ended"),
    ("time_to_stable_ms", pa.int64(), "from the last scheduled event to the first stable moment after it"),
    ("triggers", pa.int64(), "faults and group epoch bumps"),
    ("unsettled_triggers", pa.int64(), "triggers the Lab never settled after"),
    ("max_time_to_stable_ms", pa.int64(), "the longest time to stable over the triggers"),
    ("mean_time_to_stable_ms", pa.float64(), "the mean time to stable over the triggers"),
    ("total_unavailability_ms", pa.int64(), "summed over partitions: time nobody fetched it"),
    ("max_partition_unavailability_ms", pa.int64(), "the worst partition's unavailability"),
    ("unavailable_partitions", pa.int64(), "partitions that were unavailable at some point"),
    ("revocations", pa.int64(), "partitions passed to on_partitions_revoked"),
    ("partition_moves", pa.int64(), "a partition's fetcher changed"),
    ("stops_without_move", pa.int64(), "a member stopped fetching a partition it then fetched again"),
    ("heartbeats_sent", pa.int64(), "heartbeat requests put on the network"),
    ("records_written", pa.int64(), "coordinator records (group records and offset commits)"),
    ("messages_dropped", pa.int64(), "messages the network dropped"),
    ("unavailability_after_first_event_ms", pa.int64(), "total_unavailability_ms from the first timed event on"),
    ("revocations_after_first_event", pa.int64(), "revocations from the first timed event on"),
    ("moves_after_first_event", pa.int64(), "partition_moves from the first timed event on"),
    ("invariant_violations", pa.int64(), "invariant violations (0 in a correct run)"),
    ("share_records_acquired", pa.int64(), "share records acquired by a consumer (every delivery)"),
    ("share_redeliveries", pa.int64(), "share records acquired again (delivery count above 1)"),
    ("share_records_acknowledged", pa.int64(), "share records accepted"),
    ("share_records_archived", pa.int64(), "share records archived (rejected, out of deliveries, or passed)"),
    ("records_processed", pa.int64(), "records the groups' applications processed (twice counts twice)"),
    ("records_reprocessed", pa.int64(), "records a group processed again"),
    ("records_skipped", pa.int64(), "records below a group's position that nobody in it processed"),
    ("commits_failed", pa.int64(), "offset commits with a partition not committed"),
    ("max_lag_records", pa.int64(), "the most records a group's partition fell behind its log end"),
    ("processing_pause_ms", pa.int64(), "summed over partitions: time records waited and nobody processed them"),
]

EVENT_COLUMNS: list[tuple[str, pa.DataType, str]] = [
    *_KEY,
    ("seq", pa.int64(), "the event's position in the run's trace"),
    ("step", pa.int64(), "the step that produced it"),
    ("time_ms", pa.int64(), "simulated time"),
    ("actor", pa.string(), "who acted"),
    ("kind", pa.string(), "the event kind"),
    ("payload", pa.string(), "the payload, JSON with sorted keys"),
]

EVENT_STRUCT = pa.struct([(n, t) for n, t, _ in EVENT_COLUMNS if n not in {c for c, _, _ in _KEY}])
METRIC_NAMES = [n for n, _, _ in METRIC_COLUMNS if n not in {c for c, _, _ in _KEY}]


def param_type(values: list[Any]) -> pa.DataType:
    """The column type of a parameter from the values it takes (None allowed); other data is JSON text."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pa.bool_()
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.int64()
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pa.float64()
    return pa.string()


def param_value(value: Any, kind: pa.DataType) -> Any:
    if value is None:
        return None
    if kind == pa.string() and not isinstance(value, str):
        return json.dumps(value, sort_keys=True)
    if kind == pa.float64():
        return float(value)
    return value


def schema(columns: list[tuple[str, pa.DataType, str]], extra: Sequence[tuple[str, pa.DataType]] = ()) -> pa.Schema:
    fields = [pa.field(n, t) for n, t, _ in columns] + [pa.field(n, t) for n, t in extra]
    return pa.schema(fields, metadata={"kip_lab.schema_version": str(SCHEMA_VERSION)})


def wide_schema(param_columns: list[tuple[str, pa.DataType]]) -> pa.Schema:
    """What one executed run yields: its runs row, its metrics row and its events, side by side."""
    keys = {n for n, _, _ in _KEY}
    columns = [*RUN_COLUMNS, *[c for c in METRIC_COLUMNS if c[0] not in keys]]
    return schema(columns, [*param_columns, ("events", pa.list_(EVENT_STRUCT))])


def describe() -> str:
    """The three tables, column by column, as text (the documentation of this version)."""
    lines = [f"schema version {SCHEMA_VERSION}"]
    for table, columns in (("runs", RUN_COLUMNS), ("metrics", METRIC_COLUMNS), ("events", EVENT_COLUMNS)):
        lines.append(f"\n{table}:")
        lines += [f"  {name:<32} {kind!s:<8} {doc}" for name, kind, doc in columns]
    lines.append("  (runs also has one column per parameter the spec names)")
    return "\n".join(lines)
