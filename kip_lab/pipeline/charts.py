"""Altair builders for sweep comparisons: pandas frames from ``kip_lab.pipeline.analytics`` in, a chart spec out.

Like ``kip_lab.viz.charts``, each builder is pure and rendering is a separate choice
(``kip_lab.viz.to_svg`` for a static picture). Data go in inline as JSON text, so a frame
of many runs builds like a small one.

* ``percentile_chart`` — a metric's median against a grid dimension, one line per compared
  value (protocol, assignor, ...), with a bar up to a higher percentile;
* ``distribution_chart`` — every run's value as a box plot per (dimension, compared value);
* ``metric_panels`` — ``percentile_chart`` for several metrics side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import altair as alt
import pandas as pd

from kip_lab.contract import checked
from kip_lab.viz.charts import _values  # one way to inline data for every chart

METRIC_TITLES = {
    "max_time_to_stable_ms": "time to stable (ms, worst trigger)",
    "mean_time_to_stable_ms": "time to stable (ms, mean over triggers)",
    "time_to_stable_ms": "time to stable after the last event (ms)",
    "total_unavailability_ms": "partition unavailability (ms, summed)",
    "max_partition_unavailability_ms": "worst partition's unavailability (ms)",
    "unavailable_partitions": "partitions ever unavailable",
    "revocations": "revoked partitions",
    "unavailability_after_first_event_ms": "partition unavailability after the first fault (ms)",
    "revocations_after_first_event": "revoked partitions after the first fault",
    "moves_after_first_event": "partition moves after the first fault",
    "partition_moves": "partition moves",
    "records_written": "records written",
    "heartbeats_sent": "heartbeats sent",
    "stops_without_move": "stops without a move",
    "share_records_acquired": "share records acquired",
    "share_redeliveries": "share records redelivered",
    "share_records_acknowledged": "share records acknowledged",
    "share_records_archived": "share records archived",
    "records_processed": "records processed",
    "records_reprocessed": "records re-processed",
    "records_skipped": "records skipped",
    "commits_failed": "failed commits",
    "max_lag_records": "max lag (records)",
    "processing_pause_ms": "processing pause (ms, summed)",
}
COMPARE_SCHEME: Final = "tableau10"


def metric_title(metric: str) -> str:
    return METRIC_TITLES.get(metric, metric.replace("_", " "))


def _require(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"the frame has no column(s) {missing}; it has {list(frame.columns)}")


def percentile_chart(
    frame: pd.DataFrame,
    metric: str,
    x: str,
    color: str = "protocol",
    *,
    center: str = "p50",
    upper: str = "p90",
    width: int = 300,
    height: int = 220,
) -> alt.LayerChart:
    """``metric``'s ``center`` percentile against ``x``, one line per ``color`` value, a rule up to ``upper``.

    ``frame`` is ``analytics.metric_percentiles(..., by=[x, color])``.
    """
    _require(frame, [x, color, "metric", center, upper, "runs"])
    data = frame[(frame["metric"] == metric) & (frame["runs"] > 0)]
    if data.empty:
        raise ValueError(f"no run has a value for {metric!r}")
    compared = sorted(data[color].astype(str).unique())
    data = data.assign(**{color: data[color].astype(str)})
    x_kind = "Q" if pd.api.types.is_numeric_dtype(data[x]) else "O"
    # whole-number grid values (group sizes, lock durations) on their own ticks, not from zero
    axis_x = alt.Axis(values=sorted(data[x].unique().tolist())) if x_kind == "Q" else alt.Axis()
    encode_x = alt.X(f"{x}:{x_kind}", title=x.replace("_", " "), axis=axis_x, scale=alt.Scale(zero=False))
    colour = alt.Color(f"{color}:N", scale=alt.Scale(domain=compared, scheme=COMPARE_SCHEME), title=color)
    tooltip = [
        alt.Tooltip(f"{x}:{x_kind}"),
        alt.Tooltip(f"{color}:N"),
        alt.Tooltip(f"{center}:Q"),
        alt.Tooltip(f"{upper}:Q"),
        alt.Tooltip("max:Q"),
        alt.Tooltip("runs:Q"),
    ]
    base = alt.Chart(_values(data, [x, color, center, upper, "max", "runs"]))
    spread = base.mark_rule(strokeWidth=2, opacity=0.45).encode(
        x=encode_x, y=alt.Y(f"{center}:Q"), y2=f"{upper}:Q", color=colour, tooltip=tooltip
    )
    line = base.mark_line(point=True).encode(
        x=encode_x,
        # the chart's title names the metric: the axis says which percentiles, short enough to fit its height
        y=alt.Y(f"{center}:Q", title=f"{center} (rule to {upper})"),
        color=colour,
        tooltip=tooltip,
    )
    return alt.layer(spread, line).properties(title=metric_title(metric), width=width, height=height)


def distribution_chart(
    runs: pd.DataFrame, metric: str, x: str, color: str = "protocol", *, width: int = 320, height: int = 220
) -> alt.Chart:
    """Every run's ``metric``: a box per (``x``, ``color``) — ``runs`` is ``analytics.run_metrics``."""
    _require(runs, [x, color, metric])
    data = runs[runs[metric].notna()]
    if data.empty:
        raise ValueError(f"no run has a value for {metric!r}")
    data = data.assign(**{color: data[color].astype(str)})
    compared = sorted(data[color].unique())
    return (
        alt.Chart(_values(data, [x, color, metric]))
        .mark_boxplot(extent="min-max", size=14)
        .encode(
            x=alt.X(f"{x}:O", title=x.replace("_", " ")),
            xOffset=alt.XOffset(f"{color}:N", scale=alt.Scale(domain=compared)),
            y=alt.Y(f"{metric}:Q", title=metric_title(metric)),
            color=alt.Color(f"{color}:N", scale=alt.Scale(domain=compared, scheme=COMPARE_SCHEME), title=color),
        )
        .properties(title=f"{metric_title(metric)}, every run", width=width, height=height)
    )


@checked
def metric_panels(
    frame: pd.DataFrame, metrics: Sequence[str], x: str, color: str = "protocol", **options
) -> alt.HConcatChart:
    """``percentile_chart`` of each metric, side by side (metrics no run has are left out)."""
    present = [m for m in metrics if not frame[(frame["metric"] == m) & (frame["runs"] > 0)].empty]
    if not present:
        raise ValueError(f"no run has a value for any of {list(metrics)}")
    return alt.hconcat(*(percentile_chart(frame, m, x, color, **options) for m in present)).resolve_scale(
        color="shared"
    )
