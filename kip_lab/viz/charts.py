"""Altair chart builders: ``TraceFrames`` in, an ``alt.LayerChart`` spec out; rendering is separate.

Every builder is pure and takes an optional ``cursor_ms`` (the widget's current time) that
it draws as a black rule. Faults, coordinator timers and invariant violations from
``frames.markers`` are drawn as thin rules with a label.

Data go into the spec as inline values (``alt.Data(values=...)``), not as DataFrames, so
Altair's 5,000-row guard (``MaxRowsError``) never applies and no global data-transformer
setting is touched: a 100,000-event trace builds the same way as a short one.

``to_svg`` and ``to_png`` render with vl-convert (Vega bundled, no browser, and no network:
remote URLs are refused), ``to_json`` gives the Vega-Lite JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import altair as alt
import pandas as pd

from kip_lab.contract import checked
from kip_lab.viz.frames import (
    ShareFrames,
    TraceFrames,
    lag_frame,
    reprocessed_frame,
    share_frames,
    trace_frames,
)

STATUS_ORDER = ["assigned", "revoking", "pending"]
STATUS_OPACITY = [1.0, 0.6, 0.3]
STATUS_DASH = [[1, 0], [1, 0], [3, 2]]
MARKER_KINDS = ["fault", "timer", "invariant"]
MARKER_COLORS = ["#d62728", "#7b1fa2", "#000000"]
MARKER_CHAR_PX = 5.5  # width of one character of a marker label (9 px Helvetica), to keep labels apart
MARKER_ROW_PX = 11
ERROR_COLOR = "#d62728"
DROPPED_COLOR = "#9e9e9e"
API_PALETTE = ["#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#e377c2", "#bcbd22"]
CURSOR_COLOR = "#000000"
GAP_COLOR = "#d62728"
GAP_LABEL = "nobody holds it"
# The status legend (opacity and outline dash: the same field and legend, so one legend) draws grey
# squares: in a member's colour they would read as that member.
STATUS_LEGEND = alt.Legend(
    title="status", symbolType="square", symbolFillColor="#555555", symbolStrokeColor="#555555", symbolSize=160
)
# Epoch lines: a member's epoch dotted in the member's colour; the group's two epochs (kind ->
# colour, dash, label offset: the group epoch labelled above its line, the assignment epoch below).
GROUP_EPOCHS = {"group": ("#000000", [1, 0], -7), "assignment": ("#757575", [6, 3], 12)}
MEMBER_EPOCH_DASH = [2, 2]
DROP_REACH = 0.4  # a dropped message is drawn this far towards its destination (not onto a lane)
MEMBER_SCHEME: Final = "tableau10"


# ---------------------------------------------------------------------------- helpers
def _frames(source: Any) -> TraceFrames:
    return source if isinstance(source, TraceFrames) else trace_frames(source)


def _values(frame: pd.DataFrame | list[dict[str, Any]], columns: list[str] | None = None) -> alt.InlineData:
    """Inline data as one JSON text (NaN/NA -> null), parsed by Vega: no row limit, and cheap.

    A list of records would be walked value by value by Altair's ``to_dict`` and validated
    item by item against the schema — seconds for a few thousand rows. A JSON string is a
    single value to both, and Vega parses it (``format: {type: json}``) when it renders.
    ``columns`` keeps only the fields the chart uses.
    """
    if isinstance(frame, pd.DataFrame):
        if columns is not None:
            frame = frame[columns]
        text = frame.to_json(orient="records") if len(frame) else "[]"
    else:
        text = json.dumps(frame, sort_keys=True)
    return alt.InlineData(values=text, format=alt.DataFormat(type="json"))


def _markers(
    frames: TraceFrames, kinds: list[str] | None = None, time_range: tuple[float, float] | None = None
) -> pd.DataFrame:
    """Markers of the wanted kinds (faults, timers, invariant violations by default) inside the range."""
    wanted = MARKER_KINDS if kinds is None else kinds
    markers = frames.markers
    keep = markers["kind"].isin(wanted)
    if time_range is not None:
        keep &= (markers["time_ms"] >= time_range[0]) & (markers["time_ms"] <= time_range[1])
    return markers[keep].reset_index(drop=True)


def _in_range(value: float | None, time_range: tuple[float, float] | None) -> bool:
    return value is not None and (time_range is None or time_range[0] <= value <= time_range[1])


def _marker_color() -> Any:
    """A fixed colour per marker kind, without a scale (so no legend and no clash with the data's colours)."""
    kinds = list(zip(MARKER_KINDS, MARKER_COLORS, strict=True))
    rule = alt.when(alt.datum.kind == kinds[0][0]).then(alt.value(kinds[0][1]))
    for kind, colour in kinds[1:]:
        rule = rule.when(alt.datum.kind == kind).then(alt.value(colour))
    return rule.otherwise(alt.value("#616161"))


def _label_rows(times: list[float], labels: list[str], ms_per_px: float) -> list[int]:
    """A text row per marker label, so that no two labels overlap: each goes to the first row
    whose last label ends before it starts (labels are drawn left-aligned at their time)."""
    row_ends: list[float] = []
    rows = []
    for time_ms, label in zip(times, labels, strict=True):
        start, end = time_ms, time_ms + (len(label) * MARKER_CHAR_PX + 6) * ms_per_px
        row = next((i for i, row_end in enumerate(row_ends) if row_end <= start), len(row_ends))
        if row == len(row_ends):
            row_ends.append(end)
        else:
            row_ends[row] = end
        rows.append(row)
    return rows


def _vertical_markers(
    frames: TraceFrames, kinds: list[str] | None, time_range: tuple[float, float] | None, width: int
) -> list[alt.Chart]:
    markers = _markers(frames, kinds, time_range)
    if markers.empty:
        return []
    lo, hi = time_range if time_range is not None else (0, max(frames.end_ms, 1))
    markers = markers.sort_values(["time_ms", "step"], kind="stable").reset_index(drop=True)
    rows = _label_rows(list(markers["time_ms"]), list(markers["label"].astype(str)), (hi - lo) / max(width, 1))
    markers = markers.assign(
        label_y=[2 + MARKER_ROW_PX * row for row in rows],
        label=markers["label"].astype(str).str.replace("_", " "),  # "fail over share coordinator", read as words
    )
    base = alt.Chart(_values(markers))
    tooltip = [
        alt.Tooltip("kind:N"),
        alt.Tooltip("label:N"),
        alt.Tooltip("time_ms:Q", title="time (ms)"),
        alt.Tooltip("step:Q"),
        alt.Tooltip("detail:N"),
    ]
    rules = base.mark_rule(strokeDash=[4, 3], strokeWidth=1.5).encode(
        x="time_ms:Q", color=_marker_color(), tooltip=tooltip
    )
    labels = base.mark_text(align="left", baseline="top", dx=3, angle=0, fontSize=9).encode(
        x="time_ms:Q", y=alt.Y("label_y:Q", scale=None), text="label:N", color=_marker_color()
    )
    return [rules, labels]


def _vertical_cursor(
    cursor_ms: float | None, time_range: tuple[float, float] | None, clip: bool = False
) -> list[alt.Chart]:
    if not _in_range(cursor_ms, time_range):
        return []
    return [
        alt.Chart(_values([{"cursor_ms": cursor_ms}]))
        .mark_rule(color=CURSOR_COLOR, strokeWidth=2, clip=clip)
        .encode(x="cursor_ms:Q", tooltip=[alt.Tooltip("cursor_ms:Q", title="cursor (ms)")])
    ]


def _time_scale(frames: TraceFrames, time_range: tuple[float, float] | None) -> alt.Scale:
    lo, hi = time_range if time_range is not None else (0, max(frames.end_ms, 1))
    return alt.Scale(domain=[lo, hi], nice=False, zero=False)


def _layer(layers: list[alt.Chart], title: str, width: int, height: int) -> alt.LayerChart:
    return alt.layer(*layers).properties(title=title, width=width, height=height)


# ---------------------------------------------------------------------------- ownership
@checked
def ownership_swimlanes(
    frames: Any,
    cursor_ms: float | None = None,
    *,
    view: str = "client",
    markers: list[str] | None = None,
    time_range: tuple[float, float] | None = None,
    width: int = 720,
    height: int | None = None,
) -> alt.LayerChart:
    """One lane per partition; bars show who held it when (colour = member, opacity = status).

    Within a lane each member gets its own sub-row (``yOffset``); ``assigned`` is solid,
    ``revoking`` half-transparent, ``pending`` faint (the legend shows each on a bar). Red
    shading, with its own legend entry, marks the gaps when no member had the partition
    assigned; it is drawn where the coordinator records which partitions exist (a consumer
    group), so a classic group's gaps show as empty lane. ``view="coordinator"`` draws the coordinator's record
    view instead of the clients'.
    """
    frames = _frames(frames)
    if view not in ("client", "coordinator"):
        raise ValueError(f"view must be 'client' or 'coordinator', got {view!r}")
    data, gaps, partitions = _ownership_lanes(frames, view)
    members = sorted(set(data["member"]))
    if height is None:
        height = max(120, len(partitions) * max(18, 10 * max(1, len(members))))
    x = alt.X("start_ms:Q", title="time (ms)", scale=_time_scale(frames, time_range))
    # grid lines between the lanes (not through them): each bar sits inside its partition's band
    y = alt.Y(
        "partition:N",
        sort=partitions,
        scale=alt.Scale(domain=partitions, paddingInner=0.15),
        title="partition",
        axis=alt.Axis(grid=True, tickBand="extent"),
    )

    layers = [] if gaps.empty else [_gap_layer(gaps, x, y)]
    layers.append(_ownership_bars(data, members, x, y))
    layers += _vertical_markers(frames, markers, time_range, width)
    layers += _vertical_cursor(cursor_ms, time_range)
    title = "partition ownership" + (" (coordinator records)" if view == "coordinator" else "")
    return _layer(layers, title, width, height)


def _ownership_lanes(frames: TraceFrames, view: str) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(ownership intervals, gaps, lane names) of the view; one lane per (group, partition) when groups share topics."""
    data = frames.ownership if view == "client" else frames.ownership_coordinator
    gaps = frames.gaps if view == "client" else frames.gaps.iloc[0:0]
    partitions = frames.partitions or sorted(set(data["partition"]))
    groups = sorted(set(data["group_id"]) | set(gaps["group_id"]))
    if len(groups) > 1:
        data = data.assign(partition=data["group_id"] + ": " + data["partition"])
        gaps = gaps.assign(partition=gaps["group_id"] + ": " + gaps["partition"])
        partitions = [f"{g}: {p}" for g in groups for p in partitions]
    return data, gaps, partitions


def _gap_layer(gaps: pd.DataFrame, x: alt.X, y: alt.Y) -> alt.Chart:
    """Red shading, with its own legend entry, while no member has the partition assigned."""
    return (
        alt.Chart(_values(gaps))
        .transform_calculate(gap=f"'{GAP_LABEL}'")
        .mark_rect(opacity=0.15, clip=True)
        .encode(
            x=x,
            x2="end_ms:Q",
            y=y,
            fill=alt.Fill(
                "gap:N",
                scale=alt.Scale(domain=[GAP_LABEL], range=[GAP_COLOR]),
                legend=alt.Legend(title=None, orient="top"),
            ),
            tooltip=[
                alt.Tooltip("partition:N"),
                alt.Tooltip("start_ms:Q", title="unassigned from (ms)"),
                alt.Tooltip("end_ms:Q", title="until (ms)"),
                alt.Tooltip("duration_ms:Q", title="duration (ms)"),
            ],
        )
    )


def _ownership_bars(data: pd.DataFrame, members: list[str], x: alt.X, y: alt.Y) -> alt.Chart:
    """A bar per holding: a sub-row and colour per member, opacity and dash per status."""
    return (
        alt.Chart(_values(data))
        .mark_bar(strokeWidth=1, clip=True)
        .encode(
            x=x,
            x2="end_ms:Q",
            y=y,
            yOffset=alt.YOffset("member:N", scale=alt.Scale(domain=members)),
            color=alt.Color(
                "member:N", scale=alt.Scale(domain=members, scheme=MEMBER_SCHEME), legend=alt.Legend(title="member")
            ),
            stroke=alt.Stroke("member:N", scale=alt.Scale(domain=members, scheme=MEMBER_SCHEME), legend=None),
            opacity=alt.Opacity(
                "status:N",
                scale=alt.Scale(domain=STATUS_ORDER, range=STATUS_OPACITY),
                legend=STATUS_LEGEND,
            ),
            strokeDash=alt.StrokeDash(
                "status:N", scale=alt.Scale(domain=STATUS_ORDER, range=STATUS_DASH), legend=STATUS_LEGEND
            ),
            tooltip=[
                alt.Tooltip("partition:N"),
                alt.Tooltip("member:N"),
                alt.Tooltip("status:N"),
                alt.Tooltip("member_epoch:Q", title="member epoch"),
                alt.Tooltip("start_ms:Q", title="from (ms)"),
                alt.Tooltip("end_ms:Q", title="until (ms)"),
                alt.Tooltip("start_step:Q", title="from step"),
            ],
        )
    )


# ---------------------------------------------------------------------------- epochs
def _epoch_lines(frames: TraceFrames) -> pd.DataFrame:
    """The epoch changes plus a closing point at ``end_ms`` for every series still running."""
    epochs = frames.epochs.copy()
    if epochs.empty:
        return epochs
    if epochs["group_id"].nunique() > 1:
        epochs["series"] = epochs["group_id"] + ": " + epochs["series"]
    closing = []
    for (_series, _segment), rows in epochs.groupby(["series", "segment"], sort=True):
        last = rows.iloc[-1]
        if last["source"] != "end" and last["time_ms"] < frames.end_ms:
            closing.append({**last.to_dict(), "time_ms": frames.end_ms, "source": "extend"})
    if closing:
        epochs = pd.concat([epochs, pd.DataFrame(closing, columns=epochs.columns)], ignore_index=True)
    return epochs


@checked
def epoch_chart(
    frames: Any,
    cursor_ms: float | None = None,
    *,
    markers: list[str] | None = None,
    time_range: tuple[float, float] | None = None,
    width: int = 720,
    height: int = 260,
) -> alt.LayerChart:
    """Group epoch, assignment epoch and each member's epoch over time (step lines).

    A member's epoch is a dotted line in the member's colour: the colour scale and the "member"
    legend are the ownership chart's, so ``ownership_swimlanes(...) & epoch_chart(...)`` shows
    one member legend. The group epoch (solid black) and the assignment epoch (dashed grey) are
    labelled at their ends instead of in a legend. Epochs are whole numbers, and so are the ticks.
    """
    frames = _frames(frames)
    data = _epoch_lines(frames)
    members = sorted(set(data.loc[data["kind"] == "member", "series"])) if not data.empty else []
    time_scale = _time_scale(frames, time_range)
    x = alt.X("time_ms:Q", title="time (ms)", scale=time_scale)
    y = alt.Y("epoch:Q", title="epoch", axis=alt.Axis(tickMinStep=1, format="d"))
    tooltip = [
        alt.Tooltip("series:N"),
        alt.Tooltip("epoch:Q"),
        alt.Tooltip("time_ms:Q", title="time (ms)"),
        alt.Tooltip("step:Q"),
        alt.Tooltip("source:N"),
    ]
    color = alt.Color(
        "series:N", scale=alt.Scale(domain=members, scheme=MEMBER_SCHEME), legend=alt.Legend(title="member")
    )
    base = alt.Chart(_values(data))
    changes = base.transform_filter(alt.datum.source != "extend")
    step_line = {"interpolate": "step-after", "strokeWidth": 2, "clip": True}
    layers: list[alt.Chart] = [
        base.transform_filter(alt.datum.kind == "member")
        .mark_line(strokeDash=MEMBER_EPOCH_DASH, **step_line)
        .encode(x=x, y=y, color=color, detail="segment:N", tooltip=tooltip),
        changes.transform_filter(alt.datum.kind == "member")
        .mark_point(filled=True, size=30, clip=True)
        .encode(x=x, y=y, color=color, tooltip=tooltip),
    ]
    for kind, (colour, dash, label_dy) in GROUP_EPOCHS.items():
        layers += [
            base.transform_filter(alt.datum.kind == kind)
            .mark_line(color=colour, strokeDash=dash, **step_line)
            .encode(x=x, y=y, detail="segment:N", tooltip=tooltip),
            changes.transform_filter(alt.datum.kind == kind)
            .mark_point(filled=True, size=30, clip=True, color=colour)
            .encode(x=x, y=y, tooltip=tooltip),
        ]
        ends = _line_ends(data[data["kind"] == kind], frames, time_range)
        if not ends.empty:
            layers.append(
                alt.Chart(_values(ends))
                .mark_text(align="right", dx=-2, dy=label_dy, fontSize=11, color=colour)
                .encode(x=alt.X("time_ms:Q", scale=time_scale), y="epoch:Q", text="series:N")
            )
    layers += _vertical_markers(frames, markers, time_range, width)
    layers += _vertical_cursor(cursor_ms, time_range)
    return _layer(layers, "epochs", width, height)


def _line_ends(lines: pd.DataFrame, frames: TraceFrames, time_range: tuple[float, float] | None) -> pd.DataFrame:
    """Where each series' line ends within the chart's time range: the place for its label."""
    right = frames.end_ms if time_range is None else min(frames.end_ms, time_range[1])
    shown = lines[lines["time_ms"] <= right]
    ends = shown.sort_values("time_ms").groupby("series", as_index=False).last()
    return ends.assign(time_ms=right)[["series", "time_ms", "epoch"]]


# ---------------------------------------------------------------------------- message sequence
def _lanes(frames: TraceFrames) -> list[str]:
    messages = frames.messages
    actors = frames.actors or list(dict.fromkeys([*messages["from"], *messages["to"]]))
    servers = set(messages.loc[messages["direction"] == "request", "to"])
    return [a for a in actors if a not in servers] + sorted(a for a in actors if a in servers)


def _step_of(frames: TraceFrames, cursor_ms: float) -> float:
    """Just after the last step at or before ``cursor_ms`` (for a step-scaled sequence diagram)."""
    steps = frames.steps
    before = steps[steps["time_ms"] <= cursor_ms]
    return (float(before["step"].max()) if len(before) else 0.0) + 0.5


MESSAGE_COLUMNS = [  # the message fields the sequence diagram draws or shows on hover
    *("api", "direction", "from", "to", "status", "error", "sent_ms", "delivered_ms", "member_epoch"),
    *("correlation_id", "body_short", "from_x", "end_x", "y0", "y1", "category", "head"),
]


@dataclass(frozen=True)
class _SequenceAxes:
    """The sequence diagram's shared axes: a lane per actor across (named on top), time or step down the page."""

    lanes: list[str]
    y_title: str
    y_domain: list[float]

    def x(self, field: str) -> alt.X:
        axis = alt.Axis(
            orient="top",
            values=list(range(len(self.lanes))),
            labelExpr=f"{json.dumps(self.lanes)}[datum.value]",
            grid=False,
            title=None,
            labelAngle=0,
            labelFontWeight="bold",
            ticks=False,
            domain=False,
        )
        return alt.X(field, scale=alt.Scale(domain=[-0.5, len(self.lanes) - 0.5], nice=False, zero=False), axis=axis)

    def y(self, field: str) -> alt.Y:
        return alt.Y(
            field, scale=alt.Scale(domain=self.y_domain, reverse=True, nice=False, zero=False), title=self.y_title
        )


def message_sequence(
    frames: Any,
    cursor_ms: float | None = None,
    *,
    y_axis: str = "time",
    apis: list[str] | None = None,
    markers: list[str] | None = None,
    time_range: tuple[float, float] | None = None,
    width: int | None = None,
    height: int = 600,
) -> alt.LayerChart:
    """A sequence diagram: a vertical lane per actor, time down the page, one arrow per message.

    Requests are solid, responses dashed; a response carrying an error is red; a dropped
    message is grey and stops part-way (``DROP_REACH``) with a cross; one still in flight runs to the end.
    ``y_axis="step"`` spaces events by step instead of milliseconds (readable when many
    messages share a millisecond). ``apis`` keeps only those APIs; ``time_range`` zooms.
    Hover an arrow for its body.
    """
    if y_axis not in ("time", "step"):
        raise ValueError(f"y_axis must be 'time' or 'step', got {y_axis!r}")
    frames = _frames(frames)
    lanes = _lanes(frames)
    by_step = y_axis == "step"
    last_step = _last_step(frames)
    messages = _arrow_geometry(_shown_messages(frames, apis, time_range), frames, lanes, by_step, last_step)
    if width is None:
        width = max(360, 130 * len(lanes))
    if by_step:
        axes = _SequenceAxes(lanes, "step", [0, max(last_step, 1)])
    else:
        axes = _SequenceAxes(
            lanes, "time (ms)", list(time_range) if time_range is not None else [0, max(frames.end_ms, 1)]
        )

    layers = [_lifelines(axes)]
    if not messages.empty:
        layers += _message_arrows(messages, sorted(set(frames.messages["api"])), axes)
    layers += _sequence_markers(frames, markers, None if by_step else time_range, by_step, axes)
    if cursor_ms is not None and _in_range(cursor_ms, None if by_step else time_range):
        layers.append(_sequence_cursor(cursor_ms, _step_of(frames, cursor_ms) if by_step else cursor_ms, axes))
    return _layer(layers, "messages", width, height)


def _shown_messages(
    frames: TraceFrames, apis: list[str] | None, time_range: tuple[float, float] | None
) -> pd.DataFrame:
    """The messages of the wanted APIs that are in the air at some time inside the range."""
    data = frames.messages.copy()
    if apis is not None:
        data = data[data["api"].isin(apis)]
    if time_range is not None:
        data = data[(data["sent_ms"] <= time_range[1]) & (data["delivered_ms"].fillna(frames.end_ms) >= time_range[0])]
    return data


def _last_step(frames: TraceFrames) -> int:
    """The last step a marker or message is drawn at: where an arrow still in flight ends on a step axis."""
    last_step = int(frames.markers["step"].max()) if not frames.markers.empty else 0
    if not frames.messages.empty:
        last_step = max(last_step, int(frames.messages["sent_step"].max()))
        if frames.messages["delivered_step"].notna().any():
            last_step = max(last_step, int(frames.messages["delivered_step"].max()))
    return last_step


def _arrow_geometry(
    data: pd.DataFrame, frames: TraceFrames, lanes: list[str], by_step: bool, last_step: int
) -> pd.DataFrame:
    """Where each arrow starts and ends, its colour category and its head.

    A dropped message stops ``DROP_REACH`` of the way across, level, under a cross; one still in
    flight runs to the end of the diagram.
    """
    lane_of = {name: i for i, name in enumerate(lanes)}
    messages = data.assign(
        from_x=data["from"].map(lane_of).astype(float),
        to_x=data["to"].map(lane_of).astype(float),
    )
    dropped = messages["status"] == "dropped"
    in_flight = messages["status"] == "in_flight"
    end_x = messages["to_x"].where(~dropped, messages["from_x"] + DROP_REACH * (messages["to_x"] - messages["from_x"]))
    if by_step:
        y0 = messages["sent_step"].astype(float)
        y1 = messages["delivered_step"].astype("Float64").fillna(float(last_step)).astype(float)
        y1 = y1.where(~dropped, y0)
    else:
        y0 = messages["sent_ms"].astype(float)
        y1 = messages["delivered_ms"].astype("Float64").fillna(float(frames.end_ms)).astype(float)
        y1 = y1.where(~dropped, messages["dropped_ms"].astype("Float64").fillna(y0).astype(float))
    y1 = y1.where(~in_flight, float(last_step) if by_step else float(frames.end_ms))
    category = messages["api"].where(~messages["is_error"].astype(bool), "error").where(~dropped, "dropped")
    head = pd.Series("triangle-left", index=messages.index).where(
        messages["to_x"] < messages["from_x"], "triangle-right"
    )
    head = head.where(~dropped, "cross")
    return messages.assign(end_x=end_x, y0=y0, y1=y1, category=category, head=head)


def _lifelines(axes: _SequenceAxes) -> alt.Chart:
    """A grey vertical rule down each actor's lane."""
    lanes = axes.lanes
    lifelines = pd.DataFrame(
        {"lane": list(range(len(lanes))), "actor": lanes, "y0": axes.y_domain[0], "y1": axes.y_domain[1]}
    )
    return (
        alt.Chart(_values(lifelines))
        .mark_rule(color="#bdbdbd", strokeWidth=1)
        .encode(x=axes.x("lane:Q"), y=axes.y("y0:Q"), y2="y1:Q", tooltip=[alt.Tooltip("actor:N")])
    )


def _message_arrows(messages: pd.DataFrame, api_names: list[str], axes: _SequenceAxes) -> list[alt.Chart]:
    """Each message as a shaft (solid request, dashed response) and a head, coloured by API, error or drop."""
    categories = [*api_names, "error", "dropped"]
    palette = [API_PALETTE[i % len(API_PALETTE)] for i in range(len(api_names))] + [ERROR_COLOR, DROPPED_COLOR]
    color = alt.Color(
        "category:N", scale=alt.Scale(domain=categories, range=palette), legend=alt.Legend(title="message")
    )
    tooltip = [
        alt.Tooltip("api:N"),
        alt.Tooltip("direction:N"),
        alt.Tooltip("from:N"),
        alt.Tooltip("to:N"),
        alt.Tooltip("status:N"),
        alt.Tooltip("error:N"),
        alt.Tooltip("sent_ms:Q", title="sent (ms)"),
        alt.Tooltip("delivered_ms:Q", title="delivered (ms)"),
        alt.Tooltip("member_epoch:Q", title="member epoch"),
        alt.Tooltip("correlation_id:Q", title="correlation id"),
        alt.Tooltip("body_short:N", title="body"),
    ]
    base = alt.Chart(_values(messages, MESSAGE_COLUMNS))
    shafts = (
        base.mark_rule(strokeWidth=1.5, clip=True)
        .encode(
            x=axes.x("from_x:Q"),
            x2="end_x:Q",
            y=axes.y("y0:Q"),
            y2="y1:Q",
            color=color,
            strokeDash=alt.StrokeDash(
                "direction:N",
                scale=alt.Scale(domain=["request", "response"], range=[[1, 0], [5, 3]]),
                legend=alt.Legend(title="direction"),
            ),
            tooltip=tooltip,
        )
        .interactive(bind_x=False)
    )
    heads = base.mark_point(filled=True, size=45, opacity=1, clip=True).encode(
        x=axes.x("end_x:Q"),
        y=axes.y("y1:Q"),
        shape=alt.Shape(
            "head:N",
            scale=alt.Scale(
                domain=["triangle-right", "triangle-left", "cross"],
                range=["triangle-right", "triangle-left", "cross"],
            ),
            legend=None,
        ),
        color=color,
        tooltip=tooltip,
    )
    return [shafts, heads]


def _sequence_markers(
    frames: TraceFrames,
    kinds: list[str] | None,
    time_range: tuple[float, float] | None,
    by_step: bool,
    axes: _SequenceAxes,
) -> list[alt.Chart]:
    """Faults, timers and invariant violations as labelled horizontal rules across the lanes."""
    marks = _markers(frames, kinds, time_range)
    if marks.empty:
        return []
    marks = marks.assign(y=marks["step"] if by_step else marks["time_ms"])
    base = alt.Chart(_values(marks))
    rules = base.mark_rule(strokeDash=[4, 3], strokeWidth=1.2).encode(
        y=axes.y("y:Q"),
        color=_marker_color(),
        tooltip=[
            alt.Tooltip("kind:N"),
            alt.Tooltip("label:N"),
            alt.Tooltip("time_ms:Q"),
            alt.Tooltip("detail:N"),
        ],
    )
    labels = base.mark_text(align="left", baseline="bottom", dx=2, dy=-2, fontSize=9).encode(
        x=alt.value(0), y=axes.y("y:Q"), text="label:N", color=_marker_color()
    )
    return [rules, labels]


def _sequence_cursor(cursor_ms: float, y_value: float, axes: _SequenceAxes) -> alt.Chart:
    """The cursor as a black horizontal rule (at ``y_value``: its time, or just after its step)."""
    return (
        alt.Chart(_values([{"cursor_ms": cursor_ms, "y": y_value}]))
        .mark_rule(color=CURSOR_COLOR, strokeWidth=2)
        .encode(y=axes.y("y:Q"), tooltip=[alt.Tooltip("cursor_ms:Q", title="cursor (ms)")])
    )


# ---------------------------------------------------------------------------- share groups (KIP-932)
RECORD_STATE_ORDER = ["Available", "Acquired", "Acknowledged", "Archived"]
RECORD_STATE_COLORS = ["#90caf9", "#ffb300", "#66bb6a", "#9e9e9e"]


def record_state_strip(
    source: Any,
    group_id: str | None = None,
    topic_id: str | None = None,
    partition: int | None = None,
    *,
    cursor_ms: float | None = None,
    time_range: tuple[float, float] | None = None,
    title: str | None = None,
    width: int = 640,
    height: int = 300,
) -> alt.LayerChart:
    """One share-partition's records over time: offsets up, time across, coloured by state.

    Each interval is labelled with the record's delivery count; the share-partition start offset
    (SPSO, solid) and end offset (SPEO, dashed) are drawn as step lines; from a trace or a Lab,
    faults (a share coordinator failing over, a leader moving) are drawn as labelled rules.
    ``source`` is a trace, a Lab or ``ShareFrames``; the share-partition defaults to the first
    one in it.
    """
    frames = source if isinstance(source, ShareFrames) else share_frames(source)
    if frames.records.empty:
        raise ValueError("no share records in this trace (no share_acquired or share_state_write events)")
    first = frames.records.iloc[0]
    key = (
        group_id if group_id is not None else first["group_id"],
        topic_id if topic_id is not None else first["topic_id"],
        int(first["partition"]) if partition is None else partition,
    )
    records, offsets = _of_share_partition(frames.records, key).copy(), _of_share_partition(frames.offsets, key)
    if records.empty:
        raise ValueError(f"no records for share-partition {key}")
    if time_range is None:  # from the first record to a little after the last change
        lo, last = float(records["start_ms"].min()), float(records["start_ms"].max())
        time_range = (lo, last + max(1.0, (last - lo) * 0.1))
    lo, hi = time_range
    records["offset_end"] = records["offset"] + 1
    records["label"] = records["delivery_count"].astype(str)
    records["end_ms"] = records["end_ms"].clip(upper=hi)
    x_scale = alt.Scale(domain=[lo, hi], nice=False, zero=False)
    top = int(max(records["offset_end"].max(), offsets["speo"].max() if not offsets.empty else 0))
    bottom = int(min(records["offset"].min(), offsets["spso"].min() if not offsets.empty else top))
    y_scale = alt.Scale(domain=[bottom, top], nice=False, zero=False)

    layers = _record_intervals(records, x_scale, y_scale)
    if not offsets.empty:
        layers.append(_spso_speo_lines(offsets, hi, x_scale, y_scale))
    if not isinstance(source, ShareFrames):  # faults (a failover, a leader moving) as labelled rules
        layers += _vertical_markers(_frames(source), ["fault"], time_range, width)
    layers += _vertical_cursor(cursor_ms, None, clip=True)  # clipped to the strip's time range
    name = title or f"share-partition {key[1][:8]}-{key[2]} of group {key[0]}: record states"
    return _layer(layers, name, width, height)


def _of_share_partition(frame: pd.DataFrame, key: tuple[str, str, int]) -> pd.DataFrame:
    """The rows of one (group id, topic id, partition)."""
    keep = (frame["group_id"] == key[0]) & (frame["topic_id"] == key[1]) & (frame["partition"] == key[2])
    return frame[keep]


def _record_intervals(records: pd.DataFrame, x_scale: alt.Scale, y_scale: alt.Scale) -> list[alt.Chart]:
    """A cell per record and interval, coloured by state and labelled with its delivery count."""
    tooltip = [
        alt.Tooltip("offset:Q"),
        alt.Tooltip("state:N"),
        alt.Tooltip("delivery_count:Q", title="delivery count"),
        alt.Tooltip("member_id:N", title="acquired by"),
        alt.Tooltip("start_ms:Q", title="from (ms)"),
        alt.Tooltip("end_ms:Q", title="to (ms)"),
    ]
    base = alt.Chart(_values(records))
    return [
        base.mark_rect(stroke="white", strokeWidth=0.5, clip=True).encode(
            x=alt.X("start_ms:Q", title="time (ms)", scale=x_scale),
            x2="end_ms:Q",
            y=alt.Y("offset:Q", scale=y_scale, axis=alt.Axis(title="offset", tickMinStep=1)),
            y2="offset_end:Q",
            color=alt.Color(
                "state:N",
                scale=alt.Scale(domain=RECORD_STATE_ORDER, range=RECORD_STATE_COLORS),
                legend=alt.Legend(title="record state"),
            ),
            tooltip=tooltip,
        ),
        base.mark_text(align="left", baseline="middle", dx=2, fontSize=8, clip=True)
        .encode(x=alt.X("start_ms:Q", scale=x_scale), y=alt.Y("offset_mid:Q", scale=y_scale), text="label:N")
        .transform_calculate(offset_mid="datum.offset + 0.5"),
    ]


def _spso_speo_lines(offsets: pd.DataFrame, end_ms: float, x_scale: alt.Scale, y_scale: alt.Scale) -> alt.Chart:
    """The start (solid) and end (dashed) offsets as step lines, each carried on to ``end_ms``."""
    lines = offsets.melt(
        id_vars=["time_ms"], value_vars=["spso", "speo"], var_name="bound", value_name="offset"
    ).dropna()
    lines = pd.concat([lines, lines.groupby("bound", as_index=False).last().assign(time_ms=end_ms)], ignore_index=True)
    return (
        alt.Chart(_values(lines))
        .mark_line(interpolate="step-after", strokeWidth=2, color="#000000", clip=True)
        .encode(
            x=alt.X("time_ms:Q", scale=x_scale),
            y=alt.Y("offset:Q", scale=y_scale),
            strokeDash=alt.StrokeDash(
                "bound:N",
                scale=alt.Scale(domain=["spso", "speo"], range=[[1, 0], [5, 3]]),
                legend=alt.Legend(title="SPSO / SPEO"),
            ),
            tooltip=[alt.Tooltip("bound:N"), alt.Tooltip("offset:Q"), alt.Tooltip("time_ms:Q", title="time (ms)")],
        )
    )


def placeholder_chart(
    message: str, *, cursor_ms: float | None = None, width: int = 640, height: int = 60
) -> alt.LayerChart:
    """A timeline with nothing to show but ``message`` (and the cursor, so a widget can still move it)."""
    text = alt.Chart(_values([{"message": message}])).mark_text(fontSize=12).encode(text="message:N")
    return _layer([text, *_vertical_cursor(cursor_ms, None, clip=True)], "", width, height)


# ---------------------------------------------------------------------------- export
def _vl_version() -> str | None:
    import vl_convert as vlc

    major_minor = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return major_minor if major_minor in vlc.get_vegalite_versions() else None


def to_json(chart: alt.TopLevelMixin, indent: int | None = 2) -> str:
    """The Vega-Lite spec as JSON text (sorted keys: the same chart gives the same text)."""
    return chart.to_json(indent=indent, sort_keys=True)


def to_svg(chart: alt.TopLevelMixin) -> str:
    """Render to SVG text with vl-convert, offline (remote data or images are refused)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_dict(), vl_version=_vl_version(), allowed_base_urls=[])


def to_png(chart: alt.TopLevelMixin, scale: float = 1.0, ppi: float | None = None) -> bytes:
    """Render to PNG bytes with vl-convert, offline."""
    import vl_convert as vlc

    return vlc.vegalite_to_png(chart.to_dict(), vl_version=_vl_version(), scale=scale, ppi=ppi, allowed_base_urls=[])


# ---------------------------------------------------------------------------- the delivery ledger
REPROCESSED_COLOR = "#000000"
REPROCESSED_LABEL = "re-processed"


@checked
def reprocessing_swimlanes(
    trace: Any, cursor_ms: float | None = None, *, time_range: tuple[float, float] | None = None, **options: Any
) -> alt.LayerChart:
    """The ownership swimlanes (``ownership_swimlanes``, same options) with each range a group processed
    again marked on its partition's lane: a black-edged box over the time its records were processed
    the second time, its tooltip naming the member, the offsets and who had processed them before."""
    frames = trace_frames(trace)
    lanes = ownership_swimlanes(frames, cursor_ms, time_range=time_range, **options)
    ranges = reprocessed_frame(trace)
    if ranges.empty:
        return lanes
    labels = {
        (row.topic_id, row.partition_index): row.partition
        for row in frames.ownership[["topic_id", "partition_index", "partition"]].itertuples()
    }
    ranges = ranges.assign(
        partition=[
            labels.get(tp, name)
            for tp, name in zip(
                zip(ranges["topic_id"], ranges["partition_index"], strict=True), ranges["partition"], strict=True
            )
        ],
        offsets=ranges["first"].astype(str) + ".." + (ranges["end"] - 1).astype(str),
        mark=REPROCESSED_LABEL,
    )
    if len(set(frames.ownership["group_id"])) > 1:  # the lanes are "group: partition"
        ranges = ranges.assign(partition=ranges["group_id"] + ": " + ranges["partition"])
    base = alt.Chart(_values(ranges))
    x = alt.X("start_ms:Q", scale=_time_scale(frames, time_range))
    tooltip = [
        alt.Tooltip("partition:N"),
        alt.Tooltip("member:N", title="re-processed by"),
        alt.Tooltip("offsets:N"),
        alt.Tooltip("records:Q"),
        alt.Tooltip("previous:N", title="processed before by"),
        alt.Tooltip("last_commit:Q", title="last commit"),
    ]
    boxes = base.mark_rect(fillOpacity=0.2, fill=REPROCESSED_COLOR, strokeWidth=1.5, clip=True).encode(
        x=x,
        x2="end_ms:Q",
        y=alt.Y("partition:N"),
        stroke=alt.Stroke(
            "mark:N",
            scale=alt.Scale(domain=[REPROCESSED_LABEL], range=[REPROCESSED_COLOR]),
            legend=alt.Legend(title=None, orient="top"),
        ),
        tooltip=tooltip,
    )
    # A box may be a few milliseconds wide: a label at its start says how many records came back.
    labels = base.mark_text(align="right", dx=-3, fontSize=10, fontWeight="bold", color=REPROCESSED_COLOR).encode(
        x=x, y=alt.Y("partition:N"), text="label:N", tooltip=tooltip
    )
    marks = alt.layer(boxes, labels).transform_calculate(label="'↺ ' + datum.records")
    return (
        alt.layer(lanes, marks)
        .resolve_scale(stroke="independent")
        .properties(title="partition ownership and re-processed records")
    )


@checked
def lag_chart(
    trace: Any,
    cursor_ms: float | None = None,
    *,
    time_range: tuple[float, float] | None = None,
    width: int = 720,
    height: int = 220,
) -> alt.LayerChart:
    """Records each partition was behind its log end (``lag_frame``), over time, a line per partition
    (per group and partition when groups share topics); faults are marked as on the other charts."""
    frames = trace_frames(trace)
    lag = lag_frame(trace)
    if len(set(lag["group_id"])) > 1:
        lag = lag.assign(partition=lag["group_id"] + ": " + lag["partition"])
    partitions = list(dict.fromkeys(lag.sort_values(["group_id", "topic_id", "partition_index"])["partition"]))
    lines = (
        alt.Chart(_values(lag, ["partition", "time_ms", "lag_records"]))
        .mark_line(interpolate="linear", clip=True, strokeWidth=1.5)
        .encode(
            x=alt.X("time_ms:Q", title="time (ms)", scale=_time_scale(frames, time_range)),
            y=alt.Y("lag_records:Q", title="records behind the log end"),
            color=alt.Color("partition:N", sort=partitions, scale=alt.Scale(scheme=MEMBER_SCHEME)),
            tooltip=[
                alt.Tooltip("partition:N"),
                alt.Tooltip("time_ms:Q", title="time (ms)"),
                alt.Tooltip("lag_records:Q", title="lag (records)"),
            ],
        )
    )
    layers = [lines, *_vertical_markers(frames, None, time_range, width), *_vertical_cursor(cursor_ms, time_range)]
    return _layer(layers, "lag per partition (records behind the log end)", width, height)
